"""Closed-loop cells run on several reporting seeds, pooled per cell and compared episode by episode.

    python scripts/pool_cells.py --runs runs/rtc_trained runs/rtc_trained_s1 \
        --cells shipped_d0 new_d0 --pairs new_d0:shipped_d0 --out docs/data/rtc_trained/cells.json

Each run folder holds one `sim` output folder per cell (its summary.json). A cell's episodes are pooled
over the runs; a pair is compared on the episodes both arms ran (matched by suite, task, episode and
seed), with Newcombe's paired interval and McNemar's exact p (vam_experiments.study_stats). Prints a
Markdown table of the cells and one of the pairs; writes both, with every outcome, to --out.
`--prior FILE:CELL=NAME` adds the per-episode outcomes of CELL in an earlier --out (a cell run in an earlier
session) to cell NAME; the output lists every prior it used.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from vam_experiments.study_stats import episode_key, paired_diff
from vam_sim.episode import wilson_interval


def load_cell(runs: list[Path], cell: str) -> dict[str, bool]:
    """episode key -> success, over every run that has the cell (SystemExit naming a missing one)."""
    out: dict[str, bool] = {}
    for run in runs:
        f = run / cell / "summary.json"
        if not f.is_file():
            raise SystemExit(f"no {f}: run the cell first")
        s = json.loads(f.read_text())
        if not s.get("complete"):
            raise SystemExit(f"{f} is not complete (an interrupted or running cell)")
        out.update({episode_key(e): bool(e["success"]) for e in s["episodes"]})
    return out


def load_prior(spec: str) -> tuple[str, dict[str, bool]]:
    """`FILE:CELL=NAME` -> (NAME, CELL's outcomes in FILE, an earlier --out of this script)."""
    try:
        path, rest = spec.rsplit(":", 1)
        cell, name = rest.split("=")
    except ValueError:
        raise SystemExit(f"--prior takes FILE:CELL=NAME, got {spec!r}") from None
    cells = json.loads(Path(path).read_text())["cells"]
    if cell not in cells:
        raise SystemExit(f"{path} has no cell {cell!r} (it has {sorted(cells)})")
    return name, {k: bool(v) for k, v in cells[cell]["outcomes"].items()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", nargs="+", type=Path, required=True, help="run folders, one per reporting seed")
    p.add_argument("--cells", nargs="+", required=True, help="cell folder names to pool")
    p.add_argument("--pairs", nargs="*", default=[], help="A:B cell pairs to compare (A - B)")
    p.add_argument("--prior", nargs="*", default=[], metavar="FILE:CELL=NAME",
                   help="outcomes of CELL in an earlier --out FILE, added to cell NAME")
    p.add_argument("--out", type=Path, required=True, help="JSON to write")
    args = p.parse_args()
    priors = [load_prior(spec) for spec in args.prior]
    prior_names = {n for n, _ in priors}
    cells = {}
    for c in args.cells:   # every run folder has the cell, unless a prior stands in for the folders without it
        runs = [r for r in args.runs if (r / c).is_dir()] if c in prior_names else args.runs
        cells[c] = load_cell(runs, c) if runs else {}
    for name, outcomes in priors:
        if name not in cells:
            raise SystemExit(f"--prior names cell {name!r}, not in --cells")
        twice = set(cells[name]) & set(outcomes)
        if twice:
            raise SystemExit(f"{name}: episode {sorted(twice)[0]} is both in a run folder and in a prior")
        cells[name].update(outcomes)
    res = {"runs": [str(r) for r in args.runs], "priors": args.prior, "cells": {}, "pairs": {}}
    print("| cell | success |\n|---|---|")
    for c, outcomes in cells.items():
        k, n = sum(outcomes.values()), len(outcomes)
        lo, hi = wilson_interval(k, n)
        res["cells"][c] = {"successes": k, "episodes": n, "ci95": [lo, hi], "outcomes": outcomes}
        print(f"| {c} | {k}/{n} = {100 * k / n:.0f} % [{100 * lo:.0f}-{100 * hi:.0f}] |")
    print("\n| comparison | difference | discordant | p |\n|---|---|---|---|")
    for pair in args.pairs:
        a, b = pair.split(":")
        if a not in cells or b not in cells:
            raise SystemExit(f"pair {pair!r} names a cell not in --cells")
        keys = sorted(set(cells[a]) & set(cells[b]))
        if not keys:
            raise SystemExit(f"{a} and {b} share no episode")
        d = paired_diff([cells[a][k] for k in keys], [cells[b][k] for k in keys])
        res["pairs"][pair] = d | {"episodes": len(keys)}
        lo, hi = d["ci95"]
        print(f"| {a} − {b} (n {len(keys)}) | {100 * d['diff']:+.0f} [{100 * lo:+.0f}, {100 * hi:+.0f}] | "
              f"{d['a_only']} vs {d['b_only']} | {d['mcnemar_p']:.2f} |")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
