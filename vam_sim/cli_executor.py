"""`vam-stack sim`'s executor arguments (lockstep or realtime, real-time chunking, simulated latency,
re-anchoring) and their cross-checks, shared by the LIBERO and YAM runs (see vam_sim.cli)."""
from __future__ import annotations

import argparse

from vam_policy_node.schedule import RTC_MODES

ON_OFF = {"on": True, "off": False}


def add_executor_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--executor", default="lockstep", choices=("lockstep", "realtime"),
                   help="lockstep: the simulation waits for each replan (deterministic, how results are "
                        "reported); realtime: the mocked bridge runs at its own 20 Hz on the wall clock while "
                        "the policy infers in a worker thread (missed and held ticks reported)")
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
    p.add_argument("--reanchor", default="off", choices=tuple(ON_OFF),
                   help="LIBERO robots (end-effector displacements), realtime or --lockstep-delay: a chunk installed d "
                        "ticks after its observation gets back, over its next d actions, the displacement it skipped "
                        "but the arm did not run (ExecutorConfig.reanchor)")


def latency_options(args: argparse.Namespace) -> dict:
    """The simulated-latency and re-anchoring settings of `args`, refused (SystemExit naming the flag)
    where they do not apply."""
    delay, virtual = getattr(args, "lockstep_delay", 0), getattr(args, "virtual_latency_ms", 0.0)
    for flag, value, executor in (("--lockstep-delay", delay, "lockstep"), ("--virtual-latency-ms", virtual, "realtime")):
        if value and (args.robot != "libero-mock" or args.executor != executor):
            raise SystemExit(f"{flag} {value:g} simulates latency on the mocked LIBERO bridge with --executor {executor}; "
                             f"got --robot {args.robot} --executor {args.executor}")
    reanchor = ON_OFF[getattr(args, "reanchor", "off")]
    if reanchor and args.robot == "yam-mujoco":
        raise SystemExit("--reanchor on corrects end-effector displacements (the LIBERO robots); the YAM's absolute "
                         "joint targets need no correction")
    return {"lockstep_delay": delay, "virtual_latency_ms": virtual, "reanchor": reanchor}
