"""Scheduling for the control path: SCHED_FIFO for the threads that must run on time, a lower
share of the CPU for the work that may wait (the policy's inference child).

Why whole processes and not one thread: CPython's GIL is a lock without priority inheritance.
A node's real-time thread (the policy's tick, the driver's bus tick) needs the GIL for every
line it runs; when the thread holding it (the ROS executor, taking a message) is preempted by
an ordinary process (the inference child on both cores, a burst of junk messages), the
real-time thread waits until the scheduler gives the holder a core again: tens of milliseconds
on a loaded 2-core machine (issue 58 row 8: 49-58 ticks missed beyond the baseline under
300 Hz junk; issue 60: target jitter p99 31-55 ms). So every thread of a control process runs
SCHED_FIFO (the real-time thread one level above the rest), and a child that does heavy work
starts with normal scheduling and a nice value.

Linux only; needs CAP_SYS_NICE (root, or `ulimit -r` / an rtprio line in
/etc/security/limits.conf for the user running `ros2 launch`). Where it is refused, the
process runs with normal scheduling and says so once (a warning, never an error).
"""
from __future__ import annotations

import logging
import os

log = logging.getLogger(__name__)


def set_fifo_priority(priority: int, tid: int = 0) -> bool:
    """Give thread `tid` (0: the calling thread) SCHED_FIFO `priority` (1-99). Warns if refused."""
    if not 1 <= int(priority) <= 99:
        raise ValueError(f"SCHED_FIFO priority must be in [1, 99], got {priority!r}")
    try:
        os.sched_setscheduler(tid, os.SCHED_FIFO, os.sched_param(int(priority)))
        return True
    except (AttributeError, PermissionError, OSError) as e:
        log.warning("could not set SCHED_FIFO priority %d for thread %s (%s); normal scheduling", priority,
                    tid or "self", e)
        return False


def process_fifo(priority: int) -> int:
    """Every thread of this process that runs with normal scheduling now (the ROS executor, the
    middleware's receive threads) gets SCHED_FIFO `priority`; threads already real-time keep
    theirs, and threads started later inherit their creator's. Returns how many were raised (0
    where refused: warned once)."""
    if not 1 <= int(priority) <= 99:
        raise ValueError(f"SCHED_FIFO priority must be in [1, 99], got {priority!r}")
    raised = 0
    try:
        tids = [int(t) for t in os.listdir("/proc/self/task")]
    except OSError as e:
        log.warning("cannot list this process's threads (%s); normal scheduling", e)
        return 0
    for tid in tids:
        try:
            if os.sched_getscheduler(tid) != os.SCHED_OTHER:
                continue
            os.sched_setscheduler(tid, os.SCHED_FIFO, os.sched_param(int(priority)))
            raised += 1
        except ProcessLookupError:          # the thread ended meanwhile
            continue
        except (AttributeError, PermissionError, OSError) as e:
            log.warning("could not set SCHED_FIFO priority %d for this process (%s); normal scheduling",
                        priority, e)
            return raised
    return raised


def background(nice: int) -> None:
    """The calling process (a child doing heavy work, started from a real-time thread whose
    policy it inherited) back to normal scheduling, at nice `nice` (0-19): the control threads
    of its parent and of the other nodes come first on a shared CPU."""
    if not 0 <= int(nice) <= 19:
        raise ValueError(f"nice must be in [0, 19], got {nice!r}")
    try:
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
    except (AttributeError, PermissionError, OSError) as e:
        log.warning("could not reset the scheduling policy (%s)", e)
    try:
        os.setpriority(os.PRIO_PROCESS, 0, int(nice))
    except (AttributeError, PermissionError, OSError) as e:
        log.warning("could not set nice %d (%s)", nice, e)


_PROBE = r"""
import os, sys, time
cpu, threshold = int(sys.argv[1]), float(sys.argv[2])
try:
    os.sched_setaffinity(0, {cpu})
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(90))
except (AttributeError, OSError):
    pass
print("ready", flush=True)
last = time.monotonic()
while True:
    time.sleep(0.001)
    now = time.monotonic()
    if now - last > threshold:
        print(f"{last:.6f} {(now - last) * 1e3:.1f}", flush=True)
    last = now
"""


class HostFreezeProbe:
    """Counts the times a CPU stopped running this machine's highest-priority work: one process per
    CPU, pinned, SCHED_FIFO 90 where allowed, sleeping 1 ms at a time; a wake more than
    `threshold_s` late is a freeze (a virtual machine's host taking the vCPU away: this project's
    2-vCPU machine loses one for ~100 ms at a time, more often the busier it is). A benchmark or a
    timing test runs it beside its window to tell the graph's missed ticks from the host's.
    `with HostFreezeProbe() as probe: ...; probe.freezes` -> [(cpu, monotonic start, gap ms)]."""

    def __init__(self, threshold_s: float = 0.04):
        self.threshold_s = float(threshold_s)
        self.freezes: list[tuple[int, float, float]] = []
        self._procs: list = []

    def __enter__(self) -> "HostFreezeProbe":
        import subprocess
        import sys

        cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else [0]
        for cpu in cpus:
            p = subprocess.Popen([sys.executable, "-c", _PROBE, str(cpu), str(self.threshold_s)],
                                 stdout=subprocess.PIPE, text=True)
            p.cpu = cpu
            self._procs.append(p)
        for p in self._procs:
            p.stdout.readline()                         # "ready"
            p.partial = ""
            os.set_blocking(p.stdout.fileno(), False)   # so_far() reads what is there, never waits
        return self

    def so_far(self) -> list[tuple[int, float, float]]:
        """The freezes reported until now, while the probe runs (they are in `freezes` too)."""
        for p in self._procs:
            try:
                chunk = os.read(p.stdout.fileno(), 65536).decode(errors="replace")
            except (BlockingIOError, OSError, ValueError):
                continue
            lines = (p.partial + chunk).split("\n")
            p.partial = lines.pop()
            self.freezes += [(p.cpu, float(t), float(ms)) for t, ms in (ln.split() for ln in lines if ln.strip())]
        self.freezes.sort(key=lambda f: f[1])
        return list(self.freezes)

    def __exit__(self, *exc) -> None:
        self.so_far()
        for p in self._procs:
            p.kill()
        for p in self._procs:
            os.set_blocking(p.stdout.fileno(), True)
            out = p.partial + p.communicate()[0]
            self.freezes += [(p.cpu, float(t), float(ms)) for t, ms in (ln.split() for ln in out.splitlines()
                                                                          if ln.strip())]
        self.freezes.sort(key=lambda f: f[1])

    def between(self, t0: float, t1: float) -> list[tuple[int, float, float]]:
        """The freezes that began in [t0, t1] (monotonic seconds)."""
        return [f for f in self.freezes if t0 <= f[1] <= t1]
