"""Instructions to the policy node: the newest wins, a burst is coalesced.

Starting an episode takes the runtime's control thread a while (stop the running episode, wait
for an inference in flight, embed the instruction: ~0.1 s on a CPU). Queued one by one, 779
instructions sent at 100 Hz kept starting episodes for 75 s after the burst, each one already
replaced, and the newest started last. `InstructionMailbox` keeps at most one start in flight
and one instruction waiting: an instruction that arrives meanwhile replaces the waiting one (it
is counted, never started); when the start in flight is answered, the waiting one starts. A
burst thus starts at most two episodes, the last of them the newest instruction.

`offer(text)` returns what the new instruction replaced, for the node to log: the running
episode's instruction, or a waiting one that will never start. Plain Python, thread-safe: the
node offers from its subscription callback, the runtime answers from its control thread.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Callable

# start(instruction, done): queue the start; done(ok, message) is called once it is decided
Starter = Callable[[str, Callable[[bool, str], None]], None]


@dataclass(frozen=True)
class Offered:
    """What one `offer` did: started now, or waiting behind a start in flight, and what it replaced."""

    started: bool            # handed to the runtime now (no start was in flight)
    replaced_waiting: str | None   # a waiting instruction it replaced (that one never starts)
    replaced_running: str | None   # the instruction of the episode it will replace, if one runs


class InstructionMailbox:
    """See the module docstring. `start` queues an episode start on the runtime; `running()` names
    the instruction of the episode running now (None when none runs). A start not answered within
    `timeout_s` (the runtime's command timeout) counts as answered, so the mailbox never jams."""

    def __init__(self, start: Starter, running: Callable[[], str | None], timeout_s: float = 10.0,
                 clock: Callable[[], float] = time.monotonic):
        self._start_fn, self._running, self.timeout_s, self.clock = start, running, float(timeout_s), clock
        self._lock = threading.Lock()
        self._in_flight: tuple[int, str, float] | None = None   # (ticket, instruction, since)
        self._waiting: str | None = None
        self._ticket = 0
        self.offered = 0       # instructions offered
        self.started = 0       # handed to the runtime
        self.coalesced = 0     # replaced while waiting: never started

    def offer(self, instruction: str) -> Offered:
        with self._lock:
            self.offered += 1
            now = self.clock()
            if self._in_flight is not None and now - self._in_flight[2] > self.timeout_s:
                self._in_flight = None             # its answer never came (the runtime closed): start anew
            running = self._running()
            if self._in_flight is None:
                ticket = self._take(instruction, now)
                replaced_waiting = None
            else:
                replaced_waiting, self._waiting = self._waiting, instruction
                if replaced_waiting is not None:
                    self.coalesced += 1
                ticket = None
            # the episode this one will end: the one running, or the start in flight ahead of it
            ahead = running if ticket is not None else self._in_flight[1]
        if ticket is not None:
            self._start_fn(instruction, self._answer(ticket))
        return Offered(ticket is not None, replaced_waiting, ahead)

    def clear(self) -> None:
        """Forget the start in flight and the waiting instruction (the runtime stopped or was replaced)."""
        with self._lock:
            self._in_flight, self._waiting = None, None

    @property
    def waiting(self) -> str | None:
        with self._lock:
            return self._waiting

    def _take(self, instruction: str, now: float) -> int:
        self._ticket += 1
        self._in_flight = (self._ticket, instruction, now)
        self.started += 1
        return self._ticket

    def _answer(self, ticket: int) -> Callable[[bool, str], None]:
        def done(ok: bool, message: str) -> None:
            with self._lock:
                if self._in_flight is None or self._in_flight[0] != ticket:
                    return                          # a start already written off (timeout, clear)
                self._in_flight = None
                nxt, self._waiting = self._waiting, None
                new = self._take(nxt, self.clock()) if nxt is not None else None
            if new is not None:
                self._start_fn(nxt, self._answer(new))
        return done
