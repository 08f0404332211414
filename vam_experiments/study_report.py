"""The paper study's summary: the claims' verdicts from the finished cells, the markdown table
and the figure (vam_experiments.paper_study writes them)."""
from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

from .study_stats import ID_SUITE, OOD_SUITE, PHASES, diff_interval, pair_outcomes, paired_diff, verdict
from .tr_study import save_figure

if TYPE_CHECKING:                                   # the config type only (paper_study imports this module)
    from .paper_study import StudyConfig

PENDING = "pending (cells unfinished)"


UNDECIDED = "not resolvable at this n (the paired interval clears 0, McNemar's exact test does not)"


def summarise(cfg: StudyConfig, cells: dict, tr: dict) -> dict:
    """cells[model][suite][label] = cell_stats; tr[model][suite] = tr_stats. Returns the summary
    with the four claims' verdicts (on the paper's setting: pretrained + LoRA, no guidance for
    the model comparison) and the guidance claims checked on every model. A claim whose cells
    have not all finished (fewer than the cell's episodes) is 'pending', never judged."""
    def full(m, suite, label):
        c = cells.get(m, {}).get(suite, {}).get(label)
        return c if c and c["episodes"] >= cfg.cell_episodes else None

    def rate_diff(m1, l1, m2, l2, suite):
        a, b = full(m1, suite, l1), full(m2, suite, l2)
        if a is None or b is None:
            return None
        d, lo, hi = diff_interval(a["successes"], a["episodes"], b["successes"], b["episodes"])
        out = {"diff": d, "ci95": [lo, hi], "unpaired_ci95": [lo, hi], "a": f"{m1}/{l1}", "b": f"{m2}/{l2}",
               "suite": suite, "paired": None}
        xa, xb = pair_outcomes(a.get("outcomes", {}), b.get("outcomes", {}))
        if xa and len(xa) == a["episodes"] == b["episodes"]:   # every episode ran under both arms: judge paired
            out["paired"] = paired_diff(xa, xb)
            out["ci95"] = out["paired"]["ci95"]
        return out

    def decided(x) -> bool:
        """A paired difference counts only when McNemar's exact test agrees (p < 0.05): at the margin
        Newcombe's approximate interval can clear 0 while the exact test does not."""
        return x.get("paired") is None or x["paired"]["mcnemar_p"] < 0.05

    def judged(evidence, sign):
        if evidence is None:
            return PENDING
        v = verdict(*evidence["ci95"], sign)
        return v if v == "not resolvable at this n" or decided(evidence) else UNDECIDED

    claims = {}
    c1 = rate_diff("lora", "none", "full", "none", OOD_SUITE)
    claims["lora_beats_full_ood"] = {"claim": "LoRA beats full fine-tuning out of distribution (goal_ood, none)",
                                     "evidence": c1, "verdict": judged(c1, +1)}
    both = all(len(tr.get(m, {})) == 2 for m in ("lora", "full"))
    c2 = None
    if both:
        ta, tf = _pooled_tr(tr["lora"]), _pooled_tr(tr["full"])
        d = ta["mean"] - tf["mean"]
        half = 1.96 * math.sqrt(ta["se"] ** 2 + tf["se"] ** 2)
        c2 = {"diff": d, "ci95": [d - half, d + half], "lora": ta, "full": tf}
    claims["tr_higher_with_lora"] = {
        "claim": "TR is higher with LoRA than with full fine-tuning (TR study, goal and goal_ood states)",
        "evidence": c2, "verdict": judged(c2, +1)}
    per_model = {}
    for m in cells:
        ood = rate_diff(m, "tr_adaptive", m, "none", OOD_SUITE)
        idd = rate_diff(m, "tr_adaptive", m, "none", ID_SUITE)
        if ood is None or idd is None:
            v3 = PENDING
        elif (ood["ci95"][1] < 0 and decided(ood)) or (idd["ci95"][1] < 0 and decided(idd)):
            v3 = "refuted"
        elif ood["ci95"][0] > 0 and decided(ood):
            v3 = "confirmed"
        else:
            v3 = "not resolvable at this n"
        flat = rate_diff(m, "flat", m, "none", ID_SUITE)
        per_model[m] = {"tr_adaptive_vs_none_ood": ood, "tr_adaptive_vs_none_id": idd, "tr_adaptive_verdict": v3,
                        "flat_vs_none_id": flat, "flat_verdict": judged(flat, -1)}
    lora = per_model.get("lora", {})
    claims["tr_adaptive_helps_ood_keeps_id"] = {
        "claim": "tr_adaptive >= none on OOD with ID kept (pretrained + LoRA)",
        "evidence": {k: lora.get(k) for k in ("tr_adaptive_vs_none_ood", "tr_adaptive_vs_none_id")},
        "verdict": lora.get("tr_adaptive_verdict", PENDING)}
    claims["flat_costs_id"] = {"claim": "flat guidance costs ID success (pretrained + LoRA)",
                               "evidence": lora.get("flat_vs_none_id"), "verdict": lora.get("flat_verdict", PENDING)}
    complete = all(full(m.name, s, g) for m in cfg.models for s in (ID_SUITE, OOD_SUITE) for g in cfg.guidance) \
        and all(len(tr.get(m.name, {})) == 2 for m in cfg.models)
    lora_id = full("lora", ID_SUITE, "none")
    gain = rate_diff("lora", "none", "scratch", "none", OOD_SUITE)
    met = None if lora_id is None or gain is None else lora_id["rate"] >= 0.8 and gain["ci95"][0] > 0
    ship = {"rule": "ship pretrained + LoRA as the default if its ID success (none) is >= 80 % and its OOD "
                    "success (none) is above the scratch model's (difference interval above 0)",
            "id_rate": lora_id["rate"] if lora_id else None, "ood_gain_over_scratch": gain,
            "met_by_finished_cells": met,
            "ship": met if complete else None}     # decided only on the complete study, never on a partial table
    return {"complete": complete,
            "config": {"seeds": list(cfg.seeds), "episodes_per_cell": cfg.cell_episodes,
                       "guidance": list(cfg.guidance)},
            "models": {m.name: {"label": m.label, "checkpoint": m.checkpoint} for m in cfg.models if m.name in cells},
            "cells": cells, "tr": tr, "claims": claims, "guidance_by_model": per_model, "ship_lora": ship}


