"""The emulated Damiao arm in a process of its own (the driver node's `use_emulator`).

Real motors are hardware of their own: they answer within the bus round trip whatever the host
does. Emulators in the driver's process (python-can's in-process "virtual" channels) share its
interpreter lock: a reply waited until every other Python thread of the process (the executor's
callbacks, the tick) let go of it, and on a loaded 2-core machine all 14 joints latched "no reply"
at once, 17-30 s into a run, also with SCHED_FIFO threads (docs/deployment.md, "The emulated
driver"). Here the rig runs in a spawned process that serves each channel on a Unix socket
(`yam_driver.can_socket`), each channel answered by one thread pinned to each CPU (a virtual
machine's host freezes one vCPU for 100 ms at a time under load: a lone thread woken there waits
it out, a motor would not), at SCHED_FIFO `rt_priority` where the OS allows it (they block on
their sockets between frames; they never spin), so a reply is in the driver's receive buffer
within the round trip of a real bus, and the driver's reply timeout stays the hardware's.

`EmulatedRigProcess(config)` has the in-process rig's `config`, `stop()` and its public methods
(`positions()`, `torque_enabled(joint)`, `move_by_hand`, `set_hardware_error`, `drop_torque`,
...) forwarded over a pipe; `faults()` (an injector object) exists only in-process: tests that
inject faults build an `EmulatedRig`. `stop()` stops the emulators and keeps their state readable;
`close()` (or the pipe closing: the driver process ended, however) ends the process, so it never
outlives the driver. The motors have i2rt's 400 ms command timeout (`can_timeout_s`), as a YAM's
do: a driver that stops sending frames with torque on loses them (0xD), here as on the arm. The
child ignores SIGINT and SIGTERM: launch signals the whole process group,
and the driver still needs its motors for the final hold and torque off.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from multiprocessing.connection import Connection

from .. import damiao_protocol as dmp
from ..config import DriverConfig
from ..gravity import gravity_load
from . import EmulatedRig

EMULATOR_RT_PRIORITY = 60   # SCHED_FIFO of the emulator threads: above the driver's bus thread (a motor
#   answers its driver whenever it asks); they block on their sockets between frames
START_TIMEOUT_S = 60.0      # a spawned interpreter imports numpy and python-can: seconds on a loaded machine


class EmulatedRigProcess:
    """An `EmulatedRig` (Damiao) in a spawned process; see the module docstring."""

    def __init__(self, config: DriverConfig, gravity: bool = False, rt_priority: int = EMULATOR_RT_PRIORITY,
                 can_timeout_s: float | None = dmp.I2RT_COMMAND_TIMEOUT_S):
        """`gravity`: the emulated arm carries the weight of the arm `config` describes
        (`yam_driver.gravity.gravity_load(config, as_configured=True)`); `can_timeout_s`: the motors'
        own command timeout, i2rt's 400 ms by default, as on a YAM (None: off)."""
        if config.bus != "damiao":
            raise ValueError(f"EmulatedRigProcess emulates Damiao motors, got bus {config.bus!r}")
        self._dir = tempfile.mkdtemp(prefix="vam-can-")
        ours, theirs = socket.socketpair()
        self._pipe = Connection(ours.detach())       # pickled calls and answers
        self._lock = threading.Lock()                # one request on the pipe at a time
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
        # a fresh interpreter (not fork: the driver process runs rclpy's threads; not multiprocessing's
        # spawn: it re-imports the caller's __main__)
        self._proc = subprocess.Popen(
            [sys.executable, "-c", f"from yam_driver.emulators.process import serve; serve({theirs.fileno()})"],
            pass_fds=(theirs.fileno(),), env=env, stdin=subprocess.DEVNULL)
        theirs.close()
        try:
            self._pipe.send((config, gravity, self._dir, rt_priority, can_timeout_s))
            if not self._pipe.poll(START_TIMEOUT_S):
                raise RuntimeError(f"the emulator process did not start within {START_TIMEOUT_S:.0f} s")
            kind, value = self._pipe.recv()
            if kind != "ok":
                raise RuntimeError(f"the emulator process failed to start: {value}")
        except EOFError:
            self.close()
            raise RuntimeError(f"the emulator process exited at start (code {self._proc.wait(5)}); its "
                               f"error is above in the log") from None
        except BaseException:
            self.close()
            raise
        self.config: DriverConfig = value[0]
        self.realtime: bool = value[1]               # whether the emulator threads got SCHED_FIFO

    def __getattr__(self, name: str):
        if name.startswith("_") or name == "faults":
            raise AttributeError(f"{type(self).__name__} has no {name!r} (fault injectors exist only in-process: "
                                 f"build an EmulatedRig)")

        def call(*args, **kwargs):
            with self._lock:
                self._pipe.send((name, args, kwargs))
                kind, value = self._pipe.recv()
            if kind == "error":
                raise value
            return value

        return call

    def stop(self) -> None:
        """Stop the emulators (the driver's channels then read as failed); their state stays
        readable (`positions()`, `torque_enabled(joint)`) until `close()`. Idempotent."""
        if self._proc.poll() is None and not self._pipe.closed:
            try:
                self.stop_emulators()
            except (OSError, EOFError):
                pass

    def close(self) -> None:
        """End the process. Idempotent."""
        proc = self.__dict__.get("_proc")
        if proc is not None and proc.poll() is None:
            try:
                with self._lock:
                    self._pipe.send(None)
            except (OSError, ValueError):
                pass
            try:
                proc.wait(2.0)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(1.0)
        if "_pipe" in self.__dict__:
            self._pipe.close()
        shutil.rmtree(self.__dict__.get("_dir", ""), ignore_errors=True)

    def __del__(self) -> None:
        self.close()

    def __enter__(self) -> "EmulatedRigProcess":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def serve(fd: int) -> None:
    """The child's entry point (`EmulatedRigProcess` runs it in a fresh interpreter): the rig on
    sockets, then answer calls on the connection `fd` until told to stop or it closes."""
    conn = Connection(fd)
    config, gravity, where, rt_priority, can_timeout_s = conn.recv()
    signal.signal(signal.SIGINT, signal.SIG_IGN)    # launch signals the whole group: the driver still needs
    signal.signal(signal.SIGTERM, signal.SIG_IGN)   # the motors for its final hold and torque off; EOF ends it
    realtime = False
    if rt_priority:
        try:   # threads started below inherit it (Linux)
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(rt_priority))
            realtime = True
        except (AttributeError, PermissionError, OSError):
            pass                                     # normal scheduling (docs/deployment.md says what it costs)
    try:
        cpus = tuple(sorted(os.sched_getaffinity(0)))   # each channel answered from every CPU (module docstring)
        rig = EmulatedRig(config, load_fn=gravity_load(config, as_configured=True) if gravity else None,
                          listen_dir=where, cpus=cpus if len(cpus) <= 8 else cpus[:8], can_timeout_s=can_timeout_s)
    except Exception as e:
        conn.send(("failed", f"{type(e).__name__}: {e}"))
        return
    conn.send(("ok", (rig.config, realtime)))
    try:
        while True:
            request = conn.recv()
            if request is None:
                break
            name, args, kwargs = request
            try:
                conn.send(("ok", getattr(rig, "stop" if name == "stop_emulators" else name)(*args, **kwargs)))
            except Exception as e:   # the caller's error (an unknown joint): raised there
                conn.send(("error", e))
    except EOFError:                 # the driver process is gone
        pass
    finally:
        rig.stop()
