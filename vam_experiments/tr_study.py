"""TR study of a trained model: TR by expert phase, and TR against the extraction noise sigma_v.

    vam-stack tr-study --checkpoint models/libero64.safetensors --suite goal --episodes 10 --every 5 \
        --out runs/tr_study

States come from held-out scripted-expert episodes (seed id `--seed`, default 0, the one
evaluation uses; training demonstrations use another seed id), so each state carries the
expert's phase label (planning = free-space transport, manipulation = near-object grasp and
place). For every `--every`-th state the policy replans (unguided: TR is read before any
guidance) once per solver grid index in `--indices`, with the same noise for each index.
Writes OUT/tr_study.json (per phase and per sigma_v: mean, std, n) and OUT/tr_study.png.
"""
from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

import numpy as np


def collect_states(suite: str, episodes: int, seed: int, every: int) -> list[dict]:
    from vam_sim.libero_mock import LiberoMockConfig, rollout_expert

    mock = LiberoMockConfig.load()
    states = []
    for i in range(episodes):
        demo = rollout_expert(suite, i % 10, i // 10, seed, render=True, cfg=mock)
        for t in range(0, len(demo), every):
            states.append({"frame": demo.stacked[t], "proprio": demo.proprio[t], "phase": demo.phases[t],
                           "instruction": demo.instruction, "task": demo.task, "step": t})
    return states


def measure(policy, states: list[dict], indices: list[int], progress: bool = True) -> list[dict]:
    """TR of every state at every grid index (same per-state noise across indices)."""
    from vam_model.networks.video_solver import sigma_grid

    from vam_stack.progress import progress_bar
    from vam_stack.views import fit_views

    grid = sigma_grid(policy.mcfg.solver)
    r = policy.mcfg.robot
    rows = []
    for k, s in enumerate(progress_bar(states, desc="tr-study", unit="state", disable=not progress)):
        policy.reset(s["instruction"])
        frame = fit_views(s["frame"], len(r.cameras), r.camera_width, r.camera_height)  # the camera path's rule
        obs = {"frame": frame, "proprio": s["proprio"]}
        for idx in indices:
            policy.cfg = replace(policy.cfg, feature_index=idx)
            policy.generator.manual_seed(1000 + k)
            out = policy.infer(obs)
            rows.append({"state": k, "phase": s["phase"], "task": s["task"], "index": idx,
                         "sigma_v": round(grid[idx], 4), "tr": float(out["tr"])})
    return rows


def summarise(rows: list[dict], default_index: int) -> dict:
    def stat(v):
        v = np.asarray(v, dtype=float)
        if not v.size:
            return None
        half = 1.96 * float(v.std(ddof=1)) / np.sqrt(v.size) if v.size > 1 else float("nan")
        m = float(v.mean())            # ci95: normal-approximation interval of the mean (states are not independent
        return {"mean": m, "std": float(v.std()), "n": int(v.size),   # within an episode: read it as a lower bound)
                "ci95": [m - half, m + half]}

    by_sigma = {}
    for idx in sorted({r["index"] for r in rows}):
        sel = [r for r in rows if r["index"] == idx]
        by_sigma[str(idx)] = {"sigma_v": sel[0]["sigma_v"], "all": stat([r["tr"] for r in sel]),
                              **{ph: stat([r["tr"] for r in sel if r["phase"] == ph])
                                 for ph in ("planning", "manipulation")}}
    at = [r for r in rows if r["index"] == default_index]
    by_phase = {ph: stat([r["tr"] for r in at if r["phase"] == ph]) for ph in ("planning", "manipulation")}
    return {"default_index": default_index, "by_phase_at_default_index": by_phase, "by_sigma_v": by_sigma}


def plot(summary: dict, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(1, 2, figsize=(10, 4))
    sig = summary["by_sigma_v"]
    xs = [sig[k]["sigma_v"] for k in sig]
    for ph, c in (("planning", "tab:blue"), ("manipulation", "tab:orange"), ("all", "k")):
        ys = [sig[k][ph]["mean"] if sig[k][ph] else np.nan for k in sig]
        es = [sig[k][ph]["std"] if sig[k][ph] else np.nan for k in sig]
        ax[0].errorbar(xs, ys, yerr=es, marker="o", color=c, label=ph, capsize=3, alpha=0.8)
    ax[0].set_xlabel("extraction noise level sigma_v")
    ax[0].set_ylabel("TR (mass on future / mass on current frame)")
    ax[0].invert_xaxis()
    ax[0].legend()
    ax[0].set_title("TR vs sigma_v (grid of the 6-step solver)")
    bp = summary["by_phase_at_default_index"]
    names = [p for p in ("planning", "manipulation") if bp[p]]
    ax[1].bar(names, [bp[p]["mean"] for p in names], yerr=[bp[p]["std"] for p in names], capsize=4,
              color=["tab:blue", "tab:orange"][: len(names)])
    ax[1].set_title(f"TR by expert phase (grid index {summary['default_index']})")
    return save_figure(fig, path)


def save_figure(fig, path: Path, dpi: int = 100) -> Path:
    """Lay out, write (creating the directory) and close a study figure."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path


def state_arguments(p: argparse.ArgumentParser, episodes: int) -> None:
    """The options of a study over held-out expert states (tr-study, tr-phase), and its output."""
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--suite", default="goal")
    p.add_argument("--episodes", type=int, default=episodes)
    p.add_argument("--seed", type=int, default=0, help="seed id of the held-out expert episodes")
    p.add_argument("--every", type=int, default=5, help="use every n-th state of each expert episode")
    p.add_argument("--out", required=True, help="output directory (must be empty or new)")
    p.add_argument("--overwrite", action="store_true", help="write into a non-empty --out")


def add_arguments(p: argparse.ArgumentParser) -> None:
    state_arguments(p, episodes=10)
    p.add_argument("--indices", default="0,1,2,3,4,5", help="solver grid indices to extract features at")


def table(summary: dict) -> str:
    """TR mean [95 % interval] (n) per sigma_v and phase: what a reader needs from the study."""
    def cell(s):
        return "-" if not s else f"{s['mean']:.3f} [{s['ci95'][0]:.3f}, {s['ci95'][1]:.3f}] n={s['n']}"

    lines = [f"{'index':>5} {'sigma_v':>7}  {'all':<30} {'planning':<30} {'manipulation':<30}"]
    for k, row in summary["by_sigma_v"].items():
        mark = " *" if int(k) == summary["default_index"] else ""
        lines.append(f"{k:>5} {row['sigma_v']:7.3f}  {cell(row['all']):<30} {cell(row['planning']):<30} "
                     f"{cell(row['manipulation']):<30}{mark}")
    lines.append("* the policy's extraction index")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from vam_model.policy import build_policy
    from vam_stack.outputs import claim_out_dir

    try:                                             # cheap checks before a model is loaded
        indices = [int(x) for x in args.indices.split(",")]
    except ValueError:
        raise SystemExit(f"--indices must be comma-separated integers, got {args.indices!r}") from None
    if args.episodes < 1 or args.every < 1:
        raise SystemExit(f"--episodes and --every must be >= 1, got {args.episodes}, {args.every}")
    if not Path(args.checkpoint).is_file():
        raise SystemExit(f"--checkpoint {args.checkpoint!r} is not a file")
    claim_out_dir(args.out, args.overwrite)          # before minutes of work, not after
    policy = build_policy(checkpoint=args.checkpoint, guidance="none", seed=0)
    steps = policy.mcfg.solver.steps
    bad = [i for i in indices if not 0 <= i < steps]
    if bad:
        raise SystemExit(f"--indices {bad} outside the solver grid [0, {steps - 1}]")
    states = collect_states(args.suite, args.episodes, args.seed, args.every)
    rows = measure(policy, states, indices)
    summary = summarise(rows, policy.mcfg.solver.feature_index) | {
        "checkpoint": args.checkpoint, "suite": args.suite, "seed": args.seed, "states": len(states)}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "tr_study.json").write_text(json.dumps(summary | {"rows": rows}, indent=2) + "\n")
    png = plot(summary, out / "tr_study.png")
    print(table(summary))
    print(f"wrote {out / 'tr_study.json'} and {png}")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(p)
    return run(p.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