def _pooled_tr(by_suite: dict) -> dict:
    """Mean TR over both suites' states with its standard error (the two suites' states pooled)."""
    parts = [by_suite[s]["all"] for s in (ID_SUITE, OOD_SUITE) if by_suite.get(s) and by_suite[s]["all"]]
    n = sum(p["n"] for p in parts)
    m = sum(p["mean"] * p["n"] for p in parts) / n
    se = math.sqrt(sum((p["se"] * p["n"] / n) ** 2 for p in parts))
    return {"mean": m, "se": se, "n": n}


def _pct(c: dict, of: int | None = None) -> str:
    """`rate (k/n) [interval]`; a cell with fewer than `of` episodes (still running, or stopped) says so."""
    lo, hi = c["ci95"]
    text = f"{100 * c['rate']:.0f} % ({c['successes']}/{c['episodes']}) [{100 * lo:.0f}-{100 * hi:.0f}]"
    return text + (f" (unfinished: {c['episodes']} of {of})" if of is not None and c["episodes"] < of else "")


def markdown(summary: dict) -> str:
    """The study's tables: success per model x schedule (ID | OOD), s_i > 0, TR, the four verdicts."""
    cells, labels = summary["cells"], summary["config"]["guidance"]
    head = "| model | " + " | ".join(f"{g} ID | {g} OOD" for g in labels) + " |"
    out = [f"Success, {summary['config']['episodes_per_cell']} episodes per cell (seeds "
           f"{', '.join(map(str, summary['config']['seeds']))}), [95 % Wilson interval]:", "",
           head, "|" + "---|" * (1 + 2 * len(labels))]
    for m, info in summary["models"].items():
        row = [info["label"]]
        for g in labels:
            for s in (ID_SUITE, OOD_SUITE):
                c = cells[m].get(s, {}).get(g)
                row.append(_pct(c, summary["config"]["episodes_per_cell"]) if c else "-")
        out.append("| " + " | ".join(row) + " |")
    out += ["", "Replans with s_i > 0 (ID | OOD), and episodes with any:", "",
            "| model | " + " | ".join(f"{g} ID | {g} OOD" for g in labels if g.startswith("tr_adaptive")) + " |",
            "|" + "---|" * (1 + 2 * sum(g.startswith("tr_adaptive") for g in labels))]
    for m, info in summary["models"].items():
        row = [info["label"]]
        for g in (g for g in labels if g.startswith("tr_adaptive")):
            for s in (ID_SUITE, OOD_SUITE):
                c = cells[m].get(s, {}).get(g)
                row.append("-" if not c or c["s_positive_fraction"] is None else
                           f"{100 * c['s_positive_fraction']:.0f} % of {c['replans']} ({c['episodes_s_positive']}"
                           f"/{c['episodes']} eps)")
        out.append("| " + " | ".join(row) + " |")
    out += ["", "TR at the inference feature level (TR study: expert states, unguided; mean +- standard error; "
                "states within an episode are correlated, so read the errors as optimistic):", "",
            "| model | goal: all | planning | manipulation | goal_ood: all | planning | manipulation |",
            "|---|---|---|---|---|---|---|"]
    for m, info in summary["models"].items():
        row = [info["label"]]
        for s in (ID_SUITE, OOD_SUITE):
            t = summary["tr"].get(m, {}).get(s)
            for ph in ("all",) + PHASES:
                row.append(f"{t[ph]['mean']:.2f} +- {t[ph]['se']:.2f} (n {t[ph]['n']})" if t and t.get(ph) else "-")
        out.append("| " + " | ".join(row) + " |")
    out += ["", "The paper's claims:", "", "| claim | evidence | verdict |", "|---|---|---|"]

    def pts(x):
        if x is None:
            return "-"
        u = x.get("unpaired_ci95", x["ci95"])
        text = (f"{x['a']} - {x['b']} on {x['suite']}: {100 * x['diff']:+.0f} points "
                f"[{100 * u[0]:+.0f}, {100 * u[1]:+.0f}] unpaired")
        pr = x.get("paired")
        if pr:
            text += (f", [{100 * pr['ci95'][0]:+.0f}, {100 * pr['ci95'][1]:+.0f}] paired on {pr['pairs']} episodes "
                     f"({pr['a_only']} vs {pr['b_only']} discordant, McNemar p {pr['mcnemar_p']:.2g})")
        return text

    for key, c in summary["claims"].items():
        e = c["evidence"]
        if key == "tr_higher_with_lora":
            ev = "-" if e is None else f"{e['diff']:+.2f} TR [{e['ci95'][0]:+.2f}, {e['ci95'][1]:+.2f}]"
        elif key == "tr_adaptive_helps_ood_keeps_id":
            ev = "; ".join(pts(x) for x in e.values())
        else:
            ev = pts(e)
        out.append(f"| {c['claim']} | {ev} | **{c['verdict']}** |")
    out += ["", "The guidance claims on every model:", "",
            "| model | tr_adaptive - none, OOD | tr_adaptive - none, ID | verdict | flat - none, ID | verdict |",
            "|---|---|---|---|---|---|"]

    def d(x):
        if x is None:
            return "-"
        tag = " paired" if x.get("paired") else ""
        return f"{100 * x['diff']:+.0f} [{100 * x['ci95'][0]:+.0f}, {100 * x['ci95'][1]:+.0f}]{tag}"

    for m, g in summary["guidance_by_model"].items():
        out.append(f"| {summary['models'][m]['label']} | {d(g['tr_adaptive_vs_none_ood'])} | "
                   f"{d(g['tr_adaptive_vs_none_id'])} | {g['tr_adaptive_verdict']} | {d(g['flat_vs_none_id'])} | "
                   f"{g['flat_verdict']} |")
    sh = summary["ship_lora"]
    if sh["ship"] is None:
        so_far = {None: "", True: " (the cells finished so far meet it)",
                  False: " (the cells finished so far do not meet it)"}[sh.get("met_by_finished_cells")]
        out += ["", f"Default weights: {sh['rule']}: **pending** until the study is complete{so_far}."]
    else:
        g = sh["ood_gain_over_scratch"]
        out += ["", f"Default weights: {sh['rule']}. Pretrained + LoRA: ID {100 * sh['id_rate']:.0f} %, OOD gain "
                    f"over scratch {100 * g['diff']:+.0f} points [{100 * g['ci95'][0]:+.0f}, {100 * g['ci95'][1]:+.0f}]: "
                    f"**{'ship it' if sh['ship'] else 'keep the scratch model'}**."]
    if not summary.get("complete", True):
        out = ["**Partial:** some cells have not finished; their claims are pending.", ""] + out
    return "\n".join(out) + "\n"


