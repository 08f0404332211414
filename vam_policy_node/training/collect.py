"""`vam-stack collect`: scripted-expert demonstrations of the mocked LIBERO suites on disk.

    vam-stack collect --suites goal --episodes-per-task 50 --seed 100 --out data/demos_goal

Episode `e` of task `k` is the initial state hashed from (suite, k, e, seed): use a seed id
that evaluation does not use (evaluation runs seed 0 by default), so training and evaluation
states differ. `--noise` perturbs the expert's translation (Gaussian, in action units) on
every `--noise-every`-th episode for state diversity; the recorded action is the perturbed
one that was executed. Failed expert episodes are skipped unless `--keep-failures`.
The format is documented in `dataset.py`.
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

from .dataset import DatasetWriter

# what every dataset recorded on the mocked LIBERO bridge says about itself (meta/info.json)
BRIDGE_INFO = {"fps": 10.0, "robot": "mocked LIBERO (libero_bridge)", "frame_shape": [224, 448, 3],
               "action_dim": 7, "proprio_dim": 8,
               "features": {"frames": "PNG, stacked agentview|wrist RGB", "proprio": "tcp xyz, axis-angle, fingers",
                            "actions": "eef delta xyz, rot xyz, gripper (+1 close)",
                            "phase": "0 planning, 1 manipulation"}}


@dataclass(frozen=True)
class CollectConfig:
    suites: tuple[str, ...] = ("goal",)   # suites to record (names from libero_bridge.SUITES)
    episodes_per_task: int = 50           # demonstrations per task (LIBERO ships 50)
    seed: int = 100                       # seed id of the initial states (keep it apart from eval's)
    noise: float = 0.1                    # std of the expert's translation noise (action units), 0 = none
    noise_every: int = 2                  # perturb every n-th episode (1 = all), the rest are clean
    keep_failures: bool = False           # also store episodes the expert failed
    max_attempts_factor: int = 3          # try at most this x episodes per task to reach the count

    def __post_init__(self):
        from libero_bridge import SUITES

        for s in self.suites:
            check(s in SUITES, f"collect: unknown suite {s!r}; expected names from {list(SUITES)}")
        check(len(self.suites) >= 1, f"collect: suites must not be empty, got {self.suites!r}")
        check(self.episodes_per_task >= 1, f"collect: episodes_per_task must be >= 1, got {self.episodes_per_task!r}")
        check(self.seed >= 0, f"collect: seed must be >= 0, got {self.seed!r}")
        check(0.0 <= self.noise <= 1.0, f"collect: noise must be in [0, 1] action units, got {self.noise!r}")
        check(self.noise_every >= 1, f"collect: noise_every must be >= 1, got {self.noise_every!r}")
        check(self.max_attempts_factor >= 1, f"collect: max_attempts_factor must be >= 1, got {self.max_attempts_factor!r}")


def collect(cfg: CollectConfig, out: str | Path, progress=None) -> dict:
    """Record the demonstrations into `out` (replaced if it exists); returns the info dict."""
    from libero_bridge import rollout_expert

    root = Path(out)
    if root.exists():
        if not (root / "meta" / "info.json").is_file() and any(root.iterdir()):
            raise FileExistsError(f"{str(root)!r} exists and is not a dataset; refusing to overwrite it")
        shutil.rmtree(root)
    writer = DatasetWriter(root)
    attempts = failures = 0
    t0 = time.perf_counter()
    for suite in cfg.suites:
        for task in range(10):
            kept, e = 0, 0
            while kept < cfg.episodes_per_task and e < cfg.episodes_per_task * cfg.max_attempts_factor:
                noise = cfg.noise if (cfg.noise > 0 and e % cfg.noise_every == cfg.noise_every - 1) else 0.0
                demo = rollout_expert(suite, task, e, cfg.seed, render=True, noise=noise)
                attempts += 1
                e += 1
                if not demo.success:
                    failures += 1
                    if not cfg.keep_failures:
                        continue
                writer.add(demo)
                kept += 1
                if progress is not None:
                    progress(suite, task, kept)
            if kept < cfg.episodes_per_task:
                raise RuntimeError(f"collect: the expert succeeded only {kept} times in {e} episodes of "
                                   f"{suite} task {task}; cannot reach {cfg.episodes_per_task}")
    info = BRIDGE_INFO | {
        "suites": list(cfg.suites), "seed": cfg.seed, "episodes_per_task": cfg.episodes_per_task,
        "noise": cfg.noise, "noise_every": cfg.noise_every, "expert_attempts": attempts, "expert_failures": failures,
        "expert_success_rate": round(1.0 - failures / max(attempts, 1), 4), "collect_s": round(time.perf_counter() - t0, 1)}
    writer.close(info)
    return info | {"total_episodes": len(writer.metas), "total_frames": writer.frames}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--suites", default="goal", help="comma-separated suites (default: goal)")
    p.add_argument("--episodes-per-task", type=int, default=50)
    p.add_argument("--seed", type=int, default=100, help="seed id of the initial states (eval uses 0)")
    p.add_argument("--noise", type=float, default=0.1, help="expert translation noise std (action units)")
    p.add_argument("--noise-every", type=int, default=2, help="perturb every n-th episode")
    p.add_argument("--keep-failures", action="store_true")
    p.add_argument("--out", required=True, help="dataset directory (replaced if it is a dataset)")


def run(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    cfg = CollectConfig(suites=tuple(s.strip() for s in args.suites.split(",") if s.strip()),
                        episodes_per_task=args.episodes_per_task, seed=args.seed, noise=args.noise,
                        noise_every=args.noise_every, keep_failures=args.keep_failures)
    bar = tqdm(total=len(cfg.suites) * 10 * cfg.episodes_per_task, unit="ep", desc="collect", file=sys.stdout)
    info = collect(cfg, args.out, progress=lambda s, t, k: (bar.set_postfix_str(f"{s} task {t}"), bar.update(1)))
    bar.close()
    print(json.dumps({k: info[k] for k in ("total_episodes", "total_frames", "expert_success_rate", "collect_s")}))
    return 0
