"""Stopping a training run from outside: SIGINT (a terminal's Ctrl-C) and SIGTERM (`kill`, a
service manager, torchrun passing its own on) end it at the next step boundary with a checkpoint.

- In one process (`StopRequest(force_second=True)`): while the step loop runs, the first signal asks
  it to stop after the step in progress; the Trainer then writes OUT/train_state.pt and
  model.safetensors at that step (or, when no step ran, says that nothing was kept) and the
  command exits 128 + the signal's number. A second signal, or one before the loop started
  (loading data, building the model), interrupts at once.
- Data parallel: each rank process holds a `StopRequest()` that only records the signal, and the
  Trainer agrees the stop over the ranks every step (one all-reduce of a flag), so every rank
  leaves the loop at the same step and rank 0 writes the checkpoint while the others are still in
  the group. The parent that spawned the ranks (`fit_data_parallel`) passes its first signal on to
  them as SIGTERM and waits for them; a second one kills them. A rank whose parent dies gets SIGTERM
  (Linux's parent-death signal), so no rank trains on as an orphan.
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Iterator

from vam_stack.recording import Interrupted

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class StopRequest:
    """The first SIGINT/SIGTERM as a request (`requested`: its name) while `armed`; see the module
    docstring. `force_second`: a second signal, or any signal while not armed, raises `Interrupted`."""

    def __init__(self, force_second: bool = False):
        self.force_second = force_second
        self.armed = False
        self.requested: str | None = None
        self.signum: int | None = None

    def _handler(self, signum, _frame) -> None:
        if self.force_second and (not self.armed or self.requested is not None):
            raise Interrupted(signum)
        if self.requested is None:
            self.requested, self.signum = signal.Signals(signum).name, signum

    @contextlib.contextmanager
    def installed(self) -> Iterator["StopRequest"]:
        """The handlers for SIGINT and SIGTERM within the block (main thread only; elsewhere nothing),
        the previous ones back after it. SIGINT is handled even when this process started with it
        ignored (a background job of a non-interactive shell)."""
        if threading.current_thread() is not threading.main_thread():
            yield self
            return
        old = {s: signal.signal(s, self._handler) for s in SIGNALS}
        try:
            yield self
        finally:
            for s, h in old.items():
                signal.signal(s, h)


def interrupted_message(result: dict, out: Path) -> str:
    """What an interrupted run kept, in one line (`Trainer.fit`'s result with `interrupted`)."""
    sig = result["interrupted"]
    if result.get("kept") is None:
        return (f"interrupted ({sig}) before the first step finished: nothing kept (no checkpoint in {out}); "
                f"the same command starts afresh")
    return (f"interrupted ({sig}): stopped at step {result['kept']}, kept {out / 'train_state.pt'} and "
            f"{out / 'model.safetensors'}; continue with the same command and --resume")


def die_with_parent(sig: int = signal.SIGTERM) -> None:
    """This process gets `sig` when its parent dies (Linux prctl PR_SET_PDEATHSIG; elsewhere nothing)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(sig))     # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() == 1:          # the parent was already gone before the call
        os.kill(os.getpid(), sig)
