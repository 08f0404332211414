"""Real-LIBERO results as tables and one figure: the scripted expert's success per task (a collected
dataset's `meta/info.json` `expert`, written by `vam-stack collect --robot libero-real`) and a
policy's success per task and per suite (`vam-stack sim --robot libero-real` summary.json files),
each rate beside its n and Wilson 95 % interval. docs/libero_real.md is made with it:

    python -m vam_sim.libero_real.report --dataset runs/demos_libero_real \\
        --eval "libero64 real, none=runs/eval_spatial/summary.json,runs/eval_goal/summary.json" \\
        --png docs/libero_real.png

An unfinished evaluation (summary.json `complete: false`) is reported with the episodes it has and
marked as such; a summary that is not a real-LIBERO run is refused with its path.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from vam_sim.episode import wilson_interval

SUITES = ("spatial", "goal")


class ReportError(ValueError):
    """An input this report cannot read (names the file and what is wrong)."""


def _pct(k: int, n: int) -> str:
    if n == 0:
        return "-"
    lo, hi = wilson_interval(k, n)
    return f"{100 * k / n:.0f} % [{100 * lo:.0f}, {100 * hi:.0f}]"


def expert_rows(dataset: str | Path) -> list[dict]:
    """Per task of the collection: suite, task, n (valid attempts), successes, broken scenes, mean steps."""
    path = Path(dataset) / "meta" / "info.json"
    try:
        stats = json.loads(path.read_text())["expert"]
    except (OSError, ValueError, KeyError) as e:
        raise ReportError(f"report: {path} holds no expert statistics (a real-LIBERO collection's info.json): {e}")
    rows = []
    for key, s in stats.items():
        suite, task = key.split("/")
        rows.append({"suite": suite, "task": int(task), "n": int(s["valid"]), "k": int(s["success"]),
                     "broken": int(s["broken_scenes"]), "steps": s["mean_steps"]})
    return sorted(rows, key=lambda r: (SUITES.index(r["suite"]) if r["suite"] in SUITES else 9, r["task"]))


def eval_episodes(paths: list[str | Path]) -> tuple[list[dict], list[str]]:
    """The episodes of real-LIBERO summaries and notes on them (unfinished runs, their guidance)."""
    episodes, notes = [], []
    for p in paths:
        try:
            s = json.loads(Path(p).read_text())
        except (OSError, ValueError) as e:
            raise ReportError(f"report: cannot read the summary {p}: {e}")
        eps = s.get("episodes")
        if not isinstance(eps, list) or any(e.get("backend") != "real_libero" for e in eps):
            raise ReportError(f"report: {p} is not a real-LIBERO evaluation (episodes with backend real_libero)")
        if not s.get("complete", False):
            notes.append(f"{p}: unfinished, {len(eps)} of {s['config'].get('episodes')} episodes")
        episodes += eps
    return episodes, notes


def eval_table(episodes: list[dict]) -> dict:
    """{(suite, task): [k, n, instruction, init states]} and {suite: [k, n]}."""
    per_task, per_suite = {}, {}
    for e in episodes:
        key = (e["suite"], int(e["task"]))
        row = per_task.setdefault(key, [0, 0, e["instruction"], []])
        row[0] += bool(e["success"])
        row[1] += 1
        row[3].append(int(e["init_state"]))
        s = per_suite.setdefault(e["suite"], [0, 0])
        s[0] += bool(e["success"])
        s[1] += 1
    return {"task": per_task, "suite": per_suite}


def markdown(expert: list[dict] | None, evals: dict[str, list[dict]]) -> str:
    """The expert's table, then per task and per suite one column per labelled evaluation."""
    out = []
    if expert:
        out += ["| task | expert success (n, 95 % interval) | broken scenes | mean steps |", "|---|---|---|---|"]
        out += [f"| {r['suite']}/{r['task']} | {r['k']}/{r['n']}: {_pct(r['k'], r['n'])} | {r['broken']} | "
                f"{r['steps'] if r['steps'] is not None else '-'} |" for r in expert]
        out.append("")
    if evals:
        tables = {label: eval_table(eps) for label, eps in evals.items()}
        keys = sorted({k for t in tables.values() for k in t["task"]},
                      key=lambda k: (SUITES.index(k[0]) if k[0] in SUITES else 9, k[1]))
        labels = list(tables)
        out += ["| task | instruction | " + " | ".join(labels) + " |", "|---|---|" + "---|" * len(labels)]
        for k in keys:
            instr = next(t["task"][k][2] for t in tables.values() if k in t["task"])
            cells = [f"{t['task'][k][0]}/{t['task'][k][1]}: {_pct(*t['task'][k][:2])}" if k in t["task"] else "-"
                     for t in tables.values()]
            out.append(f"| {k[0]}/{k[1]} | {instr} | " + " | ".join(cells) + " |")
        for suite in SUITES:
            cells = [f"**{t['suite'][suite][0]}/{t['suite'][suite][1]}: {_pct(*t['suite'][suite])}**"
                     if suite in t["suite"] else "-" for t in tables.values()]
            if any(c != "-" for c in cells):
                out.append(f"| **{suite}** | all tasks | " + " | ".join(cells) + " |")
        out.append("")
    return "\n".join(out)


