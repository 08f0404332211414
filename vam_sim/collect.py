"""Scripted-expert demonstrations of the mocked LIBERO suites on disk (`vam-stack collect`, vam_cli/collect.py).

    vam-stack collect --suites goal --episodes-per-task 50 --seed 100 --out data/demos_goal
    vam-stack collect --robot yam-mujoco --tasks handover --episodes-per-task 40 --out data/demos_yam

(the second: the simulated bimanual YAM, vam_sim/collect_yam.py).
Episode `e` of task `k` is the initial state hashed from (suite, k, e, seed): use a seed id
that evaluation does not use (evaluation runs seed 0 by default), so training and evaluation
states differ. `--noise` perturbs the expert's translation (Gaussian, in action units) on
every `--noise-every`-th episode for state diversity; the recorded action is the perturbed
one that was executed. Failed expert episodes are skipped unless `--keep-failures`.
The format is documented in `vam_data/dataset.py`. `--workers N` runs the expert and the PNG encoding
in N processes; episodes are still tried in order within each task and written in the
sequential order, so the dataset is byte-identical for any N.
"""
from __future__ import annotations

import multiprocessing as mp
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from vam_stack.config import check

from vam_data.dataset import BRIDGE_INFO, DatasetWriter, EncodedDemo, claim_dataset_dir, encode_demo
from vam_sim.libero_mock import ALL_SUITES, LiberoMockConfig, rollout_expert, suite_tasks
from vam_sim.libero_mock.config import CONVENTIONS


def bridge_info(mock) -> dict:
    """BRIDGE_INFO for datasets recorded with the mock configuration `mock`."""
    s = mock.image_size
    return BRIDGE_INFO | {"fps": mock.control_hz, "frame_shape": [s, 2 * s, 3], "mock": mock.as_dict(),
                          "mock_conventions": CONVENTIONS}


@dataclass(frozen=True)
class CollectConfig:
    suites: tuple[str, ...] = ("goal",)   # suites to record (vam_sim.libero_mock.ALL_SUITES: the benchmark suites
                                          # and the video-pretraining suite goal_video)
    episodes_per_task: int = 50           # demonstrations per task (LIBERO ships 50)
    seed: int = 100                       # seed id of the initial states (keep it apart from eval's)
    noise: float = 0.1                    # std of the expert's translation noise (action units), 0 = none
    noise_every: int = 2                  # perturb every n-th episode (1 = all), the rest are clean
    keep_failures: bool = False           # also store episodes the expert failed
    max_attempts_factor: int = 3          # try at most this x episodes per task to reach the count
    workers: int = 1                      # processes running the expert + PNG encoding (output identical for any)
    mock_config: str | None = None        # mocked LIBERO YAML (None = config/libero_mock.yaml)

    def __post_init__(self):
        for s in self.suites:
            check(s in ALL_SUITES, f"collect: unknown suite {s!r}; expected names from {list(ALL_SUITES)}")
        check(len(self.suites) >= 1, f"collect: suites must not be empty, got {self.suites!r}")
        check(self.episodes_per_task >= 1, f"collect: episodes_per_task must be >= 1, got {self.episodes_per_task!r}")
        check(self.seed >= 0, f"collect: seed must be >= 0, got {self.seed!r}")
        check(0.0 <= self.noise <= 1.0, f"collect: noise must be in [0, 1] action units, got {self.noise!r}")
        check(self.noise_every >= 1, f"collect: noise_every must be >= 1, got {self.noise_every!r}")
        check(self.max_attempts_factor >= 1, f"collect: max_attempts_factor must be >= 1, got {self.max_attempts_factor!r}")
        check(self.workers >= 1, f"collect: workers must be >= 1, got {self.workers!r}")

    @property
    def total_episodes(self) -> int:
        """Episodes the collection stores (suites differ in their task counts)."""
        return sum(len(suite_tasks(s)) for s in self.suites) * self.episodes_per_task

    def noise_of(self, episode: int) -> float:
        """Expert translation noise of attempt `episode` of a task."""
        hit = self.noise > 0 and episode % self.noise_every == self.noise_every - 1
        return self.noise if hit else 0.0


def expert_episode(job: tuple) -> tuple[bool, EncodedDemo | None]:
    """(suite, task, episode, seed, noise, keep) -> (success, stored form or None when not kept)."""
    suite, task, episode, seed, noise, keep, mock = job
    demo = rollout_expert(suite, task, episode, seed, render=True, noise=noise,
                          cfg=LiberoMockConfig.from_dict(mock) if mock else None)
    return demo.success, (encode_demo(demo) if demo.success or keep else None)


def _task_attempts(cfg: CollectConfig, suite: str, task: int, run, mock: dict | None = None):
    """Yield the kept (stored-form) episodes of one task in attempt order. Attempts run in waves
    (as many as are still missing), so the kept set is the one a one-by-one loop would keep."""
    kept, tried, failures = 0, 0, 0
    limit = cfg.episodes_per_task * cfg.max_attempts_factor
    while kept < cfg.episodes_per_task and tried < limit:
        wave = range(tried, min(limit, tried + cfg.episodes_per_task - kept))
        jobs = [(suite, task, e, cfg.seed, cfg.noise_of(e), cfg.keep_failures, mock) for e in wave]
        for success, enc in run(jobs):
            tried += 1
            failures += not success
            if enc is not None:                  # waves are sized to what is missing: never over the count
                kept += 1
                yield enc, tried, failures
    if kept < cfg.episodes_per_task:
        raise RuntimeError(f"collect: the expert succeeded only {kept} times in {tried} episodes of "
                           f"{suite} task {task}; cannot reach {cfg.episodes_per_task}")


def collect(cfg: CollectConfig, out: str | Path, progress=None, overwrite: bool = False) -> dict:
    """Record the demonstrations into `out`; returns the info dict. A non-empty `out` is refused
    (FileExistsError) unless it is a dataset and `overwrite` is set, in which case it is replaced;
    a non-empty directory that is not a dataset is never removed."""
    mock = LiberoMockConfig.load(cfg.mock_config)
    root = claim_dataset_dir(out, overwrite)
    if root.exists():
        shutil.rmtree(root)
    writer = DatasetWriter(root)
    attempts = failures = 0
    t0 = time.perf_counter()
    pool = mp.get_context("spawn").Pool(cfg.workers) if cfg.workers > 1 else None
    run = (lambda jobs: pool.imap(expert_episode, jobs)) if pool else (lambda jobs: map(expert_episode, jobs))
    try:
        for suite in cfg.suites:
            for task in range(len(suite_tasks(suite))):
                tried = fails = kept = 0
                for enc, tried, fails in _task_attempts(cfg, suite, task, run, mock.as_dict()):
                    writer.add(enc)
                    kept += 1
                    if progress is not None:
                        progress(suite, task, kept)
                attempts += tried
                failures += fails
    finally:
        if pool is not None:
            pool.terminate()
    info = bridge_info(mock) | {
        "suites": list(cfg.suites), "seed": cfg.seed, "episodes_per_task": cfg.episodes_per_task,
        "noise": cfg.noise, "noise_every": cfg.noise_every, "expert_attempts": attempts, "expert_failures": failures,
        "expert_success_rate": round(1.0 - failures / max(attempts, 1), 4), "collect_s": round(time.perf_counter() - t0, 1)}
    writer.close(info)
    return info | {"total_episodes": len(writer.metas), "total_frames": writer.frames}
