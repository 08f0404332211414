"""Instructions to the policy node: the newest wins, a burst is coalesced.

Starting an episode takes the runtime's control thread a while (stop the running episode, wait
for an inference in flight, embed the instruction: 20-100 ms on a CPU). Queued one by one, 779
instructions sent at 100 Hz kept starting episodes for 75 s after the burst, each one already
replaced, and the newest started last. `InstructionMailbox` keeps at most one start in flight and
one instruction waiting, and starts an episode at most once every `min_interval_s` (counted
from the moment the previous start was answered, however long it took): an
instruction that arrives meanwhile replaces the waiting one (counted as coalesced, never
started). When the start in flight is answered and the interval has passed, the waiting one
starts. A burst thus starts an episode at most every `min_interval_s` (0.5 s: 16 for the 7.8 s
burst above, the last of them the newest, at most `min_interval_s` after the burst), and a single
instruction starts at once.

`offer(text)` returns what the new instruction replaced, for the node to log: the episode it will
end (the one running, or the start in flight ahead of it) and a waiting instruction that will now
never start. Plain Python, thread-safe: the node offers from its subscription callback, the
runtime answers from its control thread (always: a slow start, one waiting 5 s for an inference
in flight, is waited for, never doubled), a timer (`schedule`, threading.Timer by default) starts a
waiting instruction once the interval has passed, and the node `clear()`s the mailbox when the
runtime goes away (deactivate, cleanup), where a start may stay unanswered.
"""
from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass
from typing import Callable

from vam_stack.instruction import shorten

# start(instruction, done): queue the start; done(ok, message) is called once it is decided
Starter = Callable[[str, Callable[[bool, str], None]], None]


def _timer(delay_s: float, fn: Callable[[], None]) -> None:
    t = threading.Timer(delay_s, fn)
    t.daemon = True
    t.start()


@dataclass(frozen=True)
class Offered:
    """What one `offer` did: started now or waiting, and what it replaced."""

    started: bool                  # handed to the runtime now
    replaced_waiting: str | None   # a waiting instruction it replaced (that one never starts)
    replaced_running: str | None   # the instruction of the episode it will end, if one runs or is starting

    def describe(self, text: str) -> str | None:
        """The node's log line for offering `text`: what it replaces (None when nothing)."""
        said = []
        if self.replaced_running is not None:
            said.append(f"replaces the episode {shorten(repr(self.replaced_running))}")
        if self.replaced_waiting is not None:
            said.append(f"replaces {shorten(repr(self.replaced_waiting))}, which never started")
        if not said:
            return None
        return (f"{shorten(repr(text))} " + "; ".join(said) +
                ("" if self.started else " (starts once the start in flight is answered)"))


class InstructionMailbox:
    """See the module docstring. `start` queues an episode start on the runtime; `running()` names
    the instruction of the episode running now (None when none runs)."""

    def __init__(self, start: Starter, running: Callable[[], str | None], min_interval_s: float = 0.5,
                 clock: Callable[[], float] = time.monotonic,
                 schedule: Callable[[float, Callable[[], None]], None] = _timer):
        if not (math.isfinite(min_interval_s) and min_interval_s >= 0):
            raise ValueError(f"min_interval_s must be >= 0, got {min_interval_s!r}")
        self._start_fn, self._running, self.clock, self._schedule = start, running, clock, schedule
        self.min_interval_s = float(min_interval_s)
        self._lock = threading.Lock()
        self._in_flight: tuple[int, str] | None = None   # (ticket, instruction) of the start not answered yet
        self._waiting: str | None = None
        self._last_start = -math.inf
        self._timer_set = False
        self._ticket = 0
        self.offered = 0       # instructions offered
        self.started = 0       # handed to the runtime
        self.coalesced = 0     # replaced while waiting: never started

    def offer(self, instruction: str) -> Offered:
        with self._lock:
            self.offered += 1
            ahead = self._in_flight[1] if self._in_flight is not None else self._running()
            replaced, self._waiting = self._waiting, instruction
            if replaced is not None:
                self.coalesced += 1
            go = self._next()
        if go is not None:
            self._start_fn(*go)
        return Offered(go is not None and go[0] == instruction, replaced, ahead)

    def clear(self) -> None:
        """Forget the start in flight and the waiting instruction (the runtime stopped or was replaced)."""
        with self._lock:
            self._in_flight, self._waiting = None, None

    @property
    def waiting(self) -> str | None:
        with self._lock:
            return self._waiting

    def _next(self) -> tuple[str, Callable[[bool, str], None]] | None:
        """Under the lock: the waiting instruction to start now, if its turn has come; else, when it
        must wait for the interval, a timer that looks again then."""
        now = self.clock()
        if self._in_flight is not None or self._waiting is None:
            return None
        wait = self._last_start + self.min_interval_s - now
        if wait > 0:
            if not self._timer_set:
                self._timer_set = True
                self._schedule(wait, self._on_timer)
            return None
        text, self._waiting = self._waiting, None
        self._ticket += 1
        self._in_flight, self._last_start = (self._ticket, text), now
        self.started += 1
        return text, self._answer(self._ticket)

    def _on_timer(self) -> None:
        with self._lock:
            self._timer_set = False
            go = self._next()
        if go is not None:
            self._start_fn(*go)

    def _answer(self, ticket: int) -> Callable[[bool, str], None]:
        def done(ok: bool, message: str) -> None:
            with self._lock:
                if self._in_flight is None or self._in_flight[0] != ticket:
                    return                          # a start already written off (timeout, clear)
                self._in_flight = None
                self._last_start = self.clock()     # the interval runs from the episode's start, not its request
                go = self._next()
            if go is not None:
                self._start_fn(*go)
        return done
