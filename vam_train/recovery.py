"""Recovery demonstrations (DAgger-style): the expert takes over from states the policy reaches.

Behaviour cloning only shows the policy the expert's own states; once its first chunk is a
little off it sees states no demonstration covers and repeats the mistake instead of
correcting it. A recovery round fixes the data, not the model:

    for every task of the dataset's suites, `episodes_per_task` seeded episodes:
        run the current policy (no guidance) in the mocked LIBERO bridge;
        at `takeovers` replan boundaries (steps drawn from [first_takeover, last_takeover]),
        snapshot the environment;
    from each snapshot the scripted expert (a pure function of the state) finishes the task,
    and that expert segment is one recovery episode: its first frames are the policy's own
    off-course states, labelled with the expert's correcting actions.

On the simulated bimanual YAM (`collect_yam_round`, for a yam_mujoco dataset) the MuJoCo world is
not branched: each takeover is a rollout of its own from the episode's initial state, run through
the real robot path in lockstep. The YAM expert's timeline cannot resume a half-done grasp, so it
takes over only while no gripper is near an object yet (the phase labeller's "planning"); it then
restarts its plans from where the arms and objects are. A rollout already manipulating at the
takeover tick yields nothing. Rollouts run in `workers` processes.

Segments the expert fails to finish are dropped; a policy that ends the episode before a
takeover step (solved or timed out) yields fewer segments. The trainer runs a round at each
progress fraction in `at`, writes it as an ordinary dataset under OUT/recovery/round_<r>/
(episode lines carry "source": "recovery" and "takeover_step"), and samples its steps with
`weight` relative to a demonstration step. Its minutes count against the time budget.
"""
from __future__ import annotations

import copy
import json
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from vam_stack.config import check

from vam_model.guidance import SCHEDULES


class NothingKept(RuntimeError):
    """A recovery round in which no expert takeover finished its task: nothing to learn from.
    `summary` holds the round's counts; the trainer logs it and trains on without the round."""

    def __init__(self, message: str, summary: dict):
        super().__init__(message)
        self.summary = summary


@dataclass(frozen=True)
class RecoveryConfig:
    at: tuple[float, ...] = ()       # training progress fractions (0, 1) at which a round runs (empty = off)
    episodes_per_task: int = 4       # policy rollouts per task of each dataset suite, per round
    takeovers: int = 2               # expert takeovers branched from each rollout (distinct replan steps; on the
                                     # simulated YAM each takeover is its own rollout from the same initial state)
    first_takeover: int = 10         # earliest takeover step (a multiple of the executed chunk length)
    last_takeover: int = 60          # latest takeover step
    seed: int = 200                  # seed id of the rollouts' initial states (collect uses 100, eval 0)
    weight: float = 2.0              # sampling weight of a recovery step relative to a demonstration step
    guidance: str = "none"           # guidance of the rollout policy (none is the cheapest)
    workers: int = 1                 # simulated YAM only: rollout processes (the trainer waits, so its cores are free)

    def __post_init__(self):
        at = tuple(self.at)
        check(all(0.0 < a < 1.0 for a in at), f"train.recovery.at: fractions must be in (0, 1), got {self.at!r}")
        check(list(at) == sorted(set(at)), f"train.recovery.at must be strictly increasing, got {self.at!r}")
        check(self.episodes_per_task >= 1, f"train.recovery.episodes_per_task must be >= 1, got {self.episodes_per_task!r}")
        check(self.takeovers >= 1, f"train.recovery.takeovers must be >= 1, got {self.takeovers!r}")
        check(1 <= self.first_takeover <= self.last_takeover,
              f"train.recovery: need 1 <= first_takeover <= last_takeover, got {self.first_takeover!r}, "
              f"{self.last_takeover!r}")
        check(self.seed >= 0, f"train.recovery.seed must be >= 0, got {self.seed!r}")
        check(self.weight > 0 and math.isfinite(self.weight), f"train.recovery.weight must be > 0, got {self.weight!r}")
        check(self.guidance in SCHEDULES, f"train.recovery.guidance must be one of {SCHEDULES}, got {self.guidance!r}")
        check(isinstance(self.workers, int) and 1 <= self.workers <= 64,
              f"train.recovery.workers must be an int in [1, 64], got {self.workers!r}")


def takeover_steps(cfg: RecoveryConfig, execute: int, rng: np.random.Generator) -> list[int]:
    """`cfg.takeovers` distinct replan-boundary steps in [first_takeover, last_takeover], sorted."""
    lo = math.ceil(cfg.first_takeover / execute) * execute
    grid = np.arange(lo, cfg.last_takeover + 1, execute)
    if len(grid) == 0:
        raise ValueError(f"recovery: no multiple of the executed chunk ({execute} steps) lies in "
                         f"[{cfg.first_takeover}, {cfg.last_takeover}]")
    k = min(cfg.takeovers, len(grid))
    return sorted(int(s) for s in rng.choice(grid, k, replace=False))


