"""`vam-stack record`: demonstrations of the simulated YAM recorded through the ROS graph into MCAP
(a command: it runs the simulator, the recorder node and the import's checks together).

    vam-stack record --task handover --episodes 40 --seed 100 --out runs/recordings_handover

Each episode starts record.launch.py's processes (`vam_stack.process_graph`, on a ROS domain of
its own): yam_mujoco_sim with the episode's scene (the `vam-stack collect --robot yam-mujoco`
scene of the same episode and seed id) and the scripted expert as teleoperator, and the
demo_recorder. It calls /demo_recorder/start, then /yam_mujoco_sim/start_teleop, waits until the
world reports the task solved (or the expert's plan ran out, or the task's time limit passed),
records `--tail-s` more and calls /demo_recorder/stop; a failed episode is discarded
(/demo_recorder/discard) unless `--keep-failures`. Then every process is stopped with SIGINT and
must exit 0. Each try's recording is its own file, `<task>_<try>.mcap`. A solved demonstration is
never thrown away: one that `import --format mcap --preset yam64` would refuse with its timing
tolerances (`--max-gap-ticks`, `--max-age-s`, `--rate-tolerance`: the import's flags, its defaults
unless given here) is kept aside in `<out>/refused/` (where `import OUT` does not look), its problem
and the import flags that take it said; it does not count toward `--episodes`. Tries go on in
order until `--episodes` importable ones were kept, or `--max-tries` (default twice `--episodes`).
A loaded machine records pauses (the world runs on the host's clock while the
teleoperator's tick waits for a CPU) that the import's defaults refuse: such a try is kept aside,
and the closing lines print the import line that takes them. `--joint-noise`, `--noise-every` and `--noise-where` perturb the
teleoperator's executed arm targets exactly as `collect`'s options of the same names do (the
recorded raw command stays clean). `<out>/episodes.json` lists every try (file, scene seed, noise,
solved, ticks, message counts); the recordings import with `vam-stack import --format mcap OUT
--preset yam64 --task TASK`, as the closing lines print it.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import yaml

from vam_stack.names import NOISE_WHERE_FLAGS, YAM_TASKS
from vam_stack.outputs import claim_out_dir, write_json_atomic

from vam_data.contract import ContractError, contract_for
from vam_data.mcap_import import McapMapping, RecordingFormatError, read_episode

from .data_import import add_tolerance_arguments, mapping_with_tolerances


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--task", default="handover", choices=YAM_TASKS)
    p.add_argument("--episodes", type=int, default=10, help="successful demonstrations to keep")
    p.add_argument("--seed", type=int, default=100, help="seed id of the scenes (evaluation uses 0)")
    p.add_argument("--tail-s", type=float, default=0.5, help="seconds recorded after the task is solved")
    p.add_argument("--max-tries", type=int, default=None, metavar="N",
                   help="stop after N tries even if fewer than --episodes were kept (default 2 x --episodes)")
    p.add_argument("--keep-failures", action="store_true", help="keep episodes the expert failed")
    p.add_argument("--joint-noise", type=float, default=0.0,
                   help="std [rad] of the smooth perturbation of the teleoperator's executed arm targets (the "
                        "recorded raw command stays clean), as collect's; 0 = none")
    p.add_argument("--noise-every", type=int, default=2, help="perturb every n-th try (1 = all), as collect's")
    p.add_argument("--noise-where", default="everywhere", choices=NOISE_WHERE_FLAGS,
                   help="free-space: the perturbation fades out while the phase is manipulation, as collect's")
    add_tolerance_arguments(p, "the import check of each kept try, as `import`'s: ")
    p.add_argument("--out", default="runs/recordings", help="folder of the MCAP episodes")
    p.add_argument("--overwrite", action="store_true", help="write into a non-empty --out")


def _world(probe) -> dict:
    with probe.lock:
        world = dict(probe.status.get("yam_mujoco_sim: world", {}).get("values", {}))
        tele = dict(probe.status.get("yam_mujoco_sim: teleop", {}).get("values", {}))
    return {"solved": world.get("task_solved") == "true", "done": tele.get("done") == "true",
            "ticks": int(float(tele.get("ticks", 0) or 0)), "started": tele.get("started") == "true"}


def record_episode(args, index: int, out: Path) -> dict:
    from vam_stack.probe import Probe
    from vam_sim.yam_mujoco.runner import episode_seed
    from vam_sim.yam_mujoco.tasks import TASKS
    from vam_stack.paths import config_dir
    from vam_stack.process_graph import ProcessGraph

    from vam_data.node import trigger                  # rclpy: loaded when a graph runs

    ep_seed = int(episode_seed(args.task, index, args.seed))
    logs = out / "logs" / f"try_{index:03d}"
    logs.mkdir(parents=True, exist_ok=True)
    params = yaml.safe_load((config_dir() / "vam_stack.params.yaml").read_text())
    params["demo_recorder"] = {"ros__parameters": {"prefix": f"{args.task}"}}
    noise = args.joint_noise if args.joint_noise > 0 and index % args.noise_every == args.noise_every - 1 else 0.0
    params["yam_mujoco_sim"] = {"ros__parameters": {"teleop_noise": noise,
                                                    "teleop_noise_where": args.noise_where.replace("-", "_")}}
    (logs / "params.yaml").write_text(yaml.safe_dump(params))
    graph = ProcessGraph("record", {"sim_task": args.task, "seed": str(ep_seed), "teleop": "expert",
                                    "out_dir": str(out), "params_file": str(logs / "params.yaml")}, log_dir=logs)
    max_ticks = TASKS[args.task].max_steps
    limit_s = 4 * max_ticks / 30.0        # wall-clock cap: a loaded host runs the world slower than real time
    result = {"try": index, "episode_seed": ep_seed, "joint_noise": noise, "solved": False, "file": None}
    with graph, Probe() as probe:
        ok, path = trigger(probe, "/demo_recorder/start", 120)
        if not ok:
            raise RuntimeError(f"try {index}: /demo_recorder/start refused: {path}")
        end = time.monotonic() + 120
        while True:                       # the world accepts once the driver's /joint_states reached it
            ok, msg = trigger(probe, "/yam_mujoco_sim/start_teleop", 120)
            if ok:
                break
            if time.monotonic() > end or graph.exited():
                trigger(probe, "/demo_recorder/discard", 30)
                raise RuntimeError(f"try {index}: the world refused ~/start_teleop ({msg}); exited "
                                   f"{graph.exited()}; logs in {logs}")
            time.sleep(0.2)
        t0 = time.monotonic()
        while time.monotonic() - t0 < limit_s and not graph.exited():
            w = _world(probe)
            if w["solved"] or w["done"] or w["ticks"] >= max_ticks:   # the task's limit, in control ticks
                break
            time.sleep(0.05)
        time.sleep(args.tail_s)
        w = _world(probe)
        result.update(solved=w["solved"], ticks=w["ticks"], seconds=round(time.monotonic() - t0, 2))
        if w["solved"] or args.keep_failures:
            ok, msg = trigger(probe, "/demo_recorder/stop", 30)
            result.update(file=Path(path).name, recorder=msg)
        else:
            trigger(probe, "/demo_recorder/discard", 30)
        result["exit_codes"] = graph.stop()
    if result["file"]:                     # each try its own file: <task>_<try>.mcap
        mine = f"{args.task}_{index:03d}.mcap"
        if result["file"] != mine and not (out / mine).exists():
            (out / result["file"]).rename(out / mine)
            result["recorder"] = str(result.get("recorder", "")).replace(result["file"], mine)
            result["file"] = mine
    return result


def import_refusal(path: Path, mapping: McapMapping | None = None) -> str | None:
    """What `vam-stack import --format mcap --preset yam64` would refuse in this recording (its
    checks, with `mapping`: the default one unless the tolerances were given), or None. A loaded
    machine can record a pause or a slow rate that the import then refuses; record checks each
    kept episode the same way."""
    try:
        read_episode(path, contract_for("yam64"), mapping or McapMapping())
    except (ContractError, RecordingFormatError) as e:
        return str(e)
    return None


def _import_gate(out: Path, r: dict, mapping: McapMapping | None = None) -> None:
    """A kept episode the import would refuse is kept aside in `<out>/refused/` (where `import OUT`
    does not look), under its own try's name, and not counted; the try says why."""
    if not r.get("file"):
        return
    reason = import_refusal(out / r["file"], mapping)
    if reason is None:
        return
    (out / "refused").mkdir(exist_ok=True)
    dest = out / "refused" / r["file"]
    if dest.exists():                      # never over an earlier try's file
        dest = out / "refused" / f"{Path(r['file']).stem}_try{r['try']:03d}.mcap"
    (out / r["file"]).rename(dest)
    r.update(file=None, refused=str(dest.relative_to(out)), import_refusal=reason)


