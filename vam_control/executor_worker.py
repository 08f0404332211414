"""Run a policy in a child process behind the same `reset` / `infer` / `spec` contract.

In one Python process the executor's tick thread and the inference thread share the GIL: a
policy that spends much of its replan in Python (many small torch ops, pre/post-processing)
delays the tick thread's wake-ups by up to the switch interval each time. `ProcessPolicy`
builds the policy in a separate process (spawn start method: no forked torch thread pools)
and forwards calls over a pipe; the executor's worker thread blocks in `recv` with the GIL
released, so the tick thread's timing no longer depends on the policy's Python code.

    policy = ProcessPolicy(functools.partial(build_policy, preset="tiny"), torch_threads=1)
    executor = ChunkExecutor(policy, cfg, obs_fn=..., sink=...)

The factory must be picklable (a module-level function or a functools.partial of one).
Observations are pickled per replan (the current 224 x 448 x 3 uint8 frame, 0.3 MB, and the proprio).
Errors raised by the child's policy come back as `PolicyProcessError` with the child's
traceback text; the executor logs them and holds like any other inference exception.
"""
from __future__ import annotations

import dataclasses
import logging
import multiprocessing as mp
import signal
import threading
import traceback
from types import SimpleNamespace
from typing import Any, Callable

from vam_stack import realtime

log = logging.getLogger(__name__)
WORKER_NICE = 10   # the inference child's nice value: the control threads of every node come first on a shared CPU

SPEC_FIELDS = ("chunk", "execute", "action_dim", "rate_hz")


class PolicyProcessError(RuntimeError):
    """The policy in the child process raised, or the child died."""


def _plain(value: Any) -> Any:
    """Tensors become numpy arrays before crossing the pipe (no shared-memory handles)."""
    if hasattr(value, "detach") and hasattr(value, "cpu"):
        return value.detach().cpu().numpy()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _spec_fields(spec: Any) -> dict:
    """Every field of the policy's spec (dataclass or namespace); at least SPEC_FIELDS."""
    if dataclasses.is_dataclass(spec):
        fields = dataclasses.asdict(spec)
    else:
        fields = dict(getattr(spec, "__dict__", {}))
    missing = [k for k in SPEC_FIELDS if k not in fields and not hasattr(spec, k)]
    if missing:
        raise TypeError(f"policy.spec lacks {missing}; has {sorted(fields)}")
    fields.update({k: getattr(spec, k) for k in SPEC_FIELDS})
    return fields


def _exit_on_sigterm(signum, frame) -> None:
    raise SystemExit(128 + signum)


def _serve(conn, factory: Callable[[], Any], torch_threads: int | None, nice: int = 0) -> None:
    """Child process main loop: build the policy, then answer reset/infer until 'close'.

    SIGINT is ignored here: a terminal's Ctrl-C (or `ros-graph`'s, to the process group, as a
    terminal sends it under `ros2 launch`) reaches this child too, and its parent node stops it
    (`ProcessPolicy.close`); a KeyboardInterrupt here printed a traceback at every Ctrl-C. SIGINT
    is blocked from before the spawn (`ProcessPolicy.__init__`) until it is ignored here.

    Scheduling: normal, at `nice` (the parent may run SCHED_FIFO, which a child inherits): the
    inference is the heaviest work on the machine and must never preempt a control thread
    (vam_stack/realtime.py)."""
    realtime.background(nice)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # the parent's `close` terminates a busy child: SIGTERM unwinds it (SystemExit, no traceback), so
    # what it was doing cleans up (an ONNX export in progress: its exporter process and partial files)
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    try:
        if torch_threads:
            import torch   # heavy, and only a child that sets its threads needs it here (the policy brings its own)

            torch.set_num_threads(torch_threads)
        policy = factory()
        conn.send(("ready", (_spec_fields(policy.spec), bool(getattr(policy, "accepts_committed", False)))))
    except Exception:
        conn.send(("error", traceback.format_exc()))
        return
    while True:
        try:
            msg = conn.recv()
        except EOFError:
            return
        if msg[0] == "close":
            return
        try:
            if msg[0] == "reset":
                policy.reset(msg[1])
                conn.send(("ok", None))
            elif msg[0] == "infer":
                kw = {} if msg[2] is None else {"committed": msg[2]}
                conn.send(("ok", _plain(policy.infer(msg[1], **kw))))
            elif msg[0] == "configure":
                policy.configure(**msg[1])
                conn.send(("ok", None))
            elif msg[0] == "reseed":
                policy.reseed(msg[1])
                conn.send(("ok", None))
            else:
                conn.send(("error", f"unknown request {msg[0]!r}"))
        except Exception:
            conn.send(("error", traceback.format_exc()))