def recovery_segments(policy, suite: str, task: int, episode: int, seed: int, takeovers: list[int],
                      mock=None) -> dict:
    """Run `policy` on one episode, branching an expert takeover at each step of `takeovers`.

    Returns {"demos": [Demo per takeover the expert finished], "takeover_steps": [...],
    "policy_steps": steps the policy ran, "policy_termination": env termination or None,
    "expert_failures": n}.
    """
    from vam_sim.libero_mock import make_env, record_expert
    from vam_sim.libero_mock.runner import PolicyDriver

    env = make_env(suite, task, episode, seed, render=True, cfg=mock)
    obs = env.reset()
    driver = PolicyDriver(policy, env.instruction)
    pending = sorted(set(takeovers))
    snapshots, step = [], 0
    while not env.done and pending:
        if step == pending[0]:
            snapshots.append((step, copy.deepcopy(env), obs))
            pending.pop(0)
            if not pending:
                break
        action, _ = driver.act(obs)
        obs, _, _, _ = env.step(action.astype(np.float32))
        step += 1
    out = {"demos": [], "takeover_steps": [], "policy_steps": step, "policy_termination": env.termination,
           "expert_failures": 0}
    for k, snap, snap_obs in snapshots:
        demo = record_expert(snap, snap_obs)
        if demo.success:
            out["demos"].append(demo)
            out["takeover_steps"].append(k)
        else:
            out["expert_failures"] += 1
    return out


def collect_round(policy, cfg: RecoveryConfig, suites: list[str], round_index: int, out: str | Path,
                  progress: Callable[[int, int], None] | None = None, mock=None) -> dict:
    """One recovery round with `policy`, written as a dataset at `out`; returns its summary.

    Episode `e` of a task in round `r` uses initial-state episode index r * episodes_per_task + e
    (seed id `cfg.seed`), so every round sees new states; takeover steps are drawn from a
    generator seeded with (seed, round, task, e). `mock` is the environment configuration (the
    training data's; None = config/libero_mock.yaml).
    """
    from vam_sim.libero_mock import LiberoMockConfig

    from vam_sim.collect import bridge_info
    from vam_data.dataset import DatasetWriter

    mock = mock if mock is not None else LiberoMockConfig.load()
    writer = DatasetWriter(out)
    execute = policy.spec.execute
    rollouts = expert_failures = policy_success = 0
    t0 = time.perf_counter()
    total = len(suites) * 10 * cfg.episodes_per_task
    for suite in suites:
        for task in range(10):
            for e in range(cfg.episodes_per_task):
                rng = np.random.default_rng([cfg.seed, round_index, task, e])
                episode = round_index * cfg.episodes_per_task + e
                res = recovery_segments(policy, suite, task, episode, cfg.seed, takeover_steps(cfg, execute, rng), mock)
                rollouts += 1
                policy_success += res["policy_termination"] == "success"
                expert_failures += res["expert_failures"]
                for demo, k in zip(res["demos"], res["takeover_steps"]):
                    writer.add(demo, source="recovery", takeover_step=k, round=round_index)
                if progress is not None:
                    progress(rollouts, total)
    summary = {"round": round_index, "rollouts": rollouts, "episodes": len(writer.metas), "frames": writer.frames,
               "policy_success_before_takeover": policy_success, "expert_failures": expert_failures,
               "seconds": round(time.perf_counter() - t0, 1)}
    if not writer.metas:
        raise NothingKept(f"recovery round {round_index}: no expert takeover finished its task in {rollouts} "
                          f"rollouts ({expert_failures} expert failures); nothing to learn from", summary)
    writer.close(bridge_info(mock) | {"suites": list(suites), "seed": cfg.seed, "source": "recovery"} | summary)
    return summary


# ---- the simulated bimanual YAM ----------------------------------------------------------------
_WORKER_POLICY = None  # the rollout policy of a round's worker process (built once per process)


def _init_yam_worker(checkpoint: str, guidance: str, seed: int, threads: int) -> None:
    global _WORKER_POLICY
    import torch

    from vam_model.policy import build_policy

    torch.set_num_threads(threads)
    _WORKER_POLICY = build_policy(checkpoint=checkpoint, guidance=guidance, seed=seed)


