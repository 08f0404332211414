"""`vam-stack sim` (closed-loop episodes) and `vam-stack eval` (success by suite and schedule)."""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from vam_policy_node.guidance import SCHEDULES as GUIDANCE

from .reach import reach_stats
from .runner import SimConfig, SimRunner, success_counts, success_intervals, success_rates, summarise
from .tasks import SUITES


def _suite(text: str) -> str:
    """argparse type: a suite name, LIBERO's aliases accepted."""
    from .tasks import canonical_suite

    try:
        return canonical_suite(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _weights_notice(runner: SimRunner) -> str:
    p = runner.policy
    if p is None:
        return "policy: scripted expert"
    notice = ""
    if p.weights not in ("random", None):
        from .config import CONVENTIONS, checkpoint_conventions

        got = checkpoint_conventions(p.weights)
        if got != CONVENTIONS:
            notice = (f"\nWARNING: these weights were trained on the mock's conventions {got or 'before libero-1'!r}, "
                      f"not the current {CONVENTIONS!r} (LIBERO's frames, 20 Hz ticks, LIBERO's tasks): expect "
                      f"~0 % success until they are retrained on the current mock")
    if p.weights == "random":
        return (f"policy: {p.mcfg.name} preset with RANDOM (untrained) weights -- its actions are noise and "
                f"success is expected to be ~0 %; train and ship weights (models/{p.mcfg.name}.safetensors) "
                f"to see the method work")
    return f"policy: {p.mcfg.name} preset, weights {p.weights}" + notice


def run_suite(cfg: SimConfig, out: Path, policy=None, quiet: bool = False,
              runner_cls=SimRunner) -> tuple[list[dict], SimRunner]:
    from tqdm import tqdm

    episodes = []
    with runner_cls(cfg, out, policy=policy) as runner:
        if not quiet:
            print(_weights_notice(runner), flush=True)
        bar = tqdm(total=cfg.episodes, desc=f"{cfg.suite}/{cfg.guidance if cfg.policy == 'vam' else 'expert'}",
                   unit="ep", disable=quiet, file=sys.stdout)
        for i in range(cfg.episodes):
            ep = runner.run_episode(i)
            episodes.append(ep)
            ok = sum(e["success"] for e in episodes)
            bar.set_postfix_str(f"success {ok}/{len(episodes)}, last {ep['steps']} steps")
            bar.update(1)
        bar.close()
    return episodes, runner


# ---- sim ------------------------------------------------------------------------------------
def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--robot", default="libero-mock", choices=("libero-mock", "libero-real", "yam-mujoco"),
                   help="libero-mock: mocked LIBERO bridge; libero-real: real LIBERO in its own environment "
                        "(libero_real); yam-mujoco: simulated bimanual YAM (yam_mujoco)")
    p.add_argument("--libero-python", help="libero-real: interpreter of the LIBERO environment "
                                           "(default $VAM_LIBERO_PYTHON)")
    p.add_argument("--task", help="yam-mujoco task (handover, relay, tray_lift); the LIBERO robot uses --suite")
    p.add_argument("--suite", default="goal", type=_suite, metavar="SUITE",
                   help=f"one of {', '.join(SUITES)} (LIBERO's names work too: libero_goal, libero_10 / 10, ...)")
    p.add_argument("--mock-config", help="mocked LIBERO YAML (default config/libero_mock.yaml)")
    p.add_argument("--episodes", type=int, default=3, help="episodes (task i %% 10 for episode i)")
    p.add_argument("--seed", type=int, default=0, help="seed id hashed into every initial state")
    p.add_argument("--guidance", default="tr_adaptive", choices=GUIDANCE)
    p.add_argument("--policy", default="vam", choices=("vam", "expert"))
    p.add_argument("--preset", help="model preset when no checkpoint is given (default libero64, the shipped simulation policy; yam-mujoco: tiny_real)")
    p.add_argument("--checkpoint", help="safetensors checkpoint (default: models/<preset>.safetensors if shipped)")
    p.add_argument("--first-task", type=int, default=0, help="task index of the first episode")
    p.add_argument("--max-steps", type=int, help="cap episode length (quick smoke runs)")
    p.add_argument("--execute", type=int, help="replan every N steps instead of the preset's (LIBERO presets: 10)")
    p.add_argument("--executor", default="lockstep", choices=("lockstep", "realtime"),
                   help="lockstep: the simulation waits for each replan (deterministic, how results are "
                        "reported); realtime: the mocked bridge runs at its own 20 Hz on the wall clock while "
                        "the policy infers in a worker thread (missed and held ticks reported)")
    p.add_argument("--no-record", action="store_true", help="do not write recording.mcap")
    p.add_argument("--record-image-every", type=int, default=1, help="write every k-th camera frame to the MCAP")
    p.add_argument("--out", required=True, help="output directory")


