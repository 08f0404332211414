"""The paper study's statistics: Newcombe intervals of rate differences (unpaired, and paired on
episodes that share their initial state), McNemar's exact test, verdicts, pooled evaluation
cells and TR by phase (vam_experiments.paper_study runs the study)."""
from __future__ import annotations

import json
import math
from pathlib import Path

ID_SUITE, OOD_SUITE = "goal", "goal_ood"
PHASES = ("planning", "manipulation")


def diff_interval(k1: int, n1: int, k2: int, n2: int) -> tuple[float, float, float]:
    """p1 - p2 and its 95 % interval (Newcombe's hybrid score method, from the Wilson intervals)."""
    from vam_sim.episode import wilson_interval

    p1, p2 = k1 / n1, k2 / n2
    l1, u1 = wilson_interval(k1, n1)
    l2, u2 = wilson_interval(k2, n2)
    d = p1 - p2
    return d, d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2), d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)


def paired_diff(a: list[bool], b: list[bool]) -> dict:
    """Arm A minus arm B on the same episodes (a[i], b[i]: the two outcomes of episode i).

    The interval is Newcombe's (1998) method 10: the Wilson intervals of both rates joined with
    the phi correlation of the 2x2 table (phi's numerator continuity-corrected when positive), so
    agreeing episodes narrow it. McNemar's exact two-sided p-value comes from the discordant
    episodes alone: b10 (A succeeded, B failed) against b01."""
    from vam_sim.episode import wilson_interval

    if len(a) != len(b) or not a:
        raise ValueError(f"need two equally long, non-empty outcome lists, got {len(a)} and {len(b)}")
    n = len(a)
    both = sum(x and y for x, y in zip(a, b))
    b10 = sum(x and not y for x, y in zip(a, b))
    b01 = sum(y and not x for x, y in zip(a, b))
    neither = n - both - b10 - b01
    p1, p2 = (both + b10) / n, (both + b01) / n
    l1, u1 = wilson_interval(both + b10, n)
    l2, u2 = wilson_interval(both + b01, n)
    den = (both + b10) * (b01 + neither) * (both + b01) * (b10 + neither)
    num = both * neither - b10 * b01
    num = max(num - n / 2, 0.0) if num > 0 else num
    phi = num / math.sqrt(den) if den > 0 else 0.0
    d = p1 - p2
    lo = d - math.sqrt(max((p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2, 0.0))
    hi = d + math.sqrt(max((u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2, 0.0))
    m = b10 + b01
    tail = sum(math.comb(m, k) for k in range(0, min(b10, b01) + 1)) / 2 ** m if m else 1.0
    return {"diff": d, "ci95": [max(lo, -1.0), min(hi, 1.0)], "pairs": n, "a_only": b10, "b_only": b01,
            "mcnemar_p": min(1.0, 2 * tail)}


def episode_key(ep: dict) -> str:
    """What makes two episodes the same episode under two arms: suite, seed, task, repetition."""
    return f"{ep['suite']}/{ep['seed']}/{ep['task']}/{ep['episode']}"


def pair_outcomes(a: dict[str, bool], b: dict[str, bool]) -> tuple[list[bool], list[bool]]:
    """The outcomes of the episodes both arms ran, in one order."""
    keys = sorted(set(a) & set(b))
    return [a[k] for k in keys], [b[k] for k in keys]


def verdict(lo: float, hi: float, sign: int) -> str:
    """'confirmed' if [lo, hi] lies on the claimed side of 0 (sign +1: above, -1: below), 'refuted'
    if it lies on the other side, else 'not resolvable at this n'."""
    if (sign > 0 and lo > 0) or (sign < 0 and hi < 0):
        return "confirmed"
    if (sign > 0 and hi < 0) or (sign < 0 and lo > 0):
        return "refuted"
    return "not resolvable at this n"


def pool(paths: list[Path]) -> dict[tuple[str, str], list[dict]]:
    """(guidance, suite) -> episodes of every results.json in `paths`; an episode counted twice is an error."""
    pooled: dict[tuple[str, str], list[dict]] = {}
    seen: dict[tuple, Path] = {}
    for path in paths:
        for ep in json.loads(Path(path).read_text())["episodes"]:
            key = (ep["guidance"], ep["suite"], ep["seed"], ep["task"], ep["episode"])
            if key in seen:
                raise ValueError(f"{path}: episode {key} is already counted from {seen[key]}")
            seen[key] = Path(path)
            pooled.setdefault(key[:2], []).append(ep)
    return pooled


def cell_stats(eps: list[dict]) -> dict:
    """Success with its interval, how often s_i > 0, and the in-loop TR of one cell."""
    from vam_sim.episode import wilson_interval

    k, n = sum(bool(e["success"]) for e in eps), len(eps)
    lo, hi = wilson_interval(k, n)
    tr = [e["tr_summary"] for e in eps if e.get("tr_summary")]
    replans = sum(t["replans"] for t in tr)
    guided = sum(t["guided_replans"] for t in tr)

    def mean(key):
        vals = [t[key] for t in tr if t.get(key) is not None and math.isfinite(t[key])]
        return sum(vals) / len(vals) if vals else None

    return {"successes": k, "episodes": n, "rate": k / n, "ci95": [lo, hi], "replans": replans,
            "outcomes": {episode_key(e): bool(e["success"]) for e in eps},   # for paired comparisons
            "replans_s_positive": guided, "s_positive_fraction": guided / replans if replans else None,
            "episodes_s_positive": sum(t["guided_replans"] > 0 for t in tr),
            "tr_mean": mean("tr_mean"), "tr_mean_planning": mean("tr_mean_planning"),
            "tr_mean_manipulation": mean("tr_mean_manipulation")}


def tr_stats(study_json: Path) -> dict:
    """Mean TR (with its standard error) at the inference feature level, overall and by phase."""
    data = json.loads(Path(study_json).read_text())
    rows = [r for r in data["rows"] if r["index"] == data["default_index"]]

    def stat(vals):
        if not vals:
            return None
        m = sum(vals) / len(vals)
        var = sum((v - m) ** 2 for v in vals) / (len(vals) - 1) if len(vals) > 1 else float("nan")
        return {"mean": m, "se": math.sqrt(var / len(vals)), "n": len(vals)}

    return {"all": stat([r["tr"] for r in rows]),
            **{ph: stat([r["tr"] for r in rows if r["phase"] == ph]) for ph in PHASES}}
