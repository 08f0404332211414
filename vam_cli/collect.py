"""`vam-stack collect`: its command line; the collection itself is vam_sim/collect.py (mocked LIBERO),
vam_sim/collect_libero_real.py (real LIBERO, in its own venv) and vam_sim/collect_yam.py (the
simulated bimanual YAM)."""
from __future__ import annotations

import argparse
import sys

from vam_stack.names import NOISE_WHERE_FLAGS
from vam_stack.progress import progress_bar

from vam_data.dataset import claim_dataset_dir
from vam_sim.collect import CollectConfig, collect

ROBOTS = ("libero-mock", "libero-real", "yam-mujoco")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--robot", choices=ROBOTS, default="libero-mock",
                   help="libero-mock: the mocked LIBERO suites (default); libero-real: real LIBERO in its own venv "
                        "(vam_sim/collect_libero_real.py: resumable, run the same command again after a stop); "
                        "yam-mujoco: the simulated bimanual YAM (vam_sim/collect_yam.py)")
    p.add_argument("--suites", default=None, help="comma-separated suites (libero-mock default: goal, goal_video is the "
                                                  "paper study's video-pretraining set; libero-real default: "
                                                  "spatial,goal)")
    p.add_argument("--image-size", type=int, default=128,
                   help="libero-real: rendered side of each view in px (default 128; recorded in the dataset)")
    p.add_argument("--reflections", choices=("on", "off"), default="off",
                   help="libero-real: the scene's mirror reflections (default off: renders ~2x faster; recorded, "
                        "and evaluation renders the same)")
    p.add_argument("--libero-python", help="libero-real: the LIBERO venv's python (default $VAM_LIBERO_PYTHON)")
    p.add_argument("--only", default="", help="libero-real: comma-separated tasks to collect, as suite/index "
                                              "(e.g. goal/3; default: every task of --suites)")
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
    p.add_argument("--noise-where", choices=NOISE_WHERE_FLAGS, default="everywhere",
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


def _summary(info: dict, out: str) -> str:
    """What a collection wrote, in words (it printed its info dict)."""
    h, w, _ = info.get("frame_shape", (0, 0, 0))
    line = (f"wrote {out}: {info['total_episodes']} episodes, {info['total_frames']} steps "
            f"({w}x{h} stacked frames) in {info['collect_s'] / 60:.1f} min")
    per = info.get("expert_success")
    if per:
        line += "; the expert solved " + ", ".join(f"{t} {c['successes']}/{c['episodes']}" for t, c in per.items())
    else:
        line += f"; the expert solved {100 * info['expert_success_rate']:.0f} % of its attempts"
    return line


def _run_real(args: argparse.Namespace) -> int:
    from vam_sim.collect_libero_real import Collector, RealCollectConfig   # the LIBERO client: only for its robot
    from vam_sim.libero_real.client import libero_python

    cfg = RealCollectConfig(suites=tuple(s.strip() for s in (args.suites or "spatial,goal").split(",") if s.strip()),
                            episodes_per_task=args.episodes_per_task, seed=args.seed, noise=args.noise,
                            noise_every=args.noise_every, image_size=args.image_size,
                            reflections=args.reflections == "on", workers=args.workers,
                            tasks=tuple(t.strip() for t in args.only.split(",") if t.strip()),
                            python=libero_python(args.libero_python))
    if args.overwrite:
        raise ValueError("collect --robot libero-real never replaces a dataset (hours of rendering): remove --out "
                         "yourself, or choose another; an unfinished run in --out continues without --overwrite")
    collector = Collector(cfg, args.out)
    bar = progress_bar(total=len(cfg.task_list()) * cfg.episodes_per_task, unit="demo", desc="collect", file=sys.stdout)

    def report(rec: dict, prog: dict) -> None:
        bar.n = prog["kept"]
        eta = f"{prog['eta_s'] / 60:.0f} min left" if prog["eta_s"] is not None else "estimating"
        bar.set_postfix_str(f"{rec['suite']} t{rec['task']} a{rec['attempt']} "
                            f"{'kept' if rec['success'] else rec['reason'][:40] if rec['reason'] else 'failed'}; "
                            f"{prog['cpu_s_per_demo']:.0f} CPU-s/demo; {eta}", refresh=True)

    collector.report = report
    try:
        info = collector.run()
    except KeyboardInterrupt:
        bar.close()
        prog = collector.progress() if hasattr(collector, "journal") else {"kept": 0}
        print(f"collect: stopped; {prog['kept']} demonstrations are kept in {args.out}/.collect: run the same "
              f"command to continue", file=sys.stderr)
        raise
    except (RuntimeError, OSError) as e:      # a LIBERO that keeps failing, a full disk, an expert short of demos
        bar.close()
        raise SystemExit(f"{e}") from e
    finally:
        bar.close()
    rates = {t: c for t, c in info["expert"].items() if c["rate"] is not None}
    worst = min(rates, key=lambda t: rates[t]["rate"]) if rates else None
    print(f"wrote {args.out}: {info['total_episodes']} demonstrations, {info['total_frames']} steps; the expert "
          f"solved {sum(c['success'] for c in rates.values())} of {sum(c['valid'] for c in rates.values())} scenes"
          + (f" (lowest: {worst} {rates[worst]['success']}/{rates[worst]['valid']})" if worst else "")
          + f"; per task in {args.out}/meta/info.json (expert)")
    return 0


def run(args: argparse.Namespace) -> int:
    if args.robot == "libero-real":       # its own claim of --out: an unfinished run there continues
        return _run_real(args)
    claim_dataset_dir(args.out, args.overwrite)     # an existing --out refused before anything is drawn
    if args.robot == "yam-mujoco":
        from vam_sim.collect_yam import YamCollectConfig, collect_yam   # loads MuJoCo: only for its robot

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
        print(_summary(info, args.out))
        return 0
    cfg = CollectConfig(suites=tuple(s.strip() for s in (args.suites or "goal").split(",") if s.strip()),
                        episodes_per_task=args.episodes_per_task, seed=args.seed, noise=args.noise,
                        noise_every=args.noise_every, keep_failures=args.keep_failures, workers=args.workers,
                        mock_config=args.mock_config)
    bar = progress_bar(total=cfg.total_episodes, unit="ep", desc="collect", file=sys.stdout)
    info = collect(cfg, args.out, progress=lambda s, t, k: (bar.set_postfix_str(f"{s} task {t}", refresh=False), bar.update(1)),
                   overwrite=args.overwrite)
    bar.close()
    print(_summary(info, args.out))
    return 0