def run(args: argparse.Namespace) -> int:
    if args.robot == "yam-mujoco":
        from yam_mujoco.cli import run as run_yam  # imports mujoco only when asked for

        return run_yam(args)
    if args.task is not None:
        raise SystemExit(f"--task {args.task!r} is for --robot yam-mujoco; the LIBERO robot takes --suite/--first-task")
    cfg = SimConfig(suite=args.suite, episodes=args.episodes, seed=args.seed, guidance=args.guidance,
                    policy=args.policy, preset=args.preset or "libero64", checkpoint=args.checkpoint,
                    record=not args.no_record, record_image_every=args.record_image_every,
                    first_task=args.first_task, max_steps=args.max_steps, execute=args.execute,
                    mock_config=args.mock_config, executor=args.executor)
    out = Path(args.out)
    t0 = time.perf_counter()
    runner_cls = SimRunner
    if args.robot == "libero-real":
        from functools import partial

        from libero_real.runner import RealLiberoRunner

        runner_cls = partial(RealLiberoRunner, python=args.libero_python)
    episodes, runner = run_suite(cfg, out, runner_cls=runner_cls)
    rates = success_rates(episodes)
    stats = summarise(episodes)
    summary = {"config": {k: getattr(cfg, k) for k in cfg.__dataclass_fields__},
               "mock": runner.mock.as_dict(),
               "weights": getattr(runner.policy, "weights", None) if runner.policy else None,
               "episodes": episodes, "success_rate": rates, "success_ci95": success_intervals(episodes),
               "stats": stats,
               "wall_s": round(time.perf_counter() - t0, 2)}
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    ci = success_intervals(episodes)
    print(f"\nsuccess: " + ", ".join(f"{s} {100 * r:.0f} % (95 % interval {100 * ci[s][0]:.0f}-{100 * ci[s][1]:.0f} %)"
                                      for s, r in rates.items())
          + f" ({sum(e['success'] for e in episodes)}/{len(episodes)} episodes)")
    if stats["replans"]:
        print(f"replans: {stats['replans']}, latency p50 {stats['latency_ms_p50']:.0f} ms, "
              f"p95 {stats['latency_ms_p95']:.0f} ms")
        print(f"TR: mean {stats['tr_mean']:.3f} (min {stats['tr_min']:.3f}, max {stats['tr_max']:.3f}); "
              f"guidance branches computed on {100 * stats['guided_fraction']:.0f} % of replans")
    if stats.get("reach"):
        print("reach: " + reach_line(stats["reach"]))
    if stats.get("realtime"):
        print("realtime: " + realtime_line(stats["realtime"]))
    for e in episodes:
        status = "success" if e["success"] else e["termination"]
        extra = f"  -> {out / e['tr_trace']}" if e.get("tr_trace") else ""
        print(f"  {e['name']}: {status} in {e['steps']} steps  \"{e['instruction']}\"{extra}")
    print(f"summary: {out / 'summary.json'}")
    if cfg.record:
        print(f"recording: {out / 'recording.mcap'} (ros2 bag play / Foxglove)")
    return 0


