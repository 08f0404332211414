"""TR by phase against the feature block k and the extraction noise sigma_v: the table and figure.

    vam-stack tr-block --data docs/data/paper_study/tr_block --shipped docs/data/paper_study/tr_study/lora \
        --shipped-eval docs/data/paper_study/eval/lora/goal/none/results.json \
        --shipped-phase docs/data/paper_study/tr_phase/lora4_goal/tr_phase.json --out docs/paper_study

Reads what `scripts/tr_block_study.sh` wrote for every head (a new head per DiT block k on the
frozen pretrained + LoRA DiT): DATA/k<K>/{goal,goal_ood}/tr_study.json (TR by phase at every
solver grid index), DATA/k<K>/eval_goal_none/results.json (its ID success) and, when present,
DATA/k<K>/tr_phase/tr_phase.json (vam-stack tr-phase on goal: how much the decoded chunk changes when
the future frames' features V+, or the current frame's V0, are swapped for another episode's). The shipped head (trained with
the DiT, at k = 3) is drawn beside them. Writes OUT/tr_block.png and OUT/tr_block_table.md.
"""
from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import numpy as np

from vam_sim.episode import wilson_interval

from .tr_study import save_figure

SUITES = ("goal", "goal_ood")
PHASES = ("planning", "manipulation")


def _load(path: Path) -> dict | None:
    return json.loads(path.read_text()) if path.is_file() else None


def _feature_block(checkpoint: str) -> int:
    """The block k a TR study's checkpoint reads (from its stored config)."""
    from vam_model.networks.checkpoint import read_metadata

    if not Path(checkpoint).is_file():
        raise SystemExit(f"the shipped TR study's checkpoint {checkpoint!r} is not here: its block k is unknown")
    return read_metadata(checkpoint)[0].dit.feature_block


def load(data: Path, shipped: Path | None, shipped_eval: Path | None, shipped_phase: Path | None = None) -> dict:
    """{label: {"k", "tr": {suite: tr_study}, "eval": results|None, "phase": tr_phase|None}} by k."""
    heads = {}
    for d in sorted(data.glob("k*"), key=lambda p: int(re.sub(r"\D", "", p.name) or 0)):
        if not re.fullmatch(r"k\d+", d.name):
            continue
        tr = {s: _load(d / s / "tr_study.json") for s in SUITES}
        if not any(tr.values()):
            continue
        heads[f"new head, k={d.name[1:]}"] = {"k": int(d.name[1:]), "tr": tr,
                                               "eval": _load(d / "eval_goal_none" / "results.json"),
                                               "phase": _load(d / "tr_phase" / "tr_phase.json")}
    if not heads:
        raise SystemExit(f"no k<K>/<suite>/tr_study.json under {str(data)!r}: run scripts/tr_block_study.sh first")
    if shipped is not None:
        tr = {s: _load(shipped / s / "tr_study.json") for s in SUITES}
        if not any(tr.values()):
            raise SystemExit(f"--shipped {str(shipped)!r} has no <suite>/tr_study.json")
        k = _feature_block(next(v for v in tr.values() if v)["checkpoint"])
        heads[f"shipped head (joint), k={k}"] = {
            "k": k, "tr": tr, "eval": _load(shipped_eval) if shipped_eval else None,
            "phase": _load(shipped_phase) if shipped_phase else None}
    return heads


def success(results: dict | None) -> tuple[int, int] | None:
    if not results:
        return None
    k, n = results["by_guidance"]["none"]["counts"]["goal"]
    return int(k), int(n)


def rows(heads: dict) -> list[dict]:
    """One table row per head: TR by phase at the policy's index (goal and goal_ood), TR's range over
    sigma_v, ID success."""
    out = []
    for label, h in heads.items():
        row = {"head": label, "k": h["k"]}
        for s in SUITES:
            st = h["tr"].get(s)
            if not st:
                continue
            bp = st["by_phase_at_default_index"]
            for ph in PHASES:
                row[f"{s}_{ph}"] = bp[ph]
            means = [v["all"]["mean"] for v in st["by_sigma_v"].values()]
            row[f"{s}_sigma_range"] = (min(means), max(means))
        row["success"] = success(h["eval"])
        if h["phase"]:
            rs = h["phase"]["rows"]
            row["swap"] = tuple(float(np.mean([r[q] for r in rs])) for q in ("swap_future", "swap_current"))
        out.append(row)
    return out