def plot(summary: dict, path: Path) -> Path:
    """Success per model and schedule (ID and OOD), TR by phase per model, TR against OOD success."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    models, labels = list(summary["models"]), summary["config"]["guidance"]
    fig, ax = plt.subplots(1, 4, figsize=(20, 4.5))
    width = 0.8 / len(labels)
    for a, suite in zip(ax[:2], (ID_SUITE, OOD_SUITE)):
        for j, g in enumerate(labels):
            cs = [summary["cells"][m].get(suite, {}).get(g) for m in models]
            x = np.arange(len(models)) + (j - (len(labels) - 1) / 2) * width
            y = [100 * c["rate"] if c else np.nan for c in cs]
            err = np.array([[100 * (c["rate"] - c["ci95"][0]), 100 * (c["ci95"][1] - c["rate"])] if c else [0, 0]
                            for c in cs]).T
            a.bar(x, y, width, yerr=err, capsize=3, label=g)
        a.set_xticks(range(len(models)), [summary["models"][m]["label"] for m in models], fontsize=8)
        a.set_ylim(0, 100)
        a.set_ylabel("success [%] (95 % interval)")
        a.set_title(f"{suite} ({summary['config']['episodes_per_cell']} episodes per bar)")
    ax[1].legend(fontsize=7, loc="upper right", title="guidance")   # the OOD bars leave that corner free
    for j, ph in enumerate(PHASES):
        for k, suite in enumerate((ID_SUITE, OOD_SUITE)):
            ts = [summary["tr"].get(m, {}).get(suite) for m in models]
            y = [t[ph]["mean"] if t and t.get(ph) else np.nan for t in ts]
            e = [1.96 * t[ph]["se"] if t and t.get(ph) else 0 for t in ts]
            x = np.arange(len(models)) + (2 * j + k - 1.5) * 0.2
            ax[2].bar(x, y, 0.2, yerr=e, capsize=3, label=f"{suite} {ph}")
    ax[2].set_xticks(range(len(models)), [summary["models"][m]["label"] for m in models], fontsize=8)
    ax[2].set_ylabel("TR at sigma_v 0.883")
    ax[2].set_title("TR by expert phase")
    if ax[2].get_legend_handles_labels()[0]:
        ax[2].legend(fontsize=7)
    for m in models:
        t = summary["tr"].get(m)
        c = summary["cells"][m].get(OOD_SUITE, {}).get("none")
        if not t or not c:
            continue
        p = _pooled_tr(t)
        ax[3].errorbar(p["mean"], 100 * c["rate"], xerr=1.96 * p["se"],
                       yerr=[[100 * (c["rate"] - c["ci95"][0])], [100 * (c["ci95"][1] - c["rate"])]],
                       marker="o", capsize=3, label=summary["models"][m]["label"])
    if ax[3].get_legend_handles_labels()[0]:    # no TR study yet: nothing to label
        ax[3].legend(fontsize=7)
    ax[3].set_xlabel("mean TR (goal + goal_ood expert states)")
    ax[3].set_ylabel("goal_ood success, none [%]")
    ax[3].set_title("TR against OOD success across the models")
    return save_figure(fig, path, dpi=90)
