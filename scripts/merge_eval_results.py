"""Merge `vam-stack eval` results.json files run on separate seeds (or schedules) into one table.

    .venv/bin/python scripts/merge_eval_results.py OUT.json A/results.json B/results.json ...

Episodes are pooled per (schedule, suite); a (schedule, suite, seed, task, episode) seen twice is
an error (the same episode counted twice would shrink the interval). Prints a markdown table with
k/n, the 95 % Wilson interval and the grasp diagnostics, and writes the pooled counts to OUT.json.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from vam_sim.libero_mock.reach import reach_stats
from vam_sim.episode import success_intervals


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__)
        return 2
    out, inputs = Path(argv[0]), [Path(a) for a in argv[1:]]
    pooled: dict[tuple[str, str], list[dict]] = {}
    seen: set = set()
    for path in inputs:
        data = json.loads(path.read_text())
        for ep in data["episodes"]:
            g = ep.get("guidance") or ep.get("policy")
            key = (g, ep["suite"], ep["seed"], ep["task"], ep["episode"])
            if key in seen:
                raise SystemExit(f"{path}: episode {key} already counted from an earlier file")
            seen.add(key)
            pooled.setdefault((g, ep["suite"]), []).append(ep)
    rows, table = {}, ["| schedule | suite | seeds | success [95 %] | named object grasped | another object grasped |",
                       "|---|---|---|---|---|---|"]
    for (g, suite), eps in sorted(pooled.items()):
        k, n = sum(bool(e["success"]) for e in eps), len(eps)
        lo, hi = success_intervals(eps)[suite]
        reach = reach_stats(eps) or {}
        seeds = sorted({e["seed"] for e in eps})
        rows[f"{g}/{suite}"] = {"successes": k, "episodes": n, "ci95": [lo, hi], "seeds": seeds, "reach": reach}
        table.append(f"| {g} | {suite} | {','.join(map(str, seeds))} | {100 * k / n:.0f} % ({k}/{n}) "
                     f"[{100 * lo:.0f}-{100 * hi:.0f}] | {reach.get('grasped_named', '-')}/{n} | "
                     f"{reach.get('grasped_other', '-')}/{n} |")
    out.write_text(json.dumps({"inputs": [str(p) for p in inputs], "cells": rows}, indent=2) + "\n")
    print("\n".join(table))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