def table(rs: list[dict]) -> str:
    def cell(st):
        return "-" if not st else f"{st['mean']:.2f} [{st['ci95'][0]:.2f}, {st['ci95'][1]:.2f}]"

    lines = ["| head | goal TR planning | goal TR manipulation | goal_ood TR planning | goal_ood TR manipulation "
             "| TR over the 6 sigma_v (goal, all states) | chunk change, V+ / V0 swapped (goal) "
             "| ID success (goal, `none`, seeds 0-1) |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rs:
        rng = r.get("goal_sigma_range")
        sr = r["success"]
        if sr:
            lo, hi = wilson_interval(*sr)
            succ = f"{sr[0]}/{sr[1]} = {100 * sr[0] / sr[1]:.0f} % [{100 * lo:.0f}-{100 * hi:.0f}]"
        else:
            succ = "-"
        swap = f"{r['swap'][0]:.4f} / {r['swap'][1]:.3f}" if "swap" in r else "-"
        lines.append(f"| {r['head']} | {cell(r.get('goal_planning'))} | {cell(r.get('goal_manipulation'))} | "
                     f"{cell(r.get('goal_ood_planning'))} | {cell(r.get('goal_ood_manipulation'))} | "
                     f"{'-' if not rng else f'{rng[0]:.2f}-{rng[1]:.2f}'} | {swap} | {succ} |")
    return "\n".join(lines)


def plot(heads: dict, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = {"planning": "tab:blue", "manipulation": "tab:orange"}
    new = {lab: h for lab, h in heads.items() if lab.startswith("new head")}
    shipped = {lab: h for lab, h in heads.items() if not lab.startswith("new head")}
    fig, ax = plt.subplots(1, 3, figsize=(17, 4.5))
    ks = [h["k"] for h in new.values()]
    for ph, c in colors.items():                       # A: TR by phase against k, at the policy's index (goal)
        m = [h["tr"]["goal"]["by_phase_at_default_index"][ph] for h in new.values()]
        ax[0].errorbar(ks, [s["mean"] for s in m], yerr=[[s["mean"] - s["ci95"][0] for s in m],
                                                         [s["ci95"][1] - s["mean"] for s in m]],
                       marker="o", color=c, capsize=3, label=f"{ph} (new head)")
        for lab, h in shipped.items():
            s = h["tr"]["goal"]["by_phase_at_default_index"][ph]
            ax[0].plot([h["k"] + 0.08], [s["mean"]], marker="*", ms=12, color=c, ls="none",
                       label=f"{ph} (shipped head)")
    ax[0].set_xticks(ks)
    ax[0].set_xlabel("DiT block k the head reads")
    ax[0].set_ylabel("TR (goal, policy's sigma_v)")
    ax[0].set_title("TR by phase against k (95 % intervals; states correlated)", fontsize=9)
    ax[0].legend(fontsize=7)
    cmap = plt.get_cmap("viridis")                     # B: TR against sigma_v for every k, by phase
    for i, (lab, h) in enumerate(new.items()):
        sig = h["tr"]["goal"]["by_sigma_v"]
        xs = [v["sigma_v"] for v in sig.values()]
        for ph, ls in (("manipulation", "-"), ("planning", "--")):
            ax[1].plot(xs, [v[ph]["mean"] for v in sig.values()], ls, marker="o", ms=3,
                       color=cmap(i / max(1, len(new) - 1)), label=f"k={h['k']} {ph}")
    ax[1].invert_xaxis()
    ax[1].set_xlabel("extraction noise sigma_v (solver grid)")
    ax[1].set_ylabel("TR (goal)")
    ax[1].set_title("TR against sigma_v: manipulation solid, planning dashed", fontsize=9)
    ax[1].legend(fontsize=6, ncol=2)
    labels, vals, errs = [], [], []                    # C: ID success per head
    for lab, h in heads.items():
        sr = success(h["eval"])
        if sr:
            lo, hi = wilson_interval(*sr)
            p = sr[0] / sr[1]
            labels.append(lab.replace("new head, ", "").replace("shipped head (joint), ", "shipped "))
            vals.append(100 * p)
            errs.append((100 * (p - lo), 100 * (hi - p)))
    if vals:
        ax[2].bar(labels, vals, yerr=np.array(errs).T, capsize=4, color="tab:gray")
        ax[2].set_ylim(0, 100)
    ax[2].set_ylabel("ID success, goal, `none` (%)")
    ax[2].set_title("closed loop, 100 episodes each (Wilson 95 %)", fontsize=9)
    return save_figure(fig, path)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", required=True, help="the study's data directory (k<K>/ under it)")
    p.add_argument("--shipped", help="TR-study directory of the shipped head (<suite>/tr_study.json under it)")
    p.add_argument("--shipped-eval", help="results.json of the shipped head's goal `none` cell")
    p.add_argument("--shipped-phase", help="tr_phase.json of the shipped head (vam-stack tr-phase on goal)")
    p.add_argument("--out", required=True, help="directory for tr_block.png and tr_block_table.md")


def run(args: argparse.Namespace) -> int:
    heads = load(Path(args.data), *(Path(a) if a else None for a in (args.shipped, args.shipped_eval,
                                                                      args.shipped_phase)))
    text = table(rows(heads))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "tr_block_table.md").write_text(text + "\n")
    png = plot(heads, out / "tr_block.png")
    print(text)
    print(f"wrote {out / 'tr_block_table.md'} and {png}")
    return 0

