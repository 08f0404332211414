"""Two closed-loop evaluations of the same episodes compared episode by episode.

    python scripts/compare_success.py --a runs/x/eval_a --b runs/x/eval_b --names rec collect --out comparison.json

Prints each arm's success with its Wilson interval and A - B with the paired 95 % interval (Newcombe),
the discordant counts and McNemar's exact p; the verdict is "within noise" when that interval holds 0.
Refuses two summaries whose episodes (index and episode seed) differ.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from vam_experiments.study_stats import paired_diff
from vam_sim.episode import wilson_interval


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--a", required=True, help="evaluation folder of arm A (holds summary.json)")
    p.add_argument("--b", required=True, help="evaluation folder of arm B")
    p.add_argument("--names", nargs=2, default=("A", "B"), help="the two arms' names")
    p.add_argument("--out", required=True, help="comparison JSON to write")
    args = p.parse_args()
    names = list(args.names)
    arms = {n: json.loads((Path(d) / "summary.json").read_text()) for n, d in zip(names, (args.a, args.b))}
    keys = [[(e["episode"], e.get("episode_seed")) for e in s["episodes"]] for s in arms.values()]
    if keys[0] != keys[1]:
        raise SystemExit(f"the two evaluations did not run the same episodes: {keys[0][:3]}... vs {keys[1][:3]}...")
    res = {}
    for n, s in arms.items():
        ok = [bool(e["success"]) for e in s["episodes"]]
        lo, hi = wilson_interval(sum(ok), len(ok))
        res[n] = {"successes": sum(ok), "episodes": len(ok), "ci95": [lo, hi], "outcomes": ok}
        print(f"{n}: {sum(ok)}/{len(ok)} = {100 * sum(ok) / len(ok):.0f} % [{100 * lo:.0f}-{100 * hi:.0f}]")
    d = paired_diff(res[names[0]]["outcomes"], res[names[1]]["outcomes"])
    lo, hi = d["ci95"]
    verdict = "within noise" if lo <= 0 <= hi else (f"{names[0]} better" if lo > 0 else f"{names[0]} worse")
    print(f"{names[0]} - {names[1]}: {100 * d['diff']:+.0f} points [{100 * lo:+.0f}, {100 * hi:+.0f}] paired, "
          f"{d['a_only']} vs {d['b_only']} discordant, McNemar p {d['mcnemar_p']:.2f}: {verdict}")
    Path(args.out).write_text(json.dumps({"arms": res, "paired": d, "verdict": verdict}, indent=2))


if __name__ == "__main__":
    main()