def _fate(r: dict) -> str:
    """What happened to a try's recording, in words."""
    if r.get("file"):
        return f"kept {r['file']}" + ("" if r["solved"] else " (--keep-failures)")
    if r.get("refused"):
        why = r["import_refusal"].split(": ", 1)[-1]
        return f"kept aside as {r['refused']}: the import's checks refuse it ({why})"
    return "discarded"


def _totals(tries: list[dict], out: Path) -> str:
    """The closing count of what the tries did."""
    n = len(tries)
    solved = [t for t in tries if t["solved"]]
    kept = [t for t in tries if t.get("file")]
    aside_solved = [t for t in solved if t.get("refused")]
    aside_failed = [t for t in tries if not t["solved"] and t.get("refused")]
    parts = [f"{n} tries: {len(solved)} solved, {n - len(solved)} not solved",
             f"{len(kept)} importable kept in {out}" + (f" ({sum(not t['solved'] for t in kept)} of them not solved, "
                                                        f"--keep-failures)" if any(not t['solved'] for t in kept)
                                                        else "")]
    if aside_solved:
        parts.append(f"{len(aside_solved)} solved but kept aside in {out / 'refused'} (the import's checks refuse them)")
    if aside_failed:
        parts.append(f"{len(aside_failed)} not solved, kept (--keep-failures) and aside in {out / 'refused'}")
    dropped = sum(1 for t in tries if not t["solved"] and not t.get("file") and not t.get("refused"))
    if dropped:
        parts.append(f"{dropped} not solved and discarded")
    return "; ".join(parts)


