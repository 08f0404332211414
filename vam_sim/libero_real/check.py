"""`vam-stack libero-check`: does the mocked bridge follow real LIBERO where a policy would notice?

The same probes run on the mocked bridge (in this process) and on real LIBERO (through
`RealLiberoEnv`, in LIBERO's own environment), and what matters for a policy moving between
the two is compared; any mismatch fails the check (exit 1):
  shapes       agentview / wrist uint8 [S, S, 3], proprio float32 [8]
  tasks        the suite's ten instructions, in order and wording
  limits       steps per second and the episode limit (20 Hz controller ticks)
  reset pose   end-effector position (LIBERO's world frame) and orientation at reset
  translation  for +-x, +-y, +-z: the sign along the commanded axis and the metres per step at
               |a| = 1 (LIBERO's controller takes ~3 ticks to reach speed: the steady ticks count)
  rotation     for +-rx, +-ry, +-rz: the sign and the radians per step at |a| = 1
  agent view   which way the gripper moves in the agent-view image for +x, +y, +z (projected
               with each environment's own camera)
  wrist view   which way a fixed table point moves in the wrist image for +x, +y (the camera
               rides on the hand; +z changes scale, not position)
  gripper      +1 closes the fingers, -1 opens them
Reported, not failed, with the reason printed: cross-axis drift (LIBERO's operational-space
controller couples axes; the mock is kinematic) and how initial states are drawn.
Real LIBERO needs its own environment: `--libero-python <venv>/bin/python` or $VAM_LIBERO_PYTHON.
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from vam_sim.libero_mock.env import make_env
from vam_sim.libero_mock.tasks import LIBERO_NAMES, canonical_suite, suite_tasks
from vam_stack.outputs import write_json_output

from .client import RealLiberoEnv, libero_python

PROBE_TICKS = 8  # ticks per axis probe
STEADY_FROM = 3  # ticks LIBERO's controller needs to reach speed; later ticks are averaged
TRANSLATION_RATIO = (0.75, 1.33)  # mock / real metres per tick that still count as the same
ROTATION_RATIO = (0.6, 1.6)  # mock / real radians per tick (LIBERO's differ by axis: 0.065-0.10)
RESET_POS_TOL = 0.03  # m between the reset positions
RESET_ROT_TOL = 0.1  # rad between the reset orientations
AXES = ("x", "y", "z")


def _act(axis: int | None = None, sign: float = 1.0, gripper: float = -1.0) -> np.ndarray:
    a = np.zeros(7, np.float32)
    if axis is not None:
        a[axis] = sign
    a[6] = gripper
    return a


def _rot(aa: np.ndarray) -> np.ndarray:
    r, _ = cv2.Rodrigues(np.asarray(aa, np.float64).reshape(3, 1))
    return r


def _rotvec(r: np.ndarray) -> np.ndarray:
    v, _ = cv2.Rodrigues(r)
    return v.reshape(3)


def probe(env: Any, tasks: list[list[str]]) -> dict:
    """Run the probes on one environment (mock or real); returns the measurements."""
    obs = env.reset()
    out: dict[str, Any] = {
        "agentview": [list(obs["agentview"].shape), str(obs["agentview"].dtype)],
        "wrist": [list(obs["wrist"].shape), str(obs["wrist"].dtype)],
        "proprio": [list(obs["proprio"].shape), str(obs["proprio"].dtype)],
        "reset_pos": [round(float(v), 4) for v in obs["proprio"][:3]],
        "reset_axis_angle": [round(float(v), 4) for v in obs["proprio"][3:6]],
        "instructions": [t[1] for t in tasks], "control_hz": float(env.control_hz), "max_steps": int(env.max_steps)}
    trans, rot, agent, wrist, drift = {}, {}, {}, {}, {}
    for axis in range(6):
        for sign in (1.0, -1.0):
            key = f"{'+' if sign > 0 else '-'}{'r' if axis >= 3 else ''}{AXES[axis % 3]}"
            obs = env.reset()
            p0 = obs["proprio"][:3].astype(np.float64)
            pts = np.array([p0, [p0[0], p0[1], p0[2] - 0.25]])  # the eef, and a point below it
            px0 = env.project(pts)
            poses = [obs["proprio"].astype(np.float64)]
            for _ in range(PROBE_TICKS):
                obs, *_ = env.step(_act(axis, sign))
                poses.append(obs["proprio"].astype(np.float64))
            px1 = env.project(np.array([poses[-1][:3], pts[1]]))  # the eef where it went; the fixed point
            poses = np.stack(poses)
            if axis < 3:
                d = np.diff(poses[:, :3], axis=0)[STEADY_FROM:].mean(axis=0)   # steady metres per tick
                trans[key] = round(float(d[axis]), 5)
                drift[key] = round(float(np.linalg.norm(np.delete(d, axis)) / max(abs(d[axis]), 1e-9)), 3)
                agent[key] = [round(float(v), 2) for v in np.subtract(px1["agentview"][0], px0["agentview"][0])]
                wrist[key] = [round(float(v), 2) for v in np.subtract(px1["wrist"][1], px0["wrist"][1])]
            else:
                steps = [_rotvec(_rot(b) @ _rot(a).T) for a, b in zip(poses[:-1, 3:6], poses[1:, 3:6])]
                rot[key] = round(float(np.mean([s[axis - 3] for s in steps[STEADY_FROM:]])), 4)
    out.update(translation=trans, rotation=rot, agent_px=agent, wrist_px=wrist, drift=drift)
    obs = env.reset()
    gaps = [float(obs["proprio"][6] - obs["proprio"][7])]
    for g in (1.0, -1.0):
        for _ in range(PROBE_TICKS):
            obs, *_ = env.step(_act(None, gripper=g))
        gaps.append(float(obs["proprio"][6] - obs["proprio"][7]))
    out["finger_gap"] = [round(g, 4) for g in gaps]  # open, after +1 (close), after -1 (open)
    return out


def _direction(d: list[float]) -> str:
    """The dominant image direction of a pixel displacement (row, col)."""
    r, c = d
    if max(abs(r), abs(c)) < 0.5:
        return "still"
    return ("down" if r > 0 else "up") if abs(r) >= abs(c) else ("right" if c > 0 else "left")


def compare(mock: dict, real: dict) -> tuple[list[str], list[str], list[dict]]:
    """(failures, notes with their reasons, table rows) for the two probe results."""
    fail, notes, rows = [], [], []

    def row(name: str, m: Any, r: Any, same: bool, why: str = "") -> None:
        rows.append({"convention": name, "real": r, "mock": m, "same": same, "reason": why})
        if not same and not why:
            fail.append(f"{name}: mock {m} vs real {r}")

    for key in ("agentview", "wrist", "proprio"):
        row(f"{key} shape", mock[key], real[key], mock[key] == real[key])
    row("steps per second", mock["control_hz"], real["control_hz"], mock["control_hz"] == real["control_hz"])
    row("episode limit [steps]", mock["max_steps"], real["max_steps"], mock["max_steps"] == real["max_steps"])
    for i, (m, r) in enumerate(zip(mock["instructions"], real["instructions"])):
        row(f"task {i}", m, r, m == r)
    if len(mock["instructions"]) != len(real["instructions"]):
        row("task count", len(mock["instructions"]), len(real["instructions"]), False)
    dpos = float(np.linalg.norm(np.subtract(mock["reset_pos"], real["reset_pos"])))
    row("reset eef position [m]", mock["reset_pos"], real["reset_pos"], dpos <= RESET_POS_TOL)
    drot = float(np.linalg.norm(_rotvec(_rot(mock["reset_axis_angle"]) @ _rot(real["reset_axis_angle"]).T)))
    row("reset eef orientation (axis-angle)", mock["reset_axis_angle"], real["reset_axis_angle"], drot <= RESET_ROT_TOL)
    for key, r in real["translation"].items():
        m = mock["translation"][key]
        ratio = m / r if r else float("inf")
        row(f"action {key}: m per step", m, r, TRANSLATION_RATIO[0] <= ratio <= TRANSLATION_RATIO[1])
    for key, r in real["rotation"].items():
        m = mock["rotation"][key]
        ratio = m / r if r else float("inf")
        row(f"action {key}: rad per step", m, r, ROTATION_RATIO[0] <= ratio <= ROTATION_RATIO[1])
    for key in ("+x", "-x", "+y", "-y", "+z", "-z"):
        m, r = _direction(mock["agent_px"][key]), _direction(real["agent_px"][key])
        row(f"action {key}: gripper in the agent view moves", m, r, m == r and m != "still")
    for key in ("+x", "-x", "+y", "-y"):
        m, r = _direction(mock["wrist_px"][key]), _direction(real["wrist_px"][key])
        row(f"action {key}: the table in the wrist view moves", m, r, m == r and m != "still")
    for who, gaps in (("mock", mock["finger_gap"]), ("real", real["finger_gap"])):
        if not (gaps[1] < gaps[0] and gaps[2] > gaps[1]):
            fail.append(f"gripper sign ({who}): gap open {gaps[0]}, after +1 {gaps[1]}, after -1 {gaps[2]} "
                        "(expected +1 = close, -1 = open)")
    row("gripper +1 closes, -1 opens", mock["finger_gap"], real["finger_gap"],
        not any(f.startswith("gripper sign") for f in fail))
    worst = max(real["drift"].values())
    row("cross-axis drift (worst off-axis / on-axis motion)", max(mock["drift"].values()), worst, False,
        "LIBERO's operational-space controller couples the axes; the mock moves the commanded axis only")
    notes.append(f"cross-axis drift: real LIBERO moves up to {worst:.0%} off-axis per on-axis metre; "
                 "the mock is kinematic and has none")
    row("initial states", "hashed (suite, task, episode, seed)", "50 fixed states per task", False,
        "the mock draws its layout jitter from a seed; on real LIBERO the runner uses fixed state rep + 10 x seed")
    return fail, notes, rows


def markdown(rows: list[dict]) -> str:
    lines = ["| convention | real LIBERO | mock | |", "|---|---|---|---|"]
    for r in rows:
        verdict = "same" if r["same"] else (f"differs: {r['reason']}" if r["reason"] else "**MISMATCH**")
        lines.append(f"| {r['convention']} | {r['real']} | {r['mock']} | {verdict} |")
    return "\n".join(lines)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--suite", default="goal", help="spatial, object, goal or long (LIBERO's names work too: libero_10, 10)")
    p.add_argument("--task", type=int, default=0, help="task index in the suite")
    p.add_argument("--libero-python", help="interpreter of the LIBERO environment (default $VAM_LIBERO_PYTHON)")
    p.add_argument("--backend", choices=("libero", "mock"), default="libero",
                   help="mock: serve the mocked bridge through the server (tests the check itself)")
    p.add_argument("--json", type=Path, help="also write the report here ('-' = stdout)")
    p.add_argument("--markdown", type=Path, help="also write the comparison table here")


def run(args: argparse.Namespace) -> int:
    if args.backend != "mock":
        libero_python(args.libero_python)            # one line, before minutes of probing the mock
    try:
        suite = canonical_suite(args.suite)
    except ValueError as e:
        raise SystemExit(f"libero-check: {e}") from None
    if suite not in LIBERO_NAMES:
        raise SystemExit(f"libero-check: {suite!r} exists only in the mock; real LIBERO has {sorted(LIBERO_NAMES)}")
    with make_env(suite, args.task, 0, 0) as env:
        mock = probe(env, [[t.name, t.instruction] for t in suite_tasks(suite)])
    with RealLiberoEnv(suite, args.task, 0, python=args.libero_python, backend=args.backend) as env:
        real = probe(env, env.suite_tasks())
    fail, notes, rows = compare(mock, real)
    report = {"suite": suite, "task": args.task, "backend": args.backend, "mock": mock, "real": real,
              "failures": fail, "notes": notes, "table": rows}
    table = markdown(rows)
    print(table)
    for n in notes:
        print(f"note: {n}")
    for f in fail:
        print(f"MISMATCH: {f}")
    print("conventions match" if not fail else f"{len(fail)} convention mismatch(es)")
    if args.json is not None:
        write_json_output(args.json, report)
    if args.markdown is not None:
        args.markdown.write_text(table + "\n")
    return 1 if fail else 0