# ---- eval -----------------------------------------------------------------------------------
def add_eval_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--suites", default="goal,goal_ood", help="comma-separated suites")
    p.add_argument("--episodes-per-task", type=int, default=1)
    p.add_argument("--seeds", default="0", help="comma-separated seed ids, e.g. 0,1,2")
    p.add_argument("--guidance", default="none,flat,tr_adaptive", help="comma-separated schedules to compare")
    p.add_argument("--policy", default="vam", choices=("vam", "expert"))
    p.add_argument("--preset", default="libero64")
    p.add_argument("--checkpoint")
    p.add_argument("--plots", action="store_true", help="also write per-episode TR trace PNGs")
    p.add_argument("--max-steps", type=int, help="cap episode length below the suite's limit (budgeted runs)")
    p.add_argument("--execute", type=int, help="replan every N steps instead of the preset's (LIBERO presets: 10)")
    p.add_argument("--mock-config", help="mocked LIBERO YAML (default config/libero_mock.yaml)")
    p.add_argument("--out", required=True)


def _csv(text: str, allowed=None, kind="value") -> list[str]:
    items = [x.strip() for x in text.split(",") if x.strip()]
    if not items:
        raise SystemExit(f"empty {kind} list: {text!r}")
    for x in items:
        if allowed is not None and x not in allowed:
            raise SystemExit(f"unknown {kind} {x!r}; choose from {', '.join(allowed)}")
    return items