def yam_takeover_episode(job: tuple) -> tuple[dict, object]:
    """(task, episode, seed, takeover tick, view (w, h), sim_config) -> (outcome, stored segment or None).

    The worker's policy drives the simulated YAM (lockstep, the real robot path) from the
    episode's initial state; at the takeover tick the scripted expert takes over (if no gripper
    is near an object yet) and finishes. The segment is the expert's part: the policy's own
    off-course state first, labelled with the expert's targets."""
    import tempfile

    from camera_bridge.preprocess import fit_views
    from vam_sim.yam_mujoco.runner import YamRunConfig, YamSimRunner

    from vam_sim.collect_yam import _Demo
    from vam_data.dataset import encode_demo

    task, episode, seed, k, (vw, vh), sim_config = job
    frames, proprio, actions, phases = [], [], [], []

    def capture(step, stacked, prop, action, phase):
        if step >= k:                                   # the expert's ticks only
            frames.append(fit_views(stacked, 3, vw, vh))
            proprio.append(np.asarray(prop, np.float32))
            actions.append(np.asarray(action, np.float32))
            phases.append(phase)

    cfg = YamRunConfig(task=task, episodes=episode + 1, seed=seed, guidance="none", record=False, plots=False,
                       sim_config=sim_config, takeover_step=k)
    with tempfile.TemporaryDirectory(prefix="yam_recovery_") as tmp:
        with YamSimRunner(cfg, tmp, policy=_WORKER_POLICY, capture=capture) as runner:
            result = runner.run_episode(episode)
    outcome = {"task": task, "episode": episode, "takeover_step": k, "taken": result["takeover"]["taken"],
               "termination": result["termination"], "success": bool(result["success"])}
    if not (outcome["taken"] and outcome["success"]):
        return outcome, None
    demo = _Demo("yam_mujoco", task, episode, seed, result["instruction"], True, np.stack(frames),
                 np.stack(proprio), np.stack(actions), phases)
    return outcome, encode_demo(demo)


def collect_yam_round(checkpoint: str | Path, cfg: RecoveryConfig, tasks: list[str], round_index: int,
                      out: str | Path, view: tuple[int, int], execute: int, sim_config: str | None = None,
                      progress: Callable[[int, int], None] | None = None, policy_seed: int = 0) -> dict:
    """One recovery round on the simulated YAM with the weights at `checkpoint`, written as a
    dataset at `out` at the data's view size `view` = (w, h); returns its summary.

    Task t's episode e of round r starts from initial state r * episodes_per_task + e (seed id
    `cfg.seed`); its `takeovers` ticks are drawn from a generator seeded with (seed, round, task
    index, e), and each is a rollout of its own (the MuJoCo world is not branched). A takeover is
    kept only when the expert took over before any grasp and finished the task."""
    import multiprocessing as mp

    from vam_data.dataset import YAM_INFO
    from vam_data.dataset import DatasetWriter

    jobs = []
    for ti, task in enumerate(tasks):
        for e in range(cfg.episodes_per_task):
            rng = np.random.default_rng([cfg.seed, round_index, ti, e])
            episode = round_index * cfg.episodes_per_task + e
            jobs += [(task, episode, cfg.seed, k, tuple(view), sim_config) for k in takeover_steps(cfg, execute, rng)]
    writer = DatasetWriter(out)
    t0 = time.perf_counter()
    counts = {"rollouts": 0, "taken": 0, "no_takeover": 0, "policy_ended_first": 0, "expert_failures": 0}
    init = (str(checkpoint), cfg.guidance, policy_seed, 1 if cfg.workers > 1 else 2)
    pool = mp.get_context("spawn").Pool(cfg.workers, _init_yam_worker, init) if cfg.workers > 1 else None
    try:
        if pool is None:
            _init_yam_worker(*init)
        results = pool.imap(yam_takeover_episode, jobs) if pool else map(yam_takeover_episode, jobs)
        for outcome, enc in results:                # in job order for any number of workers
            counts["rollouts"] += 1
            if outcome["taken"]:
                counts["taken"] += 1
                counts["expert_failures"] += not outcome["success"]
            elif outcome["termination"] == "no_takeover":
                counts["no_takeover"] += 1
            else:
                counts["policy_ended_first"] += 1
            if enc is not None:
                writer.add(enc, source="recovery", takeover_step=outcome["takeover_step"], round=round_index)
            if progress is not None:
                progress(counts["rollouts"], len(jobs))
    finally:
        if pool is not None:
            pool.terminate()
    summary = {"round": round_index, **counts, "episodes": len(writer.metas), "frames": writer.frames,
               "seconds": round(time.perf_counter() - t0, 1)}
    if not writer.metas:
        raise NothingKept(f"recovery round {round_index}: no expert takeover finished its task in {len(jobs)} "
                          f"rollouts ({counts}); nothing to learn from", summary)
    writer.close(YAM_INFO | {"frame_shape": [view[1], 3 * view[0], 3], "tasks": list(tasks), "seed": cfg.seed,
                             "source": "recovery"} | summary)
    return summary


