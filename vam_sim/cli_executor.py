"""`vam-stack sim`'s executor arguments (lockstep or realtime, real-time chunking, simulated latency,
re-anchoring) and their cross-checks, shared by the LIBERO and YAM runs (see vam_sim.cli)."""
from __future__ import annotations

import argparse

from vam_control.schedule import RTC_MODES

ON_OFF = {"on": True, "off": False}
OVERLOAD = ("report", "lockstep")      # SimConfig.overload


def add_executor_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--executor", choices=("lockstep", "realtime"),
                   help="realtime: the simulated world runs at its own rate (LIBERO 20 Hz, YAM 30 Hz) on the wall "
                        "clock while the policy infers in a worker thread, as on the robot (missed and held ticks "
                        "reported); lockstep: the simulation waits for each replan (deterministic, how results are "
                        "reported). Default: realtime for the vam policy on the mocked LIBERO bridge and the MuJoCo "
                        "YAM; lockstep for the scripted expert, real LIBERO and --lockstep-delay")
    p.add_argument("--rtc", default="off", choices=RTC_MODES,
                   help="realtime or --lockstep-delay, vam: guided | trained (a head trained on a committed prefix) = "
                        "each replan continues the executing chunk; off (default) = latency compensation alone")
    p.add_argument("--lockstep-delay", type=int, default=0, metavar="D",
                   help="mocked LIBERO, lockstep: a replan takes D ticks of simulated time (observed D ticks before "
                        "the executed part ends, installed D ticks later, the elapsed actions skipped, as the realtime "
                        "executor does), deterministic; with --rtc guided the request carries the committed actions")
    p.add_argument("--virtual-latency-ms", type=float, default=0.0, metavar="MS",
                   help="mocked LIBERO, with --executor realtime: run the realtime executor on a virtual clock "
                        "(deterministic, no threads) where every replan takes exactly MS milliseconds")
    p.add_argument("--overload", choices=OVERLOAD, default=None,
                   help="mocked LIBERO, realtime: what a run does when this machine could not keep real time in "
                        "an episode (chunks dropped, ticks missed or held: vam_sim.episode.realtime_problem): report "
                        "(default: the episode stands, the closing lines say which episodes and what to run "
                        "instead) | lockstep (that episode runs again in lockstep, and so does the rest of the run; "
                        "the realtime attempt is kept in summary.json). scripts/demo.sh uses lockstep")
    p.add_argument("--reanchor", choices=tuple(ON_OFF),
                   help="LIBERO robots (end-effector displacements), realtime or --lockstep-delay: a chunk installed d "
                        "ticks after its observation gets back, over its next d actions, the displacement it skipped "
                        "but the arm did not run (ExecutorConfig.reanchor; default on for LIBERO; the YAM's absolute "
                        "targets need none)")


def default_executor(args: argparse.Namespace) -> str:
    """The executor `sim` runs when --executor is not given: realtime (the robot's timing, which on these presets
    holds lockstep's success: docs/realtime_chunking.md), except where only lockstep applies."""
    lockstep = (getattr(args, "policy", "vam") != "vam" or args.robot == "libero-real"
                or getattr(args, "lockstep_delay", 0))
    return "lockstep" if lockstep else "realtime"


def latency_options(args: argparse.Namespace) -> dict:
    """Resolve `args.executor` when not given (`default_executor`); the simulated-latency and re-anchoring
    settings of `args`, refused (SystemExit naming the flag) where they do not apply."""
    if getattr(args, "executor", None) is None:
        args.executor = default_executor(args)
    delay, virtual = getattr(args, "lockstep_delay", 0), getattr(args, "virtual_latency_ms", 0.0)
    for flag, value, executor in (("--lockstep-delay", delay, "lockstep"), ("--virtual-latency-ms", virtual, "realtime")):
        if value and (args.robot != "libero-mock" or args.executor != executor):
            raise SystemExit(f"{flag} {value:g} simulates latency on the mocked LIBERO bridge with --executor {executor}; "
                             f"got --robot {args.robot} --executor {args.executor}")
    asked = getattr(args, "reanchor", None)
    reanchor = ON_OFF[asked] if asked is not None else args.robot != "yam-mujoco"
    if asked == "on" and args.robot == "yam-mujoco":
        raise SystemExit("--reanchor on corrects end-effector displacements (the LIBERO robots); the YAM's absolute "
                         "joint targets need no correction")
    overload = getattr(args, "overload", None)
    if overload is not None and (args.robot != "libero-mock" or args.executor != "realtime" or virtual):
        raise SystemExit(f"--overload {overload} says what a wall-clock realtime run on the mocked LIBERO bridge does "
                         f"when this machine falls behind; got --robot {args.robot} --executor {args.executor}"
                         + (" --virtual-latency-ms" if virtual else ""))
    extra = {"overload": overload} if overload is not None else {}
    return {"lockstep_delay": delay, "virtual_latency_ms": virtual, "reanchor": reanchor} | extra