def run_eval(args: argparse.Namespace) -> int:
    try:
        suites = [_suite(x) for x in _csv(args.suites, kind="suite")]
    except argparse.ArgumentTypeError as e:
        raise SystemExit(str(e)) from None
    schedules = _csv(args.guidance, GUIDANCE, "guidance") if args.policy == "vam" else ["expert"]
    try:
        seeds = [int(s) for s in _csv(args.seeds, kind="seed")]
    except ValueError:
        raise SystemExit(f"--seeds must be comma-separated integers, got {args.seeds!r}") from None
    if args.episodes_per_task < 1:
        raise SystemExit(f"--episodes-per-task must be >= 1, got {args.episodes_per_task}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    policy = None
    by_guidance, all_eps = {}, []
    for g in schedules:
        eps = []
        for suite in suites:
            for seed in seeds:
                cfg = SimConfig(suite=suite, episodes=10 * args.episodes_per_task, seed=seed,
                                guidance=g if g != "expert" else "none", policy=args.policy, preset=args.preset,
                                checkpoint=args.checkpoint, record=False, plots=args.plots,
                                max_steps=getattr(args, "max_steps", None), execute=getattr(args, "execute", None),
                                mock_config=getattr(args, "mock_config", None))
                run_out = out / f"{g}" / f"{suite}_s{seed}"
                if policy is not None:           # one model for every schedule; only the schedule changes
                    from dataclasses import replace

                    from vam_policy_node.guidance import GuidanceConfig
                    policy.cfg = replace(policy.cfg, guidance=GuidanceConfig(schedule=g))
                    policy.guidance.cfg = policy.cfg.guidance
                    policy.generator.manual_seed(seed)
                got, runner = run_suite(cfg, run_out, policy=policy)
                policy = runner.policy if args.policy == "vam" else None
                eps.extend(got)
        by_guidance[g] = {"success_rate": success_rates(eps), "counts": success_counts(eps),
                          "ci95": success_intervals(eps), "per_task": _per_task(eps),
                          "stats": summarise(eps),
                          "reach": {s: reach_stats([e for e in eps if e["suite"] == s]) for s in suites}}
        all_eps.extend(eps)
    from .config import LiberoMockConfig

    results = {"suites": suites, "seeds": seeds, "episodes_per_task": args.episodes_per_task,
               "mock": LiberoMockConfig.load(getattr(args, "mock_config", None)).as_dict(),
               "max_steps": getattr(args, "max_steps", None), "execute": getattr(args, "execute", None),
               "guidance": schedules, "success_rate": by_guidance[schedules[0]]["success_rate"],
               "by_guidance": by_guidance,
               "episodes": [{k: e[k] for k in ("suite", "task", "seed", "episode", "guidance", "success", "steps",
                                                "termination")}
                            | {"tr_summary": e.get("tr_summary"), "reach": e.get("reach")}
                            for e in all_eps]}
    (out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    table = markdown_table(suites, schedules, by_guidance)
    reach = reach_table(suites, schedules, by_guidance)
    table += ("\n\nWhy episodes fail (named object grasped / another object grasped, median closest xy "
              "approach to the first named object):\n\n" + reach) if reach else ""
    (out / "results.md").write_text(table + "\n")
    print(table)
    print(f"\nresults: {out / 'results.json'}, {out / 'results.md'}")
    return 0


def _per_task(eps: list[dict]) -> dict:
    by: dict = {}
    for e in eps:
        by.setdefault(e["suite"], {}).setdefault(str(e["task"]), []).append(bool(e["success"]))
    return {s: {t: round(sum(v) / len(v), 4) for t, v in d.items()} for s, d in by.items()}


def _closest(r: dict) -> str:
    return "-" if r["closest_xy_cm_median"] is None else f"{r['closest_xy_cm_median']:.1f} cm"


def reach_line(r: dict) -> str:
    return (f"named object grasped in {r['grasped_named']}/{r['episodes']} episodes, another object in "
            f"{r['grasped_other']}/{r['episodes']}, median closest approach {_closest(r)}")


def realtime_line(r: dict) -> str:
    hz = "-" if r["achieved_hz_min"] is None else f"{r['achieved_hz_min']:.1f} Hz"
    jit = "-" if r["p99_jitter_ms_max"] is None else f"{r['p99_jitter_ms_max']:.1f} ms"
    return (f"{r['ticks']} ticks over {r['episodes']} episodes: {r['missed_ticks']} missed by the clock, "
            f"{r['held_ticks']} held waiting for a chunk, {r['late_ticks']} run past `execute` (late chunk), "
            f"{r['dropped_chunks']} chunks dropped; slowest episode {hz}, worst p99 jitter {jit}")


def reach_table(suites: list[str], schedules: list[str], by_guidance: dict) -> str | None:
    """Rows: suite; columns: schedule; cells: named grasps k/n, other grasps, median closest approach."""
    per = {(g, s): by_guidance[g].get("reach", {}).get(s) for g in schedules for s in suites}
    if not any(per.values()):
        return None

    def cell(r):
        return "-" if r is None else f"{r['grasped_named']}/{r['episodes']} named, {r['grasped_other']} other, {_closest(r)}"

    rows = ["| suite | " + " | ".join(schedules) + " |", "|---|" + "---|" * len(schedules)]
    rows += [f"| {s} | " + " | ".join(cell(per[g, s]) for g in schedules) + " |" for s in suites]
    return "\n".join(rows)


def markdown_table(suites: list[str], schedules: list[str], by_guidance: dict) -> str:
    """Rows: suite family (ID | OOD side by side); columns: schedule."""
    fams = []
    for s in suites:
        fam = s.removesuffix("_ood")
        if fam not in fams:
            fams.append(fam)
    head = "| suite | " + " | ".join(f"{g} ID | {g} OOD" for g in schedules) + " |"
    sep = "|---|" + "---|" * (2 * len(schedules))
    rows = [head, sep]

    def cell(g, s):
        r = by_guidance[g]["success_rate"].get(s)
        if r is None:
            return "-"
        k = by_guidance[g].get("counts", {}).get(s)
        ci = by_guidance[g].get("ci95", {}).get(s)
        return (f"{100 * r:.1f} %" + (f" ({k[0]}/{k[1]})" if k else "")
                + (f" [{100 * ci[0]:.0f}-{100 * ci[1]:.0f}]" if ci else ""))

    for fam in fams:
        rows.append(f"| {fam} | " + " | ".join(f"{cell(g, fam)} | {cell(g, fam + '_ood')}" for g in schedules) + " |")
    return "\n".join(rows)