class ProcessPolicy:
    """A policy living in a child process; `infer` blocks (GIL released) until it answers."""

    def __init__(self, factory: Callable[[], Any], *, torch_threads: int | None = None,
                 start_timeout_s: float = 600.0, nice: int = WORKER_NICE) -> None:
        if not callable(factory):
            raise TypeError(f"factory must be callable, got {factory!r}")
        ctx = mp.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_serve, args=(child, factory, torch_threads, nice), name="policy", daemon=True)
        # the child inherits this thread's signal mask: SIGINT stays blocked in it until `_serve` ignores it
        # (a Ctrl-C during the child's interpreter start-up would otherwise print a KeyboardInterrupt traceback)
        blocked = hasattr(signal, "pthread_sigmask")
        if blocked:
            old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            self._proc.start()
        finally:
            if blocked:
                signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
        child.close()
        self._lock = threading.Lock()  # one request/answer pair on the pipe at a time
        self._pending: dict = {}       # `configure` changes not yet sent
        self._pending_lock = threading.Lock()
        try:
            kind, payload = self._recv(start_timeout_s, "start-up")
        except BaseException:        # a stop during the start-up (Ctrl-C in the parent): the child goes with it,
            self.close()             # never left behind (a node process exits without finalising the interpreter)
            raise
        if kind != "ready":
            self.close()
            raise PolicyProcessError(f"policy process failed to start:\n{payload}")
        spec, self.accepts_committed = payload     # accepts_committed: the child's policy continues chunks
        self.spec = SimpleNamespace(**spec)

    def _recv(self, timeout_s: float | None, what: str) -> tuple[str, Any]:
        if timeout_s is not None and not self._conn.poll(timeout_s):
            raise PolicyProcessError(f"policy process gave no answer to {what} within {timeout_s:g} s")
        try:
            return self._conn.recv()
        except EOFError:
            raise PolicyProcessError(f"policy process exited during {what} (exit code {self._proc.exitcode})") from None

    def _call(self, request: tuple, what: str) -> Any:
        with self._lock:
            if not self._proc.is_alive():
                raise PolicyProcessError(f"policy process is not running (exit code {self._proc.exitcode})")
            self._conn.send(request)
            kind, payload = self._recv(None, what)
        if kind == "error":
            raise PolicyProcessError(f"policy {what} raised in the child process:\n{payload}")
        return payload

    def reset(self, instruction: str) -> None:
        self._call(("reset", instruction), "reset")

    def infer(self, obs: dict, committed: dict | None = None) -> dict:
        with self._pending_lock:
            pending, self._pending = self._pending, {}
        if pending:                           # live settings go over the pipe just before the replan they change
            self._call(("configure", pending), "configure")
        return self._call(("infer", obs, committed), "infer")

    def reseed(self, seed: int) -> None:
        self._call(("reseed", seed), "reseed")

    def configure(self, **changes) -> None:
        """`VamPolicy.configure` in the child: kept here and sent with the next `infer` (the pipe is the
        worker thread's; a caller on another thread never waits for a replan in flight). The caller
        validates the values first (the child raises on a bad one, which the next infer reports)."""
        with self._pending_lock:
            self._pending.update({k: v for k, v in changes.items() if v is not None})

    def close(self, timeout_s: float = 0.5) -> None:
        """Stop the child within about 2 x `timeout_s`: asked to exit when it is idle; an inference
        in flight is abandoned (its answer could no longer be used): the child is terminated at
        once, and the thread waiting for it gets a PolicyProcessError. Launch sends SIGTERM 5 s
        after SIGINT: a node must not wait for a replan (seconds on a loaded CPU) to exit."""
        if self._proc.is_alive():
            idle = self._lock.acquire(timeout=0.05)
            if idle:
                try:
                    self._conn.send(("close",))
                except (BrokenPipeError, OSError) as e:
                    log.debug("policy process pipe already closed (%s)", e)
                finally:
                    self._lock.release()
                self._proc.join(timeout_s)
                if self._proc.is_alive():     # busy (a warm-up interrupted in the parent): ended below
                    log.info("policy process did not exit in %.1f s; terminating", timeout_s)
            else:
                log.info("policy process busy (an inference in flight): abandoned, terminating it")
            if self._proc.is_alive():
                self._proc.terminate()
                self._proc.join(timeout_s)
            if self._proc.is_alive():
                self._proc.kill()
                self._proc.join(timeout_s)
        self._conn.close()

    def __enter__(self) -> "ProcessPolicy":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