__all__ = ["NothingKept", "RecoveryConfig", "collect_round", "collect_yam_round", "recovery_segments", "takeover_steps",
           "yam_takeover_episode"]


class RecoveryRounds:
    """The Trainer's recovery rounds: roll out the current EMA weights, let the expert take over,
    merge the kept segments into the training data (OUT/recovery/round_<r>/)."""

    def _round_dir(self, r: int) -> Path:
        return self.out / "recovery" / f"round_{r}"

    def _merge_recovery(self, r: int) -> None:
        summary = self._round_dir(r) / "summary.json"
        if summary.is_file() and json.loads(summary.read_text()).get("episodes") == 0:
            self.recovery_rounds = r + 1                 # a round that kept nothing: done, no data to merge
            return
        if not self._data_private:                       # extend a private copy, never the caller's dataset
            self._data_private = True
            self.data = copy.copy(self.data)
            self.data.episodes = list(self.data.episodes)
        from vam_data.dataset import Dataset

        self.data.extend(Dataset(self._round_dir(r) / "data"))
        self.recovery_rounds = r + 1
        if self.cfg.cache_frames:
            self._cache_frames()
        self.batches = self._make_batches()

    def recovery_due(self) -> bool:
        at = self.cfg.recovery.at
        return self.recovery_rounds < len(at) and self.progress(self.step) >= at[self.recovery_rounds]

    def recovery_round(self, progress: bool = True) -> dict:
        """Roll out the current EMA weights, let the expert take over, merge the segments into the data.
        A round that kept no takeover is recorded (summary.json with the reason) and counted as done:
        the run trains on with the data it had instead of losing the minutes already spent."""
        import shutil

        r = self.recovery_rounds
        root = self._round_dir(r)
        if root.exists():                                # a round interrupted before it was merged
            shutil.rmtree(root)
        root.mkdir(parents=True)
        ckpt = self.export(root / "policy.safetensors")  # the weights that drove the rollouts
        suites = sorted({e.meta["suite"] for e in self.data.episodes})
        try:
            if suites == ["yam_mujoco"]:
                summary = self._yam_recovery_round(ckpt, r, root, progress)
            else:
                summary = self._mock_recovery_round(ckpt, r, root, suites, progress)
        except NothingKept as e:
            summary = e.summary | {"error": str(e)}
        (root / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")   # read by the merge
        self._merge_recovery(r)
        return summary

    def _mock_recovery_round(self, ckpt: Path, r: int, root: Path, suites: list[str], progress: bool) -> dict:
        """A round on the mocked LIBERO bridge (recovery.collect_round) the data came from."""
        from vam_stack.progress import progress_bar
        from vam_model.policy import build_policy
        from vam_sim.libero_mock import LiberoMockConfig
        from .recovery import collect_round

        rc = self.cfg.recovery
        policy = build_policy(checkpoint=ckpt, guidance=rc.guidance, seed=self.cfg.seed + r)
        bar = progress_bar(total=len(suites) * 10 * rc.episodes_per_task, unit="rollout", desc=f"recovery round {r}",
                           disable=not progress, file=sys.stdout, leave=False)
        try:
            mock = self.data.info.get("mock")        # recovery rollouts run in the mock the data came from
            mock = LiberoMockConfig.from_dict(mock) if mock is not None else None
            return collect_round(policy, rc, suites, r, root / "data", progress=lambda k, n: bar.update(1), mock=mock)
        finally:
            bar.close()
            torch.set_num_threads(self.cfg.threads)      # the policy sets its own thread count

    def _yam_recovery_round(self, ckpt: Path, r: int, root: Path, progress: bool) -> dict:
        """A round on the simulated YAM (recovery.collect_yam_round) for the data's tasks, at its view size."""
        from vam_stack.progress import progress_bar
        from .recovery import collect_yam_round

        rc, robot = self.cfg.recovery, self.mcfg.robot
        tasks = list(self.data.info.get("tasks") or sorted({e.meta["task"] for e in self.data.episodes}))
        h, w, _ = self.data.info["frame_shape"]
        bar = progress_bar(unit="rollout", desc=f"recovery round {r}", disable=not progress, file=sys.stdout,
                           leave=False)

        def tick(done: int, total: int) -> None:          # the round knows its rollout count
            bar.total = total
            bar.update(done - bar.n)

        try:
            return collect_yam_round(ckpt, rc, tasks, r, root / "data", (w // len(robot.cameras), h), robot.execute,
                                     progress=tick, policy_seed=self.cfg.seed + r)
        finally:
            bar.close()
            torch.set_num_threads(self.cfg.threads)