def figure(expert: list[dict] | None, evals: dict[str, list[dict]], png: str | Path,
           anchors: dict[str, dict[str, float]] | None = None) -> None:
    """Per task, the expert's and each evaluation's success with 95 % whiskers; one panel a suite,
    reference lines for `anchors` ({label: {suite: percent}})."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = {}
    if expert:
        series["scripted expert (demonstrations)"] = {(r["suite"], r["task"]): (r["k"], r["n"]) for r in expert}
    for label, eps in evals.items():
        series[label] = {k: (v[0], v[1]) for k, v in eval_table(eps)["task"].items()}
    fig, axes = plt.subplots(1, len(SUITES), figsize=(12, 3.8), sharey=True)
    width = 0.8 / max(len(series), 1)
    for ax, suite in zip(axes, SUITES):
        for i, (label, data) in enumerate(series.items()):
            xs, ys, lo, hi = [], [], [], []
            for task in range(10):
                if (suite, task) not in data or data[(suite, task)][1] == 0:
                    continue
                k, n = data[(suite, task)]
                a, b = wilson_interval(k, n)
                xs.append(task - 0.4 + width * (i + 0.5))
                ys.append(100 * k / n)
                lo.append(100 * (k / n - a))
                hi.append(100 * (b - k / n))
            ax.bar(xs, ys, width, yerr=[lo, hi], capsize=2, label=label)
        if expert:                                     # tasks the expert shipped no demonstrations for
            for task in range(10):
                if (suite, task) not in series["scripted expert (demonstrations)"]:
                    ax.text(task, 50, "no expert\ndemos", ha="center", fontsize=7, color="0.4")
        for j, (name, by_suite) in enumerate((anchors or {}).items()):
            if suite in by_suite:
                ax.axhline(by_suite[suite], ls="--", lw=1, color=f"C{len(series) + j}", label=name)
        ax.set_title(f"LIBERO-{suite}")
        ax.set_xticks(range(10))
        ax.set_xlabel("task")
        ax.set_ylim(0, 105)
    axes[0].set_ylabel("success %  (95 % interval)")
    handles, labels = axes[-1].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize=8, loc="lower center", ncol=4)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    fig.savefig(png, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m vam_sim.libero_real.report", description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", help="a real-LIBERO collection (its meta/info.json expert statistics)")
    p.add_argument("--eval", action="append", default=[], metavar="LABEL=SUMMARY[,SUMMARY...]",
                   help="a labelled evaluation: real-LIBERO summary.json files (repeatable)")
    p.add_argument("--anchor", action="append", default=[], metavar="LABEL=SUITE:PCT[,SUITE:PCT]",
                   help="a published figure drawn as a line (e.g. 'Diffusion Policy, 50 human demos=spatial:78.3,"
                        "goal:68.3')")
    p.add_argument("--png", help="write the figure here")
    args = p.parse_args(argv)
    try:
        expert = expert_rows(args.dataset) if args.dataset else None
        evals, notes = {}, []
        for spec in args.eval:
            label, sep, files = spec.rpartition("=")
            if not sep or not label or not files:
                raise ReportError(f"report: --eval {spec!r}: expected LABEL=SUMMARY[,SUMMARY...]")
            evals[label], n = eval_episodes(files.split(","))
            notes += n
        anchors = {}
        for spec in args.anchor:
            label, sep, vals = spec.rpartition("=")
            try:
                anchors[label] = {s: float(v) for s, v in (x.split(":") for x in vals.split(","))}
            except ValueError:
                raise ReportError(f"report: --anchor {spec!r}: expected LABEL=SUITE:PCT[,SUITE:PCT]") from None
    except ReportError as e:
        print(e, file=sys.stderr)
        return 2
    print(markdown(expert, evals))
    for n in notes:
        print(f"note: {n}")
    if args.png:
        figure(expert, evals, args.png, anchors)
        print(f"figure: {args.png}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
