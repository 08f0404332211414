"""The one episode runner under every simulator: what an episode records, whatever the world.

A simulator adapter (the mocked LIBERO bridge, real LIBERO, the MuJoCo YAM) builds its world,
steps it, and hands each executor step to a `PolicyEpisode`. Everything else is here, once:

- `EpisodeRunner`: the output directory and the one rosbag2 MCAP recording (opened only after
  every check has passed, flushed after each episode), the recording clock (episodes follow
  each other in simulated time, one second apart), and the default policy
  (`resolve_checkpoint` + `build_policy`).
- `PolicyEpisode`: per episode, the TR trace labelled with the expert's phases, one record per
  replan, the telemetry written to the recording, failed replans (inference errors, refused
  inputs, the first error), ticks held or run past `execute`, and at the end the episode's
  outcome: "error" when no chunk was ever installed, the TR trace PNG and the TR summary.
- `RealtimeLoop`: a world stepped by a realtime executor's tick thread (one control period per
  tick of the wall clock) while the policy infers in the worker thread, with the executor's
  timing for summary.json.
- Run totals for summary.json: `summarise` (latency, TR, reach, realtime, errors), success
  counts and their 95 % Wilson intervals.
"""
from __future__ import annotations

import logging
import math
import os
import threading
import time
import zlib
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

import numpy as np

from vam_control.runtime import warm_up
from vam_stack.config import check
from vam_stack.recording import McapRecorder
from vam_stack.tr_trace import TRTrace

from .libero_mock.reach import reach_stats

log = logging.getLogger(__name__)

STATUS_KEYS = ("suite", "task", "instruction", "seed", "episode", "success", "steps", "termination")


def _num(v) -> float | None:
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)


def replan_record(step: int, tel: dict) -> dict:
    """The summary.json record of one replan from its telemetry (NaN -> None)."""
    return {"step": step, "tr": _num(tel.get("tr")), "tr0": _num(tel.get("tr0")), "s": _num(tel.get("s")),
            "w_lang": _num(tel.get("w_lang")), "w_plan": _num(tel.get("w_plan")),
            "branches_computed": list(tel.get("branches_computed", [])), "latency_ms": _num(tel.get("latency_ms")),
            "tr_steps": [float(x) for x in tel.get("tr_steps", [])], "guidance": tel.get("guidance"),
            "rtc_delay": tel.get("rtc_delay"), "rtc_method": tel.get("rtc_method")}   # a continued chunk (None: free)


def is_refusal(error: str | None) -> bool:
    """Whether an executor error string (`"<Type>: <message>"`) is the policy refusing its input:
    `infer` raised a ValueError (ConfigError included), e.g. frames of the wrong size."""
    return error is not None and error.split(":", 1)[0] in ("ValueError", "ConfigError")


def check_run_device(device: str, backend: str, policy: str) -> None:
    """A run config's `device` and `backend`: a name the policy knows (ConfigError quoting it), and the
    defaults unless the vam policy runs (the scripted expert has no networks to place)."""
    from vam_model.backends.base import BACKENDS   # lazy, as every vam_model import here: torch (a scripted
    from vam_model.device import check_device_name  # policy's run never loads it)

    try:
        check_device_name(device)
    except ValueError as e:
        check(False, str(e).replace("policy.device", "device"))
    check(backend in BACKENDS, f"backend must be one of {BACKENDS}, got {backend!r}")
    check(policy == "vam" or (device, backend) == ("auto", "torch"),
          f"device {device!r} / backend {backend!r} place the vam policy's networks; the {policy!r} policy has none")


def check_temperature(value, policy: str) -> None:
    """A run config's `action_temperature`: a number in [0, 1] (ConfigError quoting it), and the
    default 1 unless the vam policy runs (the scripted expert draws no action noise)."""
    from vam_model.policy import check_action_temperature   # lazy: torch (see check_run_device)

    check_action_temperature(value, "action_temperature")
    check(policy == "vam" or value == 1.0,
          f"action_temperature {value!r} scales the vam policy's action noise; the {policy!r} policy draws none")


