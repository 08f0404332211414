"""`vam-stack compare`: two arms' evaluation results, paired episode by episode.

Each arm is one or more results.json files of `vam-stack eval` (or summary.json files of
`vam-stack sim`), pooled; an episode counted twice within an arm is an error. A results.json of
`eval` holds one set of episodes per guidance schedule: `--a-guidance` / `--b-guidance` pick each
arm's (so one file can be both arms), and a file holding several schedules with none picked is
refused naming them. Episodes pair on
(suite, seed, task, repetition): the same initial state under both arms. Printed: each arm's
success with its 95 % Wilson interval, the difference A - B with the unpaired (Newcombe hybrid
score) and the paired (Newcombe method 10) intervals, the discordant counts and McNemar's exact
p, and with `--sign` the verdict the paper study's rule gives.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from vam_stack.outputs import write_json_output

from .study_stats import diff_interval, episode_key, pair_outcomes, paired_diff, verdict


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--a", nargs="+", required=True, metavar="RESULTS", help="arm A: results.json / summary.json files")
    p.add_argument("--b", nargs="+", required=True, metavar="RESULTS", help="arm B: results.json / summary.json files")
    p.add_argument("--a-guidance", metavar="SCHEDULE", help="arm A: only episodes run under this guidance schedule "
                                                              "(an eval results.json holds one set per schedule)")
    p.add_argument("--b-guidance", metavar="SCHEDULE", help="arm B: only episodes of this guidance schedule")
    p.add_argument("--suite", help="only episodes of this suite")
    p.add_argument("--sign", type=int, choices=(-1, 1),
                   help="the claim's direction (+1: A above B, -1: A below B): print the verdict")
    p.add_argument("--json", help="also write the comparison as JSON here ('-' = stdout)")


def _schedule(ep: dict) -> str:
    """The guidance schedule an episode ran under ("expert" for the scripted policy, "-" when unrecorded)."""
    g = ep.get("guidance")
    return "expert" if ep.get("policy") == "expert" and g is None else ("-" if g is None else str(g))


def load_arm(paths: list[str], suite: str | None = None, guidance: str | None = None,
             flag: str = "--a-guidance") -> dict[str, bool]:
    """episode key -> success over every file of one arm (a key seen twice is an error naming both files).
    `guidance`: only that schedule's episodes; without it a file holding several schedules is refused
    naming them and `flag` (its episodes share their keys: the same initial states under each)."""
    out: dict[str, bool] = {}
    seen: dict[str, str] = {}
    found: set[str] = set()
    for path in paths:
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise ValueError(f"{path}: not a readable results file ({e})") from None
        episodes = data.get("episodes") if isinstance(data, dict) else None
        if not isinstance(episodes, list):
            raise ValueError(f"{path}: no 'episodes' list (expected a results.json of eval or a summary.json of sim)")
        schedules = sorted({_schedule(ep) for ep in episodes if isinstance(ep, dict)})
        found.update(schedules)
        if guidance is None and len(schedules) > 1:
            raise ValueError(f"{path} holds episodes of {len(schedules)} guidance schedules ({', '.join(schedules)}): "
                             f"pick one for this arm with {flag} SCHEDULE")
        for ep in episodes:
            missing = [k for k in ("suite", "seed", "task", "episode", "success") if k not in ep]
            if missing:
                raise ValueError(f"{path}: an episode lacks {missing}")
            if suite is not None and ep["suite"] != suite:
                continue
            if guidance is not None and _schedule(ep) != guidance:
                continue
            key = episode_key(ep)
            if key in seen:
                raise ValueError(f"episode {key} appears in {seen[key]} and again in {path}")
            seen[key] = str(path)
            out[key] = bool(ep["success"])
    if not out:
        what = " of suite " + suite if suite else ""
        what += f" under guidance {guidance!r} (the files hold {', '.join(sorted(found))})" if guidance else ""
        raise ValueError(f"no episodes{what} in {', '.join(map(str, paths))}")
    return out


def compare(a: dict[str, bool], b: dict[str, bool], sign: int | None = None) -> dict:
    from vam_sim.episode import wilson_interval

    ka, na, kb, nb = sum(a.values()), len(a), sum(b.values()), len(b)
    d, lo, hi = diff_interval(ka, na, kb, nb)
    xa, xb = pair_outcomes(a, b)
    paired = paired_diff(xa, xb) if xa else None
    res = {"a": {"successes": ka, "episodes": na, "ci95": list(wilson_interval(ka, na))},
           "b": {"successes": kb, "episodes": nb, "ci95": list(wilson_interval(kb, nb))},
           "diff": d, "unpaired_ci95": [lo, hi], "paired": paired}
    if sign is not None:
        ci = paired["ci95"] if paired else [lo, hi]
        v = verdict(*ci, sign)
        if v != "not resolvable at this n" and paired and paired["mcnemar_p"] >= 0.05:
            v = "not resolvable at this n (the paired interval clears 0, McNemar's exact test does not)"
        res["verdict"] = v
    return res


def _source(paths: list[str], guidance: str | None) -> str:
    """How an arm is named in the output: its schedule (when picked) and its files."""
    files = ", ".join(map(str, paths))
    return f"{guidance} in {files}" if guidance else files


def run(args: argparse.Namespace) -> int:
    try:
        a = load_arm(args.a, args.suite, args.a_guidance, "--a-guidance")
        b = load_arm(args.b, args.suite, args.b_guidance, "--b-guidance")
    except ValueError as e:
        print(f"vam-stack compare: error: {e}", file=sys.stderr)
        return 2
    r = compare(a, b, args.sign)

    r["a"]["source"] = _source(args.a, args.a_guidance)
    r["b"]["source"] = _source(args.b, args.b_guidance)

    def arm(name, x):
        return f"{name}: {x['successes']}/{x['episodes']} = {100 * x['successes'] / x['episodes']:.0f} % " \
               f"[{100 * x['ci95'][0]:.0f}-{100 * x['ci95'][1]:.0f}]  ({x['source']})"

    print(arm("A", r["a"]))
    print(arm("B", r["b"]))
    u = r["unpaired_ci95"]
    print(f"A - B: {100 * r['diff']:+.1f} points, [{100 * u[0]:+.1f}, {100 * u[1]:+.1f}] unpaired")
    p = r["paired"]
    if p is None:
        print("no episode ran under both arms: nothing to pair")
    else:
        print(f"paired on {p['pairs']} episodes: {100 * p['diff']:+.1f} points [{100 * p['ci95'][0]:+.1f}, "
              f"{100 * p['ci95'][1]:+.1f}], discordant {p['a_only']} (A only) vs {p['b_only']} (B only), "
              f"McNemar exact p {p['mcnemar_p']:.3g}")
    if "verdict" in r:
        print(f"verdict: {r['verdict']}")
    if args.json:
        write_json_output(args.json, r)
    return 0
