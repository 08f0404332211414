"""Scripted-expert demonstrations of the simulated bimanual YAM (`vam-stack collect --robot yam-mujoco`,
vam_cli/collect.py).

    vam-stack collect --robot yam-mujoco --tasks handover,relay,tray_lift --episodes-per-task 40 \\
        --seed 100 --view-size 64x48 --workers 2 --out runs/demos_yam

Each episode runs the real robot path with the expert acting (`YamSimRunner`: the driver core
on the MuJoCo bus, the safety filter, the camera bridge on the three rendered views) and
records, per 30 Hz tick: the stacked views fitted view by view to `--view-size` (the camera
path's rule, `vam_stack.views.fit_views`; 3 x 64x48 -> 192x48 by default), the 14
measured joint values the actor saw, the expert's 14 absolute targets and its phase label.
Episode `e` of a task starts from the state hashed from (task, e, seed): evaluation uses seed 0
and the collection seed 100, so their initial states differ. `--joint-noise RAD` perturbs the
expert's executed arm-joint targets on every `--noise-every`-th attempt (a smooth random walk,
`YamRunConfig.expert_noise`) while the recorded target stays the expert's clean one, so the
data holds states off the expert's path labelled with the way back; `--noise-where free-space`
fades the perturbation out while a gripper is near a tracked object, so perturbed grasps
still close. `--miss-m M` (handover) makes the left arm's first grasp aim M metres off the
block on every `--miss-every`-th attempt; when it misses, the expert opens, rises and grasps
again (`regrasps` in the episode's line), so the data shows the way out of a missed grasp. Such an
episode's `train_from` is the re-grasp's first step: the trainer starts no sample before it,
so the miss itself is only ever seen as history, never imitated. Failed expert episodes are skipped unless `--keep-failures`. The format is `vam_data/dataset.py`'s (suite "yam_mujoco", `task` the
task's name); `meta/info.json` says `action_type: absolute_joint`, so the trainer pads a chunk
past the episode end with the last target, not with zeros.
"""
from __future__ import annotations

import multiprocessing as mp
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vam_stack.config import check
from vam_stack.views import fit_views

from vam_data.dataset import YAM_INFO, DatasetWriter, EncodedDemo, claim_dataset_dir, encode_demo
from vam_sim.yam_mujoco.expert import MAX_MISS_M, MISS_WHEN
from vam_sim.yam_mujoco.runner import NOISE_WHERE, YamRunConfig, YamSimRunner
from vam_sim.yam_mujoco.tasks import TASKS


@dataclass(frozen=True)
class YamCollectConfig:
    tasks: tuple[str, ...] = ("handover",)  # MuJoCo tasks to record (vam_sim.yam_mujoco.tasks.TASKS)
    episodes_per_task: int = 40             # successful demonstrations per task
    seed: int = 100                         # seed id of the initial states (evaluation uses 0)
    view_width: int = 64                    # stored width of each view [px]
    view_height: int = 48                   # stored height of each view [px]
    keep_failures: bool = False             # also store episodes the expert failed
    max_attempts_factor: int = 2            # try at most this x episodes per task to reach the count
    workers: int = 1                        # processes (episodes are written in attempt order for any number)
    sim_config: str | None = None           # yam_mujoco YAML (None = config/yam_mujoco.yaml)
    joint_noise: float = 0.0                # std [rad] of the smooth perturbation of the expert's arm-joint targets
                                            # (the label stays the clean target: the data shows the way back), 0 = none
    noise_every: int = 2                    # perturb every n-th attempt of a task (1 = all), the rest are clean
    noise_where: str = "everywhere"         # everywhere | free_space: faded out near a tracked object (grasps kept)
    miss_m: float = 0.0                     # handover: the first left grasp aims this far [m] off the block and the
                                            # expert re-grasps when it missed (recovery in the data), 0 = aim true
    miss_every: int = 1                     # ... on every n-th attempt of the task (1 = all)
    miss_when: str = "before_lift"          # ... noticed before_lift (fingers still at the block) | at_meet (after
                                            # carrying the empty gripper to the meeting point)

    def __post_init__(self):
        check(len(self.tasks) >= 1, f"collect: tasks must not be empty, got {self.tasks!r}")
        for t in self.tasks:
            check(t in TASKS, f"collect: unknown task {t!r}; expected names from {sorted(TASKS)}")
        check(len(set(self.tasks)) == len(self.tasks), f"collect: tasks repeat: {self.tasks!r}")
        check(self.episodes_per_task >= 1, f"collect: episodes_per_task must be >= 1, got {self.episodes_per_task!r}")
        check(self.seed >= 0, f"collect: seed must be >= 0, got {self.seed!r}")
        check(16 <= self.view_width <= 1280 and 16 <= self.view_height <= 960,
              f"collect: view size must be within 16..1280 x 16..960 px, got {self.view_width!r}x{self.view_height!r}")
        check(self.max_attempts_factor >= 1, f"collect: max_attempts_factor must be >= 1, got {self.max_attempts_factor!r}")
        check(self.workers >= 1, f"collect: workers must be >= 1, got {self.workers!r}")
        check(0.0 <= self.joint_noise <= 0.2, f"collect: joint_noise must be in [0, 0.2] rad, got {self.joint_noise!r}")
        check(self.noise_every >= 1, f"collect: noise_every must be >= 1, got {self.noise_every!r}")
        check(self.noise_where in NOISE_WHERE,
              f"collect: noise_where must be one of {NOISE_WHERE}, got {self.noise_where!r}")
        check(0.0 <= self.miss_m <= MAX_MISS_M, f"collect: miss_m must be in [0, {MAX_MISS_M}] m, got {self.miss_m!r}")
        check(self.miss_m == 0.0 or set(self.tasks) == {"handover"},
              f"collect: miss_m scripts missed handover grasps; collect handover alone, got tasks {self.tasks!r}")
        check(self.miss_every >= 1, f"collect: miss_every must be >= 1, got {self.miss_every!r}")
        check(self.miss_when in MISS_WHEN, f"collect: miss_when must be one of {MISS_WHEN}, got {self.miss_when!r}")

    def miss_of(self, episode: int) -> float:
        """Scripted grasp miss [m] of attempt `episode`."""
        return self.miss_m if self.miss_m > 0 and episode % self.miss_every == self.miss_every - 1 else 0.0

    def noise_of(self, episode: int) -> float:
        """Joint noise of attempt `episode` of a task."""
        hit = self.joint_noise > 0 and episode % self.noise_every == self.noise_every - 1
        return self.joint_noise if hit else 0.0