class EpisodeRunner:
    """Base of every simulator's runner: output directory, recording and recording clock.

    Subclasses implement `run_episode(index) -> dict` and call `open_outputs()` from their
    `__enter__` once their own checks have passed; `overwrite=True` lets the recorder replace an
    existing recording.mcap (the CLI asks for `--overwrite` before a non-empty directory is used)."""

    def __init__(self, out: str | Path, record: bool, plots: bool, policy: Any = None, overwrite: bool = False):
        self.out = Path(out)
        self.record, self.plots = record, plots
        self.policy = policy
        self.overwrite = overwrite
        self.recorder = None
        self._t = 0.0  # recording clock [s]: episodes follow each other in simulated time

    @staticmethod
    def policy_for_run(checkpoint: str | None, preset: str | None, default_preset: str, guidance: str, seed: int,
                     device: str = "auto", backend: str = "torch", action_temperature: float = 1.0,
                     weights: dict | None = None, threads: int = 0, warm: bool = False):
        """The policy a run uses: the given checkpoint, else the default preset's shipped weights, on
        `device` with its DiT and head calls on `backend` (check_run_device names a bad value first),
        its initial action noise scaled by `action_temperature` and its guidance weights replaced by
        `weights` (GuidanceConfig field -> value; PolicyConfig's defaults otherwise); `threads` torch and
        onnxruntime threads (0: their defaults). `warm`: run it once on a blank observation first (as the
        policy node does at configure), so a wall-clock realtime episode's first replan takes its
        steady time rather than the runtime's first-call costs."""
        from vam_model.backends import BackendConfig   # lazy: torch, loaded only when a vam policy is built
        from vam_model.networks.checkpoint import resolve_checkpoint
        from vam_model.policy import PolicyConfig, build_policy

        ckpt, preset = resolve_checkpoint(checkpoint, preset, default_preset)
        cfg = PolicyConfig(device=device, backend=BackendConfig(name=backend, threads=threads), threads=threads,
                           action_temperature=action_temperature)
        cfg = replace(cfg, guidance=replace(cfg.guidance, **(weights or {})))
        policy = build_policy(preset, checkpoint=ckpt, guidance=guidance, seed=seed, config=cfg)
        if warm:
            times = warm_up(policy, policy.guidance.cfg, seed)
            log.info("policy warmed up: %s", ", ".join(f"{k} {v:.2f} s" for k, v in times.items()))
        return policy

    def open_outputs(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        if self.record:
            self.recorder = McapRecorder(self.out / "recording.mcap", origin_s=0.0, overwrite=self.overwrite).open()

    def close_outputs(self) -> None:
        if self.recorder is not None:
            self.recorder.close()
            self.recorder = None

    def __exit__(self, *exc) -> None:
        self.close_outputs()

    def stamp(self, t: float) -> float:
        """Recording time of episode time `t` [s]."""
        return self._t + t

    def finish_recording(self, result: dict, duration_s: float) -> None:
        """The episode's final status on the recording, flushed to disk (a finished episode
        survives a kill that follows), and the recording clock moved past it."""
        if self.recorder is None:
            return
        t = self._t + duration_s
        self.recorder.write_json("episode_status", {k: result[k] for k in STATUS_KEYS} | {"done": True}, t)
        self.recorder.flush()
        self._t = t + 1.0  # one simulated second between episodes

    def new_episode(self, name: str, dt: float) -> "PolicyEpisode":
        return PolicyEpisode(self, name, dt)


class PolicyEpisode:
    """One policy episode's records, the same in every simulator and both executor modes."""

    def __init__(self, runner: EpisodeRunner, name: str, dt: float):
        self.runner, self.name, self.dt = runner, name, dt
        self.trace = TRTrace()
        self.trace.reset()
        self.replans: list[dict] = []
        self.refused = 0  # failed replans whose input the policy refused (ValueError)
        self.first_error: str | None = None
        self.held = self.late = 0  # ticks holding for want of a chunk / run past `execute`

    def on_step(self, step: int, phase: str | None, sinfo) -> None:
        """Book the executor's StepInfo `sinfo` of episode step `step` (expert phase `phase`)."""
        self.trace.label_step(step, phase)
        if sinfo is None:
            return
        if sinfo.error:
            log.error("%s step %d: inference failed: %s (holding)", self.name, step, sinfo.error)
            self.refused += is_refusal(sinfo.error)
            if self.first_error is None:
                self.first_error = f"step {step}: {sinfo.error}"
        self.held += bool(sinfo.held)
        self.late += bool(sinfo.overrun)
        if sinfo.replanned and sinfo.telemetry is not None:
            tel = dict(sinfo.telemetry) | {"step": step}
            self.replans.append(replan_record(step, tel) | {"skipped": sinfo.skipped,
                                                            "reanchored": round(float(sinfo.reanchored), 5)})
            self.trace.update(tel)
            rec = self.runner.recorder
            if rec is not None:
                rec.write_telemetry(tel, self.runner.stamp(step * self.dt), phase=self.trace.phase)

    def outcome(self, executor, success: bool, steps: int, termination: str | None) -> dict:
        """The episode's policy fields for summary.json. An episode in which inference was tried
        but no chunk was ever installed ends with termination "error" (the arm held still all
        episode: a failure of the policy run, not a timeout)."""
        errors = executor.errors if executor is not None else 0
        out = {"success": bool(success), "steps": steps, "termination": termination, "replans": self.replans,
               "inference_errors": errors, "refused_inputs": self.refused, "first_error": self.first_error}
        if executor is not None and not success and executor.replans == 0 and (executor.errors or executor.dropped):
            if out["first_error"] is None:
                out["first_error"] = (f"all {executor.dropped} chunks arrived after their last action "
                                      f"(inference slower than a chunk)")
            log.error("%s: no replan succeeded in %d steps (%d inference errors, %d refused inputs); first: %s",
                      self.name, steps, executor.errors, self.refused, out["first_error"])
            out["termination"] = "error"
        return out

    def add_plot(self, out: dict, title: str, end_step: int) -> dict:
        """The TR trace PNG (when the runner plots and there were replans) and the TR summary."""
        r = self.runner
        if r.plots and self.replans:
            from vam_stack.tr_plot import save_trace_png   # lazy: matplotlib, only where a run plots

            png = save_trace_png(self.trace, r.out / self.name / "tr_trace.png", title=title, end_step=end_step)
            out["tr_trace"] = str(png.relative_to(r.out))
        out["tr_summary"] = self.trace.summary() if self.replans else {"replans": 0}
        return out

    def realtime_record(self, timing: dict) -> dict:
        """summary.json's `realtime` of this episode: the loop's timing, ticks held and run past
        `execute`, the replan latency and the machine's 1-minute load average as it ended."""
        lat = [x["latency_ms"] for x in self.replans if x["latency_ms"] is not None]
        return timing | {"held_ticks": self.held, "late_ticks": self.late,
                         "replan_ms_p50": round(float(np.median(lat)), 1) if lat else None,      # 0.1 ms: the
                         "replan_ms_p95": round(float(np.percentile(lat, 95)), 1) if lat else None,  # printed line
                         "load_1min": load_1min()}


class RealtimeLoop:
    """A simulated world stepped by a realtime executor: pass `sink` as the executor's sink, then
    `run(executor, max_steps)`. Each tick the executor's thread calls `step(action) -> over`;
    an exception there ends the episode and is re-raised by `run` on the caller's thread. A loop
    still running after a generous limit (60 s + 4x the episode's duration) is stopped and
    reported as stalled, so a wedged world ends instead of hanging the run."""

    def __init__(self, step: Callable[[np.ndarray], bool], name: str):
        self.step, self.name = step, name
        self.done = threading.Event()
        self.failure: list[BaseException] = []

    def sink(self, action: np.ndarray) -> None:
        if self.done.is_set():
            return
        try:
            over = self.step(action)
        except BaseException as e:                # ends the episode; re-raised by run()
            self.failure.append(e)
            over = True
        if over:
            self.done.set()

    def run(self, executor, max_steps: int, progress: Callable[[], None] | None = None,
            running: Any = None) -> tuple[dict, bool]:
        """(timing, stalled) of the episode, once `step` said it is over (or the limit passed).
        `running`: the context that runs the episode (a simulator's `PolicyRuntime` episode, started
        and stopped as the node does it); None: `executor` itself (its start and stop)."""
        limit_s = 60.0 + 4.0 * max_steps / executor.cfg.rate_hz
        t0, stalled = time.monotonic(), False
        with executor if running is None else running:
            while not self.done.wait(0.25):
                if progress is not None:
                    progress()
                if time.monotonic() - t0 > limit_s:
                    stalled = True
                    self.done.set()
                    log.error("%s: realtime episode still running after %.0f s; stopped", self.name, limit_s)
                    break
        if self.failure:
            raise self.failure[0]
        return realtime_timing(executor), stalled


@contextmanager
def runtime_episode(runtime, instruction: str, name: str):
    """A wall-clock realtime episode of a simulator's `PolicyRuntime` (its own tick thread, as in the
    policy node): started as the node starts one (RuntimeError naming `name` when the runtime refuses),
    stopped when the block ends (the arm holds its last target)."""
    ok, message = runtime.request_start(instruction, wait=True)
    if not ok:
        raise RuntimeError(f"{name}: the policy's runtime did not start the episode: {message}")
    try:
        yield runtime.executor
    finally:
        runtime.request_stop("episode over", wait=True)


def realtime_timing(executor) -> dict:
    """A realtime episode's timing and seam record from its executor's stats (on a virtual clock the
    pacer's fields stay empty)."""
    st = executor.stats()
    return {"rate_hz": executor.cfg.rate_hz, "ticks": int(st["ticks"]), "missed_ticks": int(st["missed_ticks"]),
            "dropped_chunks": int(st["dropped"]), "achieved_hz": _round(st.get("achieved_hz")),
            "p99_jitter_ms": _round(st.get("p99_jitter_ms")), "max_period_ms": _round(st.get("max_period_ms")),
            "rtc": executor.cfg.rtc, "seam_max_step": round(st["seam_max_step"], 5),
            "within_chunk_max_step": round(st["within_chunk_max_step"], 5), "late_chunks": int(st.get("late", 0))}


def load_1min() -> float | None:
    """The machine's 1-minute load average (None where the OS has none)."""
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


# What a wall-clock realtime episode must get from the machine to count as run in real time: no chunk
# dropped (a replan slower than a whole chunk), at most 2 % of its ticks missed by the clock, and
# the arm held waiting for a chunk no longer than the first chunk's wait (HOLD_START_S) plus 2 % of
# its ticks. A quiet 2-core machine: 0-2 missed, 1-2 held, none dropped per episode; at load 5-8
# (issue 70): 34 missed, 177 held and 6 dropped per episode.
MISSED_SHARE = 0.02
HELD_SHARE = 0.02
HOLD_START_S = 0.5


def realtime_problem(rt: dict | None) -> str | None:
    """None when a realtime episode's record (`realtime`) shows it kept real time (see MISSED_SHARE);
    otherwise what the machine failed to deliver, in words. None too for a record without timing
    (a virtual clock: deterministic by construction)."""
    if not rt or rt.get("virtual_latency_ms") or rt.get("achieved_hz") is None:
        return None
    ticks = max(int(rt["ticks"]), 1)
    problems = []
    if rt["dropped_chunks"]:
        problems.append(f"{rt['dropped_chunks']} chunks dropped (inference slower than a whole chunk)")
    if rt["missed_ticks"] > max(2, MISSED_SHARE * ticks):
        problems.append(f"{rt['missed_ticks']} of {ticks} ticks missed by the clock")
    if rt["held_ticks"] > HOLD_START_S * rt["rate_hz"] + HELD_SHARE * ticks:
        problems.append(f"{rt['held_ticks']} ticks held waiting for a chunk")
    return "; ".join(problems) or None


def episode_seed(task: str, episode: int, seed: int) -> int:
    """Deterministic per-episode seed from (task, episode, seed id); `task` names the task (LIBERO:
    '<suite>/<index>')."""
    return zlib.crc32(f"{task}:{episode}:{seed}".encode())


def policy_seed(ep_seed: int) -> int:
    """The seed of a vam episode's noise draws, from its episode seed alone: an episode draws the
    same noise whichever episodes ran before it, so two runs of one seed id pair episode by episode."""
    return ep_seed ^ 0x0A0715E


def _round(v) -> float | None:
    return None if v is None or not math.isfinite(v) else round(float(v), 3)


# ---- run totals -----------------------------------------------------------------------------
def success_counts(episodes: list[dict]) -> dict[str, list[int]]:
    """suite -> [successes, episodes]."""
    by: dict[str, list[int]] = {}
    for e in episodes:
        k = by.setdefault(e["suite"], [0, 0])
        k[0] += bool(e["success"])
        k[1] += 1
    return by


def success_rates(episodes: list[dict]) -> dict[str, float]:
    return {s: round(k / n, 4) for s, (k, n) in success_counts(episodes).items()}


def wilson_interval(k: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """95 % Wilson score interval of a success rate k/n (sound at small n and at 0 or n)."""
    if n <= 0:
        raise ValueError(f"need n >= 1 episodes, got {n!r}")
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def success_intervals(episodes: list[dict]) -> dict[str, list[float]]:
    """suite -> [low, high] 95 % Wilson interval of its success rate."""
    return {s: [round(v, 4) for v in wilson_interval(k, n)] for s, (k, n) in success_counts(episodes).items()}


def error_stats(episodes: list[dict]) -> dict:
    """Failed replans over `episodes`: inference errors, refused inputs (of those), episodes that
    ended in "error" (no replan ever succeeded), successful replans, and the first error."""
    first = next((f"{e.get('name', e['suite'])}: {e['first_error']}" for e in episodes if e.get("first_error")), None)
    return {"episodes": len(episodes),
            "replans_ok": sum(len(e["replans"]) for e in episodes),
            "inference_errors": sum(int(e.get("inference_errors") or 0) for e in episodes),
            "refused_inputs": sum(int(e.get("refused_inputs") or 0) for e in episodes),
            "error_episodes": sum(e.get("termination") == "error" for e in episodes),
            "first_error": first}


def realtime_stats(episodes: list[dict]) -> dict | None:
    """Totals over the episodes run with the realtime executor (None when there are none)."""
    # an episode run again in lockstep after its realtime attempt lost real time: the attempt's timing counts
    rt = [x for x in (e.get("realtime") or (e.get("realtime_attempt") or {}).get("realtime") for e in episodes) if x]
    if not rt:
        return None
    ticks = sum(x["ticks"] for x in rt)
    out = {"episodes": len(rt), "ticks": ticks}
    for k in ("missed_ticks", "held_ticks", "late_ticks", "dropped_chunks"):
        out[k] = sum(x[k] for x in rt)
    hz = [x["achieved_hz"] for x in rt if x["achieved_hz"] is not None]
    out["achieved_hz_min"] = min(hz) if hz else None
    jit = [x["p99_jitter_ms"] for x in rt if x["p99_jitter_ms"] is not None]
    out["p99_jitter_ms_max"] = max(jit) if jit else None
    seam = [(x["seam_max_step"], x["within_chunk_max_step"]) for x in rt if x.get("seam_max_step") is not None]
    out["seam_within_episodes"] = sum(a <= b for a, b in seam)   # episodes whose largest seam step <= within-chunk
    ratios = [a / b for a, b in seam if b > 0]                   # episodes without motion inside a chunk have none
    out["seam_ratio_median"] = float(np.median(ratios)) if ratios else None
    problems = [(e.get("name", "?"), p) for e in episodes for p in [
        realtime_problem(e.get("realtime") or (e.get("realtime_attempt") or {}).get("realtime"))] if p]
    out["not_kept"] = [{"episode": n, "problem": p} for n, p in problems]   # episodes that lost real time
    loads = [x["load_1min"] for x in rt if x.get("load_1min") is not None]
    out["load_1min_min"] = min(loads) if loads else None
    out["load_1min_max"] = max(loads) if loads else None
    out["lockstep_reruns"] = sum(1 for e in episodes if e.get("realtime_attempt"))
    first = next((i for i, e in enumerate(episodes) if e.get("realtime_attempt")), None)   # --overload lockstep:
    out["lockstep_after"] = 0 if first is None else len(episodes) - first - 1              # the episodes after it
    return out


def summarise(episodes: list[dict]) -> dict:
    """Run totals of summary.json: replan latency, TR, guidance share, reach, realtime, errors."""
    lat = [r["latency_ms"] for e in episodes for r in e["replans"] if r["latency_ms"] is not None]
    trs = [r["tr"] for e in episodes for r in e["replans"] if r["tr"] is not None]
    guided = [len(r["branches_computed"]) > 1 for e in episodes for r in e["replans"]]
    return {
        "replans": len(lat),
        "latency_ms_p50": float(np.median(lat)) if lat else None,
        "latency_ms_p95": float(np.percentile(lat, 95)) if lat else None,
        "tr_mean": float(np.mean(trs)) if trs else None,
        "tr_min": float(np.min(trs)) if trs else None,
        "tr_max": float(np.max(trs)) if trs else None,
        "guided_fraction": float(np.mean(guided)) if guided else None,
        "reach": reach_stats(episodes),
        "realtime": realtime_stats(episodes),
        "errors": error_stats(episodes),
    }
