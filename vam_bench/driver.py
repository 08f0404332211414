"""`vam-stack bench driver`: read + write of 14 motors per tick on each emulator.

For each bus (Dynamixel through the real dynamixel_sdk on a pty, Damiao through python-can's
virtual bus) the shipped config drives an emulated rig: first `--ticks` unpaced ticks with a
new sinusoidal target each tick (p50/p99 of read, write and read + write), then a
`--seconds` run of the loop the driver node runs (`yam_driver.bus_thread.BusThread` through
`YamDriver.run`: its own thread, deadlines, SCHED_FIFO `--rt-priority` where the OS allows it) at
the config's rate with targets arriving from another thread (achieved rate, overruns). Emulator and driver share this process and its
cores, so the numbers include the emulator's own work.
"""
from __future__ import annotations

import argparse
import logging
import threading
import time

import numpy as np

from yam_driver.bus_thread import BUS_RT_PRIORITY
from yam_driver.config import BUSES, load_config
from yam_driver.driver import YamDriver
from yam_driver.emulators import EmulatedRig


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of `vam-stack bench driver`."""
    parser.add_argument("--bus", choices=[*BUSES, "both"], default="both", help="which bus to measure")
    parser.add_argument("--ticks", type=int, default=300, help="unpaced ticks for the I/O percentiles")
    parser.add_argument("--seconds", type=float, default=3.0, help="length of the paced run")
    parser.add_argument("--rate", type=float, default=None, help="loop rate in Hz (default: config)")
    parser.add_argument("--rt-priority", type=int, default=BUS_RT_PRIORITY,
                        help=f"SCHED_FIFO priority of the loop's thread (default {BUS_RT_PRIORITY}, the driver node's; "
                             "0 = normal scheduling; needs root or CAP_SYS_NICE, else a warning and normal scheduling)")
    parser.add_argument("--json", default=None, help="also write the results as JSON here ('-' = stdout)")


def _sine_targets(center: np.ndarray, t: float) -> np.ndarray:
    phase = np.arange(center.size) * 0.4
    return center + 0.05 * np.sin(2 * np.pi * 0.5 * t + phase)


def _percentiles(values_s: list[float]) -> dict[str, float]:
    p50, p99 = np.percentile(np.asarray(values_s) * 1000.0, [50, 99])
    return {"p50_ms": round(float(p50), 3), "p99_ms": round(float(p99), 3)}


def bench_bus(bus: str, ticks: int, seconds: float, rate_hz: float | None, rt_priority: int = 0) -> dict:
    """Unpaced I/O percentiles, then a paced run (the node's loop at SCHED_FIFO `rt_priority`), of the
    shipped `bus` config on its emulator."""
    cfg = load_config(bus=bus)
    if rate_hz is not None:
        import dataclasses

        cfg = dataclasses.replace(cfg, rate_hz=rate_hz)
    with EmulatedRig(cfg, tau_s=0.02) as rig:
        driver = YamDriver(rig.config)
        window: dict[str, list[str]] = {"unpaced": [], "paced": []}
        phase = ["unpaced"]
        real_step = driver.step

        def step():                       # every tick's new faults, in both phases (the paced loop calls step())
            report = real_step()
            window[phase[0]] += [str(f) for f in report.new_faults]
            return report

        driver.step = step
        center = driver.start()
        center = np.clip(center, driver._lower + 0.06, driver._upper - 0.06)
        reads, writes, ios = [], [], []
        t0 = time.monotonic()
        try:
            for _ in range(ticks):
                driver.set_targets(_sine_targets(center, time.monotonic() - t0))
                report = driver.step()
                reads.append(report.read_s)
                writes.append(report.write_s)
                ios.append(report.read_s + report.write_s)
            phase[0] = "paced"
            stop = threading.Event()

            def feed() -> None:
                while not stop.wait(0.01):
                    driver.set_targets(_sine_targets(center, time.monotonic() - t0))

            feeder = threading.Thread(target=feed, daemon=True)
            feeder.start()
            try:
                stats = driver.run(duration_s=seconds, rt_priority=rt_priority)
            finally:
                stop.set()
                feeder.join()
        finally:
            latched = [str(f) for f in driver.faults]
            driver.shutdown()
    seen = window["unpaced"] + window["paced"]
    faults = seen + [f for f in latched if f not in seen]     # (a fault latched outside step(), if any)
    return {
        "bus": bus,
        "motors": len(cfg.joint_names),
        "unpaced_ticks": ticks,
        "read": _percentiles(reads),
        "write": _percentiles(writes),
        "read_plus_write": _percentiles(ios),
        "rate_hz_target": cfg.rate_hz,
        "rate_hz_achieved": round(stats.achieved_rate_hz, 2),
        "paced_ticks": stats.ticks,
        "overruns": stats.overruns,
        "sched_fifo": stats.sched_fifo,
        "faults": faults,                                     # every fault latched in the window, both phases
        "fault_count": {"unpaced": len(window["unpaced"]), "paced": len(window["paced"]), "total": len(faults)},
    }


def run(args: argparse.Namespace) -> int:
    """Measure the chosen buses, print a table, optionally write JSON."""
    if args.ticks < 10:
        raise SystemExit(f"--ticks must be >= 10, got {args.ticks}")
    if args.seconds <= 0:
        raise SystemExit(f"--seconds must be > 0, got {args.seconds}")
    if args.rate is not None and args.rate <= 0:
        raise SystemExit(f"--rate must be > 0, got {args.rate}")
    logging.getLogger("yam_driver").setLevel(logging.WARNING)
    buses = list(BUSES) if args.bus == "both" else [args.bus]
    if not 0 <= args.rt_priority <= 99:
        raise SystemExit(f"--rt-priority must be in [0, 99], got {args.rt_priority}")
    results = [bench_bus(b, args.ticks, args.seconds, args.rate, args.rt_priority) for b in buses]
    print(f"{'bus':10s} {'read p50/p99 ms':>16s} {'write p50/p99 ms':>17s} {'r+w p50/p99 ms':>15s} "
          f"{'rate Hz (target)':>17s} {'overruns':>8s}")
    for r in results:
        print(f"{r['bus']:10s} {r['read']['p50_ms']:7.3f}/{r['read']['p99_ms']:<8.3f} "
              f"{r['write']['p50_ms']:8.3f}/{r['write']['p99_ms']:<8.3f} "
              f"{r['read_plus_write']['p50_ms']:7.3f}/{r['read_plus_write']['p99_ms']:<7.3f} "
              f"{r['rate_hz_achieved']:8.2f} ({r['rate_hz_target']:.0f}) {r['overruns']:8d}")
        n = r["fault_count"]
        if r["faults"]:
            shown = "; ".join(r["faults"][:3]) + (f"; and {len(r['faults']) - 3} more" if len(r["faults"]) > 3 else "")
            print(f"  {n['total']} faults in the window ({n['unpaced']} unpaced, {n['paced']} paced): {shown}")
        else:
            print(f"  no fault in the window ({r['unpaced_ticks']} unpaced + {r['paced_ticks']} paced ticks)")
    if args.json is not None:
        from vam_stack.outputs import write_json_output
        write_json_output(args.json, {"benchmark": "driver", "results": results})
    return 0
