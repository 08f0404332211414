"""`vam-stack collect`: scripted-expert demonstrations of the mocked LIBERO suites on disk.

    vam-stack collect --suites goal --episodes-per-task 50 --seed 100 --out data/demos_goal
    vam-stack collect --robot yam-mujoco --tasks handover --episodes-per-task 40 --out data/demos_yam

(the second: the simulated bimanual YAM, collect_yam.py).
Episode `e` of task `k` is the initial state hashed from (suite, k, e, seed): use a seed id
that evaluation does not use (evaluation runs seed 0 by default), so training and evaluation
states differ. `--noise` perturbs the expert's translation (Gaussian, in action units) on
every `--noise-every`-th episode for state diversity; the recorded action is the perturbed
one that was executed. Failed expert episodes are skipped unless `--keep-failures`.
The format is documented in `dataset.py`. `--workers N` runs the expert and the PNG encoding
in N processes; episodes are still tried in order within each task and written in the
sequential order, so the dataset is byte-identical for any N.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from vam_stack.config import check

from vam_data.dataset import DatasetWriter, EncodedDemo, encode_demo

# what every dataset recorded on the mocked LIBERO bridge says about itself (meta/info.json);
# `bridge_info(mock)` adds the rate, frame shape and the whole mock configuration it ran with
BRIDGE_INFO = {"robot": "mocked LIBERO (libero_bridge)", "action_dim": 7, "proprio_dim": 8,
               "features": {"frames": "PNG, stacked agentview|wrist RGB (the rendered size)",
                            "proprio": "eef xyz (LIBERO world frame), axis-angle, fingers",
                            "actions": "eef delta xyz, rot xyz (LIBERO world frame), gripper (+1 close)",
                            "phase": "0 planning, 1 manipulation"}}


def bridge_info(mock) -> dict:
    """BRIDGE_INFO for datasets recorded with the mock configuration `mock`."""
    from vam_sim.libero_mock.config import CONVENTIONS

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
        from vam_sim.libero_mock import ALL_SUITES

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
        from vam_sim.libero_mock import suite_tasks

        return sum(len(suite_tasks(s)) for s in self.suites) * self.episodes_per_task

    def noise_of(self, episode: int) -> float:
        """Expert translation noise of attempt `episode` of a task."""
        hit = self.noise > 0 and episode % self.noise_every == self.noise_every - 1
        return self.noise if hit else 0.0


def expert_episode(job: tuple) -> tuple[bool, EncodedDemo | None]:
    """(suite, task, episode, seed, noise, keep) -> (success, stored form or None when not kept)."""
    from vam_sim.libero_mock import rollout_expert

    from vam_sim.libero_mock import LiberoMockConfig

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


def claim_dataset_dir(out: str | Path, overwrite: bool) -> Path:
    """`out` as a dataset directory to (re)write: a non-empty `out` is refused (FileExistsError)
    unless it is a dataset and `overwrite` is set; a directory that is not a dataset is never
    replaced. Creates and removes nothing."""
    root = Path(out)
    if root.exists() and not root.is_dir():
        raise NotADirectoryError(f"--out {str(root)!r} is a file, not a dataset directory")
    if root.exists() and any(root.iterdir()):
        if not (root / "meta" / "info.json").is_file():
            raise FileExistsError(f"{str(root)!r} exists and is not a dataset; refusing to overwrite it")
        if not overwrite:
            raise FileExistsError(f"--out {str(root)!r} already holds a dataset; pass --overwrite to replace it, "
                                  f"or choose another directory")
    return root


def collect(cfg: CollectConfig, out: str | Path, progress=None, overwrite: bool = False) -> dict:
    """Record the demonstrations into `out`; returns the info dict. A non-empty `out` is refused
    (FileExistsError) unless it is a dataset and `overwrite` is set, in which case it is replaced;
    a non-empty directory that is not a dataset is never removed."""
    import multiprocessing as mp

    from vam_sim.libero_mock import LiberoMockConfig, suite_tasks

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


ROBOTS = ("libero-mock", "yam-mujoco")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--robot", choices=ROBOTS, default="libero-mock",
                   help="libero-mock: the mocked LIBERO suites (default); yam-mujoco: the simulated bimanual YAM "
                        "(collect_yam.py)")
    p.add_argument("--suites", default="goal", help="libero-mock: comma-separated suites (default: goal); goal_video "
                                                    "is the paper study's video-pretraining set")
    p.add_argument("--tasks", default="handover,relay,tray_lift",
                   help="yam-mujoco: comma-separated tasks (default: handover,relay,tray_lift)")
    p.add_argument("--view-size", default="64x48", metavar="WxH",
                   help="yam-mujoco: stored size of each of the three views (default 64x48)")
    p.add_argument("--sim-config", help="yam-mujoco: simulator YAML (default config/yam_mujoco.yaml)")
    p.add_argument("--episodes-per-task", type=int, default=50, help="episodes of each task (default 50)")
    p.add_argument("--seed", type=int, default=100, help="seed id of the initial states (eval uses 0)")
    p.add_argument("--noise", type=float, default=0.1, help="libero-mock: expert translation noise std (action units)")
    p.add_argument("--noise-every", type=int, default=2, help="perturb every n-th episode")
    p.add_argument("--joint-noise", type=float, default=0.0,
                   help="yam-mujoco: std [rad] of the expert's arm-joint target perturbation (labels stay clean)")
    # NOISE_WHERE (vam_sim.yam_mujoco.runner) spelled with dashes; importing it here would load MuJoCo on
    # every `vam-stack` call, so a test holds the two equal.
    p.add_argument("--noise-where", choices=("everywhere", "free-space"), default="everywhere",
                   help="yam-mujoco: where the joint noise acts (free-space: faded out while a gripper is at an object)")
    p.add_argument("--miss-m", type=float, default=0.0,
                   help="yam-mujoco, handover: the first left grasp aims this far [m] off the block and the expert "
                        "re-grasps after a miss (max 0.06; 0 = aim true)")
    p.add_argument("--miss-every", type=int, default=1, help="yam-mujoco: miss on every n-th attempt")
    p.add_argument("--miss-when", choices=("before-lift", "at-meet"), default="before-lift",
                   help="yam-mujoco, handover: where the expert notices the miss (at-meet: after carrying the empty "
                        "gripper to the meeting point, then it goes back for the block)")
    p.add_argument("--keep-failures", action="store_true", help="keep episodes the expert failed (default: dropped)")
    p.add_argument("--workers", type=int, default=1, help="processes (the dataset is identical for any number)")
    p.add_argument("--mock-config", help="mocked LIBERO YAML (default config/libero_mock.yaml)")
    p.add_argument("--out", required=True, help="dataset directory (new or empty, or a dataset with --overwrite)")
    p.add_argument("--overwrite", action="store_true", help="replace the dataset already in --out")


def _view_size(text: str) -> tuple[int, int]:
    try:
        w, h = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise ValueError(f"--view-size must be WxH in pixels, e.g. 64x48, got {text!r}") from None
    return w, h


def run(args: argparse.Namespace) -> int:
    from vam_stack.progress import progress_bar
    if args.robot == "yam-mujoco":
        from .collect_yam import YamCollectConfig, collect_yam

        w, h = _view_size(args.view_size)
        cfg = YamCollectConfig(tasks=tuple(t.strip() for t in args.tasks.split(",") if t.strip()),
                               episodes_per_task=args.episodes_per_task, seed=args.seed, view_width=w, view_height=h,
                               keep_failures=args.keep_failures, workers=args.workers, sim_config=args.sim_config,
                               joint_noise=args.joint_noise, noise_every=args.noise_every,
                               noise_where=args.noise_where.replace("-", "_"), miss_m=args.miss_m,
                               miss_every=args.miss_every, miss_when=args.miss_when.replace("-", "_"))
        bar = progress_bar(total=len(cfg.tasks) * cfg.episodes_per_task, unit="ep", desc="collect", file=sys.stdout)
        info = collect_yam(cfg, args.out, progress=lambda t, k: (bar.set_postfix_str(t, refresh=False), bar.update(1)),
                           overwrite=args.overwrite)
        bar.close()
        print(json.dumps({k: info[k] for k in ("total_episodes", "total_frames", "expert_success", "collect_s")}))
        return 0
    cfg = CollectConfig(suites=tuple(s.strip() for s in args.suites.split(",") if s.strip()),
                        episodes_per_task=args.episodes_per_task, seed=args.seed, noise=args.noise,
                        noise_every=args.noise_every, keep_failures=args.keep_failures, workers=args.workers,
                        mock_config=args.mock_config)
    bar = progress_bar(total=cfg.total_episodes, unit="ep", desc="collect", file=sys.stdout)
    info = collect(cfg, args.out, progress=lambda s, t, k: (bar.set_postfix_str(f"{s} task {t}", refresh=False), bar.update(1)),
                   overwrite=args.overwrite)
    bar.close()
    print(json.dumps({k: info[k] for k in ("total_episodes", "total_frames", "expert_success_rate", "collect_s")}))
    return 0
