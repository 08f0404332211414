"""Run results as text: the one-line summaries `sim` prints and the markdown tables `eval` writes
(success per suite and per task, failed replans, grasp diagnostics), for every simulator."""
from __future__ import annotations


def errors_line(err: dict) -> str:
    return (f"{err['inference_errors']} failed replans ({err['refused_inputs']} refused inputs), "
            f"{err['error_episodes']}/{err['episodes']} error episodes (no replan succeeded); "
            f"first: {err['first_error']}")


def per_task_counts(eps: list[dict]) -> dict:
    """{suite: {task: {k, n, instruction}}}: successes of each task, for the per-task table."""
    by: dict = {}
    for e in eps:
        c = by.setdefault(e["suite"], {}).setdefault(str(e["task"]), {"k": 0, "n": 0,
                                                                      "instruction": e.get("instruction", "")})
        c["k"] += int(bool(e["success"]))
        c["n"] += 1
    return by


def per_task_table(suites: list[str], schedules: list[str], by_guidance: dict) -> str:
    """Rows: suite and task (with its instruction); columns: schedule; cells: successes k/n."""
    rows = ["| suite | task | instruction | " + " | ".join(schedules) + " |", "|---|---|---|" + "---|" * len(schedules)]
    for s in suites:
        tasks: dict = {}
        for g in schedules:
            for t, c in by_guidance.get(g, {}).get("per_task_counts", {}).get(s, {}).items():
                tasks.setdefault(t, c["instruction"])
        for t in sorted(tasks, key=int):
            cells = []
            for g in schedules:
                c = by_guidance.get(g, {}).get("per_task_counts", {}).get(s, {}).get(t)
                cells.append("-" if c is None else f"{c['k']}/{c['n']}")
            rows.append(f"| {s} | {t} | {tasks[t]} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def per_task_rates(eps: list[dict]) -> dict:
    by: dict = {}
    for e in eps:
        by.setdefault(e["suite"], {}).setdefault(str(e["task"]), []).append(bool(e["success"]))
    return {s: {t: round(sum(v) / len(v), 4) for t, v in d.items()} for s, d in by.items()}


def _closest(r: dict) -> str:
    return "-" if r["closest_xy_cm_median"] is None else f"{r['closest_xy_cm_median']:.1f} cm"


def reach_line(r: dict) -> str:
    return (f"named object grasped in {r['grasped_named']}/{_object_episodes(r)} episodes whose task names one, "
            f"another object in {r['grasped_other']}/{r['episodes']}, median closest approach {_closest(r)}")


def _object_episodes(r: dict) -> int:
    return r.get("object_episodes", r["episodes"])    # results written before drawers and stoves were told apart


def realtime_line(r: dict) -> str:
    hz = "-" if r["achieved_hz_min"] is None else f"{r['achieved_hz_min']:.1f} Hz"
    jit = "-" if r["p99_jitter_ms_max"] is None else f"{r['p99_jitter_ms_max']:.1f} ms"
    return (f"{r['ticks']} ticks over {r['episodes']} episodes: {r['missed_ticks']} missed by the clock, "
            f"{r['held_ticks']} held waiting for a chunk, {r['late_ticks']} run past `execute` (late chunk), "
            f"{r['dropped_chunks']} chunks dropped; slowest episode {hz}, worst p99 jitter {jit}; "
            f"largest seam step <= largest within-chunk step in {r.get('seam_within_episodes', '-')}/{r['episodes']} "
            f"episodes (median ratio {_fmt_ratio(r.get('seam_ratio_median'))})")


def realtime_verdict(r: dict, cpus: int | None, lockstep_hint: str) -> str:
    """Whether this machine kept real time in the run's realtime episodes, in words: every episode did,
    or which did not and why, with the load it ran under and what to run instead (`lockstep_hint`,
    e.g. the command with --executor lockstep). `r`: summarise()'s `realtime`."""
    lo, hi = r.get("load_1min_min"), r.get("load_1min_max")
    load = "" if lo is None else (f"load {lo:.1f}" if abs(hi - lo) < 0.05 else f"load {lo:.1f}-{hi:.1f}")
    load += f" on {cpus} cores" if load and cpus else ""
    bad = r.get("not_kept") or []
    if not bad:
        return (f"this machine kept real time in {r['episodes']} of {r['episodes']} episodes"
                + (f" ({load})" if load else ""))
    first = bad[0]
    where = f"{len(bad)} of {r['episodes']} episodes" + (f", {load}" if load else "")
    if r.get("lockstep_reruns"):
        after = r.get("lockstep_after", 0)
        rest = f" and so were the {after} after it" if after > 1 else " and so was the one after it" if after else ""
        return (f"this machine could not keep real time in {first['episode']} ({first['problem']}"
                f"{'; ' + load if load else ''}): it was "
                f"run again in lockstep{rest} (the simulation waits for each replan, as for every reported result: "
                f"deterministic); for a realtime run use a quieter machine")
    return (f"WARNING: this machine could not keep real time in {where} (first {first['episode']}: "
            f"{first['problem']}): those outcomes measure the machine's load as much as the policy. "
            f"Run {lockstep_hint} for the result that does not depend on the machine, or add --overload lockstep "
            f"to fall back to it by itself")


def _fmt_ratio(v) -> str:
    return "-" if v is None else f"{v:.2f}"


def errors_table(suites: list[str], schedules: list[str], by_guidance: dict) -> str:
    """Rows: suite; columns: schedule; cells: failed replans (refused inputs), error episodes / episodes."""
    def cell(g, s):
        c = by_guidance.get(g, {}).get("errors", {}).get(s)
        if c is None:
            return "-"
        return (f"{c['inference_errors']} failed ({c['refused_inputs']} refused), "
                f"{c['error_episodes']}/{c['episodes']} error episodes")

    rows = ["| suite | " + " | ".join(schedules) + " |", "|---|" + "---|" * len(schedules)]
    rows += [f"| {s} | " + " | ".join(cell(g, s) for g in schedules) + " |" for s in suites]
    return "\n".join(rows)


def reach_table(suites: list[str], schedules: list[str], by_guidance: dict) -> str | None:
    """Rows: suite; columns: schedule; cells: named grasps k/n, other grasps, median closest approach."""
    per = {(g, s): by_guidance.get(g, {}).get("reach", {}).get(s) for g in schedules for s in suites}
    if not any(per.values()):
        return None

    def cell(r):
        return ("-" if r is None else
                f"{r['grasped_named']}/{_object_episodes(r)} named, {r['grasped_other']} other, {_closest(r)}")

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
        if g not in by_guidance:                # interrupted before this schedule ran
            return "-"
        r = by_guidance[g]["success_rate"].get(s)
        if r is None:
            return "-"
        k = by_guidance[g].get("counts", {}).get(s)
        ci = by_guidance[g].get("ci95", {}).get(s)
        err = by_guidance[g].get("errors", {}).get(s)
        return (f"{100 * r:.1f} %" + (f" ({k[0]}/{k[1]})" if k else "")
                + (f" [{100 * ci[0]:.0f}-{100 * ci[1]:.0f}]" if ci else "")
                + (f", {err['error_episodes']} error episodes" if err and err["error_episodes"] else ""))

    for fam in fams:
        rows.append(f"| {fam} | " + " | ".join(f"{cell(g, fam)} | {cell(g, fam + '_ood')}" for g in schedules) + " |")
    return "\n".join(rows)