@dataclass
class _Demo:
    """What `encode_demo` reads: one recorded episode."""
    suite: str
    task: str
    episode: int
    seed: int
    instruction: str
    success: bool
    stacked: np.ndarray   # [T, h, 3w, 3] uint8
    proprio: np.ndarray   # [T, 14]
    actions: np.ndarray   # [T, 14]
    phases: list

    def __len__(self) -> int:
        return len(self.actions)


def yam_expert_episode(job: tuple) -> tuple[bool, EncodedDemo | None]:
    """(task, episode, seed, view (w, h), keep, sim_config, joint noise, where, miss, miss_when) -> (success,
    stored form or None)."""
    task, episode, seed, (vw, vh), keep, sim_config, noise, where, miss, miss_when = job
    frames, proprio, actions, phases = [], [], [], []

    def capture(step, stacked, prop, action, phase):
        frames.append(fit_views(stacked, 3, vw, vh))
        proprio.append(np.asarray(prop, np.float32))
        actions.append(np.asarray(action, np.float32))
        phases.append(phase)

    cfg = YamRunConfig(task=task, episodes=episode + 1, seed=seed, policy="expert", record=False, plots=False,
                       sim_config=sim_config, expert_noise=noise, expert_noise_where=where,
                       expert_miss_m=miss, expert_miss_when=miss_when if miss > 0 else "before_lift")
    with tempfile.TemporaryDirectory(prefix="yam_collect_") as tmp:
        with YamSimRunner(cfg, tmp, capture=capture) as runner:
            result = runner.run_episode(episode)
    demo = _Demo("yam_mujoco", task, episode, seed, result["instruction"], bool(result["success"]),
                 np.stack(frames), np.stack(proprio), np.stack(actions), phases)
    enc = encode_demo(demo) if demo.success or keep else None
    if enc is not None and miss > 0:
        enc.meta["regrasps"] = result.get("expert_regrasps", 0)
        if result.get("expert_regrasp_steps"):        # train on the way back, never on the scripted miss
            enc.meta["train_from"] = int(result["expert_regrasp_steps"][0])
    return demo.success, enc


def collect_yam(cfg: YamCollectConfig, out: str | Path, progress=None, overwrite: bool = False) -> dict:
    """Record the demonstrations into `out` (the same refusal rules as `collect`); returns the info."""
    root = claim_dataset_dir(out, overwrite)
    if root.exists():
        shutil.rmtree(root)
    writer = DatasetWriter(root)
    attempts = failures = 0
    per_task: dict[str, list[int]] = {}
    t0 = time.perf_counter()
    pool = mp.get_context("spawn").Pool(cfg.workers) if cfg.workers > 1 else None
    run = (lambda jobs: pool.imap(yam_expert_episode, jobs)) if pool else (lambda jobs: map(yam_expert_episode, jobs))
    try:
        for task in cfg.tasks:
            kept = tried = fails = 0
            limit = cfg.episodes_per_task * cfg.max_attempts_factor
            while kept < cfg.episodes_per_task and tried < limit:
                wave = range(tried, min(limit, tried + cfg.episodes_per_task - kept))
                jobs = [(task, e, cfg.seed, (cfg.view_width, cfg.view_height), cfg.keep_failures, cfg.sim_config,
                         cfg.noise_of(e), cfg.noise_where, cfg.miss_of(e), cfg.miss_when) for e in wave]
                for success, enc in run(jobs):
                    tried += 1
                    fails += not success
                    if enc is not None:
                        writer.add(enc)
                        kept += 1
                        if progress is not None:
                            progress(task, kept)
            per_task[task] = [tried - fails, tried]
            attempts += tried
            failures += fails
            if kept < cfg.episodes_per_task:
                raise RuntimeError(f"collect: the expert succeeded only {kept} times in {tried} episodes of "
                                   f"{task}; cannot reach {cfg.episodes_per_task}")
    finally:
        if pool is not None:
            pool.terminate()
    info = YAM_INFO | {
        "frame_shape": [cfg.view_height, 3 * cfg.view_width, 3], "tasks": list(cfg.tasks), "seed": cfg.seed,
        "episodes_per_task": cfg.episodes_per_task, "joint_noise": cfg.joint_noise, "noise_every": cfg.noise_every,
        "noise_where": cfg.noise_where, "miss_m": cfg.miss_m, "miss_every": cfg.miss_every, "miss_when": cfg.miss_when,
        "expert_attempts": attempts, "expert_failures": failures,
        "expert_success": {t: {"successes": k, "episodes": n} for t, (k, n) in per_task.items()},
        "expert_success_rate": round(1.0 - failures / max(attempts, 1), 4), "collect_s": round(time.perf_counter() - t0, 1)}
    writer.close(info)
    return info | {"total_episodes": len(writer.metas), "total_frames": writer.frames}
