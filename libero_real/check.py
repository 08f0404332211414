"""`vam-stack libero-check`: do the mocked bridge's conventions match real LIBERO's?

Drives the same probe actions through the mocked bridge (in this process) and real LIBERO
(through `RealLiberoEnv`) and compares what comes back:
  shapes       agentview / wrist uint8 [224, 224, 3], proprio float32 [8]
  orientation  raising the gripper (+z) moves the changed pixels of agentview upwards
               (rows decrease) in an upright image; an upside-down image shows the opposite
  axes         +x / +y / +z actions move proprio[0..2] the same way (proprio = eef position)
  gripper      +1 closes (finger gap proprio[6] - proprio[7] shrinks), -1 opens
  rate         metres per step at |action| = 1, steps per second, episode length in seconds
  frame        eef position at reset (informational: the mock uses its own table frame)
  task         the instruction of the same suite/index (a different task order is a warning)
Sign and orientation mismatches fail the check (exit 1); rate, time limit and frame
differences are reported as warnings. Real LIBERO needs its own environment:
`--libero-python <venv>/bin/python` or $VAM_LIBERO_PYTHON.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np

PROBE_STEPS = 4  # steps per axis probe
ORIENT_STEPS = 8  # steps of +z for the image-orientation probe


def _act(axis: int | None = None, sign: float = 1.0, gripper: float = -1.0) -> np.ndarray:
    a = np.zeros(7, np.float32)
    if axis is not None:
        a[axis] = sign
    a[6] = gripper
    return a


def probe(env: Any) -> dict:
    """Run the probe actions on one environment (mock or real); returns the measurements."""
    obs = env.reset()
    out: dict[str, Any] = {
        "agentview": [list(obs["agentview"].shape), str(obs["agentview"].dtype)],
        "wrist": [list(obs["wrist"].shape), str(obs["wrist"].dtype)],
        "proprio": [list(obs["proprio"].shape), str(obs["proprio"].dtype)],
        "eef_at_reset": [round(float(v), 4) for v in obs["proprio"][:3]],
        "instruction": env.instruction, "control_hz": float(env.control_hz), "max_steps": int(env.max_steps),
        "episode_s": round(env.max_steps / env.control_hz, 2)}
    frames = [obs["agentview"].astype(np.float32)]
    z0 = obs["proprio"][2]
    for _ in range(ORIENT_STEPS):
        obs, *_ = env.step(_act(2, 1.0))
        frames.append(obs["agentview"].astype(np.float32))
    rows = []
    for a, b in zip(frames, frames[1:]):
        d = np.abs(b - a).sum(axis=2)  # [H, W] change between consecutive frames
        if d.sum() > 0:
            rows.append(float((d.sum(axis=1) * np.arange(d.shape[0])).sum() / d.sum()))
    out["orientation_row_slope"] = float(np.polyfit(np.arange(len(rows)), rows, 1)[0]) if len(rows) >= 3 else 0.0
    out["m_per_step"] = round(float(obs["proprio"][2] - z0) / ORIENT_STEPS, 5)
    moves = []
    for axis in range(3):
        p0 = obs["proprio"][:3].copy()
        for _ in range(PROBE_STEPS):
            obs, *_ = env.step(_act(axis, 1.0 if axis < 2 else -1.0))
        d = obs["proprio"][:3] - p0
        moves.append([round(float(v), 4) for v in d])
    out["axis_moves"] = moves  # rows: +x, +y, -z actions; columns: proprio x, y, z change
    gaps = [float(obs["proprio"][6] - obs["proprio"][7])]
    for g in (1.0, -1.0):
        for _ in range(PROBE_STEPS):
            obs, *_ = env.step(_act(None, gripper=g))
        gaps.append(float(obs["proprio"][6] - obs["proprio"][7]))
    out["finger_gap"] = [round(g, 4) for g in gaps]  # open, after +1 (close), after -1 (open)
    return out


def compare(mock: dict, real: dict) -> tuple[list[str], list[str]]:
    """(failures, warnings) naming each convention that differs."""
    fail, warn = [], []
    for key in ("agentview", "wrist", "proprio"):
        if mock[key] != real[key]:
            fail.append(f"{key}: mock {mock[key]} vs real {real[key]}")
    if np.sign(mock["orientation_row_slope"]) != np.sign(real["orientation_row_slope"]):
        fail.append(f"image orientation: raising the gripper moves agentview content by "
                    f"{mock['orientation_row_slope']:+.2f} rows/step in the mock, {real['orientation_row_slope']:+.2f} in real")
    for i, name in enumerate(("+x", "+y", "-z")):
        sm, sr = np.sign(mock["axis_moves"][i][i]), np.sign(real["axis_moves"][i][i])
        if sm != sr or sm == 0:
            fail.append(f"action {name} moves proprio[{i}] by {mock['axis_moves'][i][i]} (mock) vs {real['axis_moves'][i][i]} (real)")
    for who, gaps in (("mock", mock["finger_gap"]), ("real", real["finger_gap"])):
        if not (gaps[1] < gaps[0] and gaps[2] > gaps[1]):
            fail.append(f"gripper sign ({who}): gap open {gaps[0]}, after +1 {gaps[1]}, after -1 {gaps[2]} "
                        "(expected +1 = close, -1 = open)")
    ratio = abs(mock["m_per_step"]) / max(abs(real["m_per_step"]), 1e-9)
    if not 0.5 <= ratio <= 2.0:
        warn.append(f"translation per step at |a| = 1: mock {mock['m_per_step']} m vs real {real['m_per_step']} m")
    if mock["control_hz"] != real["control_hz"]:
        warn.append(f"policy steps per second: mock {mock['control_hz']} vs real {real['control_hz']}")
    if abs(mock["episode_s"] - real["episode_s"]) > 0.5:
        warn.append(f"episode time limit: mock {mock['episode_s']} s vs real {real['episode_s']} s")
    if mock["instruction"] != real["instruction"]:
        warn.append(f"task instruction: mock {mock['instruction']!r} vs real {real['instruction']!r}")
    warn.append(f"eef frame (informational): mock reset at {mock['eef_at_reset']}, real at {real['eef_at_reset']}")
    return fail, warn


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--suite", default="goal", choices=("spatial", "object", "goal", "10"))
    p.add_argument("--task", type=int, default=0, help="task index in the suite")
    p.add_argument("--libero-python", help="interpreter of the LIBERO environment (default $VAM_LIBERO_PYTHON)")
    p.add_argument("--backend", choices=("libero", "mock"), default="libero",
                   help="mock: serve the mocked bridge through the server (tests the check itself)")
    p.add_argument("--json", type=Path, help="also write the report here")


def run(args: argparse.Namespace) -> int:
    from libero_bridge.env import make_env

    from .client import RealLiberoEnv

    with make_env(args.suite, args.task, 0, 0) as env:
        mock = probe(env)
    with RealLiberoEnv(args.suite, args.task, 0, python=args.libero_python, backend=args.backend) as env:
        real = probe(env)
    fail, warn = compare(mock, real)
    report = {"suite": args.suite, "task": args.task, "backend": args.backend, "mock": mock, "real": real,
              "failures": fail, "warnings": warn}
    print(json.dumps({"mock": mock, "real": real}, indent=1))
    for w in warn:
        print(f"WARNING: {w}")
    for f in fail:
        print(f"MISMATCH: {f}")
    print("conventions match" if not fail else f"{len(fail)} convention mismatch(es)")
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return 1 if fail else 0