def _aside_advice(tries: list[dict], out: Path, args) -> str | None:
    """The import line that takes the demonstrations kept aside (the loosest tolerances their refusals need)."""
    from vam_data.mcap_import import TOLERANCE_FLAGS

    aside = [t for t in tries if t.get("refused")]
    if not aside:
        return None
    need: dict[str, float] = {}
    untakeable = 0
    for t in aside:
        pairs = _flags_in(t["import_refusal"])
        untakeable += not pairs
        for flag, value in pairs:
            need[flag] = max(need.get(flag, 0.0), value)
    if not need:
        return (f"the recordings in {out / 'refused'} fail a check no tolerance loosens (each try's reason is in "
                f"{out / 'episodes.json'})")
    flags = " ".join(f"{f} {v:g}" for f, v in need.items() if f in TOLERANCE_FLAGS.values())
    skip = " --skip-bad" if untakeable else ""      # (those no tolerance takes are left out, named)
    return (f"to train on them too: vam-stack import --format mcap {out / 'refused'} --preset yam64 --task "
            f"{args.task} {flags}{skip} --out {out}_refused_demos")


def _flags_in(text: str) -> list[tuple[str, float]]:
    """The (flag, value) pairs a refusal names after "the import takes it with"."""
    if "the import takes it with " not in text:
        return []
    words = text.split("the import takes it with ", 1)[1].split()
    out = []
    for flag, value in zip(words[::2], words[1::2]):
        try:
            out.append((flag, float(value.rstrip(").;,"))))
        except ValueError:
            break
    return out


def run(args: argparse.Namespace) -> int:
    from vam_sim.episode import wilson_interval
    from vam_stack.process_graph import isolate_ros

    if args.episodes < 1:
        raise ValueError(f"--episodes must be >= 1, got {args.episodes!r}")
    if not 0.0 <= args.tail_s <= 10.0:
        raise ValueError(f"--tail-s must be in [0, 10] s, got {args.tail_s!r}")
    if not 0.0 <= args.joint_noise <= 0.2:
        raise ValueError(f"--joint-noise must be in [0, 0.2] rad, got {args.joint_noise!r}")
    if args.noise_every < 1:
        raise ValueError(f"--noise-every must be >= 1, got {args.noise_every!r}")
    max_tries = 2 * args.episodes if args.max_tries is None else args.max_tries
    if max_tries < args.episodes:
        raise ValueError(f"--max-tries must be >= --episodes ({args.episodes}), got {args.max_tries!r}")
    mapping = mapping_with_tolerances(McapMapping(), args)       # a bad tolerance refused before anything starts
    out = Path(args.out)
    claim_out_dir(out, args.overwrite)
    domain = isolate_ros()
    tries, kept = [], 0
    while kept < args.episodes and len(tries) < max_tries:
        r = record_episode(args, len(tries), out)
        _import_gate(out, r, mapping)
        tries.append(r)
        kept += r["file"] is not None
        k, n = sum(t["solved"] for t in tries), len(tries)
        lo, hi = wilson_interval(k, n)
        codes = r["exit_codes"]
        exits = ("every process exited 0" if all(c == 0 for c in codes.values()) else
                 "exit codes " + ", ".join(f"{p} {c}" for p, c in codes.items()))
        print(f"try {r['try']} (scene seed {r['episode_seed']}): {'solved' if r['solved'] else 'NOT solved'} after "
              f"{r['seconds']:.1f} s, {r['ticks']} teleop ticks; {_fate(r)}; {exits}  [kept {kept}/{args.episodes}; "
              f"expert solved {k}/{n} (95 % interval {100 * lo:.0f}-{100 * hi:.0f} %)]", flush=True)
        write_json_atomic(out / "episodes.json", {"task": args.task, "seed": args.seed, "ros_domain_id": domain,
                                                  "kept": kept, "tries": tries})
    bad = [t["try"] for t in tries if any(c != 0 for c in t["exit_codes"].values())]
    if bad:
        print(f"tries {bad}: a process did not exit 0 (logs under {out}/logs)")
    print(_totals(tries, out))
    advice = _aside_advice(tries, out, args)
    if kept:
        print(f"import with: vam-stack import --format mcap {out} --preset yam64 --task {args.task} "
              f"--out {out}_demos" + "".join(f" {f} {getattr(args, a):g}" for a, f in (
                  ("max_gap_ticks", "--max-gap-ticks"), ("max_age_s", "--max-age-s"),
                  ("rate_tolerance", "--rate-tolerance")) if getattr(args, a, None) is not None))
    if advice:
        print(advice)
    if kept < args.episodes:
        print(f"only {kept} of {args.episodes} importable episodes in {len(tries)} tries (--max-tries {max_tries})")
        return 1
    return 1 if bad else 0
