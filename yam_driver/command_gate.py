"""Which joint-target messages the driver follows: only the safety filter's stream, fresh and in order.

The policy node's safety filter is the only component that may command the arm: it applies the
margin inside the joint ranges, the per-tick velocity limit and the e-stop latch. The driver
cannot authenticate a ROS message (that is SROS2's job: see the README's deployment section), so
it refuses whatever does not look like that one stream:

- more than one publisher on the target topic: nothing is followed while a second one exists
  (the driver holds where the arm is, and diagnostics say so) — a teleop script or a second
  policy left running cannot interleave with the filter;
- a `frame_id` other than the filter's tag (`SOURCE`): a plain JointState from elsewhere;
- a stamp older than the driver's watchdog, or more than `future_tolerance_s` ahead of its
  clock: a stale or clock-confused command;
- a stamp not later than the last one followed: out of order or replayed. If the clock itself
  steps back (the last followed stamp is then ahead of it), the order restarts from the next
  fresh target instead of refusing every target until the clock catches up.

Plain Python (no rclpy): the driver node asks `check` on every message and counts reasons.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

from vam_stack.stamps import FUTURE_TOLERANCE_S
from vam_stack.topics import JOINT_TARGETS_SOURCE as SOURCE  # frame_id the safety filter puts on every target
REASONS = ("publishers", "source", "unstamped", "stale", "future", "order")


@dataclass
class CommandGate:
    """Per-message checks of the target stream (see the module docstring)."""

    max_age_s: float  # a target stamped longer ago than this is stale (the driver's watchdog)
    future_tolerance_s: float = FUTURE_TOLERANCE_S  # stamps further ahead than this are refused [s]
    source: str = SOURCE  # the only frame_id followed
    last_stamp: float | None = None  # stamp of the last target followed [s]
    counts: dict[str, int] = field(default_factory=lambda: {r: 0 for r in REASONS})
    last_reason: str | None = None  # reason of the most recent refusal (None after a followed target)
    clock_steps_back: int = 0  # times the clock went back behind the last followed stamp (order restarted)

    def __post_init__(self) -> None:
        if not (math.isfinite(self.max_age_s) and self.max_age_s > 0):
            raise ValueError(f"max_age_s must be finite and > 0, got {self.max_age_s!r}")
        if not (math.isfinite(self.future_tolerance_s) and self.future_tolerance_s >= 0):
            raise ValueError(f"future_tolerance_s must be finite and >= 0, got {self.future_tolerance_s!r}")

    def check(self, stamp_s: float, frame_id: str, now_s: float, publishers: int) -> str | None:
        """None when the target may be followed, else the refusal (its reason counted)."""
        if publishers > 1:
            return self._refuse("publishers", f"{publishers} publishers on the target topic: only the policy "
                                              "node's safety filter may command the arm (holding)")
        if frame_id != self.source:
            return self._refuse("source", f"frame_id {frame_id!r} is not the safety filter's {self.source!r}")
        if not stamp_s > 0:
            return self._refuse("unstamped", "target has no header stamp")
        age = now_s - stamp_s
        if age > self.max_age_s:
            return self._refuse("stale", f"target is {age:.3f} s old (> {self.max_age_s:.3f} s)")
        if -age > self.future_tolerance_s:
            return self._refuse("future", f"target is dated {-age:.3f} s in the future (clock mismatch?)")
        if self.last_stamp is not None and self.last_stamp - now_s > self.future_tolerance_s:
            # the last followed stamp is ahead of the clock: the clock stepped back (NTP, a manual set).
            # Order restarts from here; a replay is still refused as stale, the fresh stream is followed.
            self.clock_steps_back += 1
            self.last_stamp = None
        if self.last_stamp is not None and stamp_s <= self.last_stamp:
            return self._refuse("order", f"target stamp {stamp_s:.6f} is not after the last one followed "
                                         f"({self.last_stamp:.6f}): out of order or replayed")
        self.last_stamp, self.last_reason = stamp_s, None
        return None

    def _refuse(self, reason: str, message: str) -> str:
        self.counts[reason] += 1
        self.last_reason = reason
        return message
