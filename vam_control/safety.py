"""Safety filter between the chunk executor and the joint driver.

Every target on its way to the motors passes through `SafetyFilter.filter`, which returns
the target actually sent and the names of the limits that changed it:

- non-finite values (NaN/inf) anywhere in the target: rejected, the last sent target is held;
- e-stop latch: once `estop()` is called every command holds until `clear_estop()`;
- stale commands: a command whose stamp is older than `stale_after_s` is rejected (hold), and
  `poll(now)` reports the watchdog when no command arrived for `stale_after_s`;
- per-joint position limits (the YAM model's range shrunk by a margin at each end: `margin_rad`, or
  `margin_lower_rad` / `margin_upper_rad` per joint; never wider than the model range) and gripper range;
- maximum change relative to the last sent target: one tick's step (velocity limit x tick
  period), scaled down when the command comes sooner after the previous one than 1/1.5 of a
  period (tick jitter allowed), so commands in a burst cannot add their steps up; a command
  dated before the previous one, or with a non-finite stamp, is held.

Position clipping comes before rate limiting, so a sent target always moves toward the
allowed range by at most one tick's step. The filter must be primed with the measured
position (`reset(measured)`) before the first command: without it the first step could not
be rate limited. All state changes happen under one lock (read-modify-write of the last
sent target), so a driver thread may call `poll` while the executor thread calls `filter`.
Limits come from `config/yam_safety.yaml` (every field stated there; see that file for the
sources of the numbers) and are checked against the robot description
(`vam_stack.robot`, config/yam_robot.yaml): ranges inside the mechanical range, speeds under
the motors' ceilings, rate and staleness within bounds that keep protection on.

Staleness: `filter(target, stamp)` holds on a command older than `stale_after_s` or dated
more than `future_tolerance_s` ahead of the filter's clock (a clock mix-up, not a command).
"""
from __future__ import annotations

import logging
import math
import numbers
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from vam_stack.config import ConfigError, check, check_within, from_yaml
from vam_stack.paths import config_dir
from vam_stack.robot import check_safety, load_robot, robot_rate
from vam_stack.stamps import FUTURE_TOLERANCE_S, STALE_AFTER_S

log = logging.getLogger(__name__)

JOINTS_PER_ARM = load_robot().arm_joints  # YAM: 6 revolute joints, then one gripper value per arm
JITTER_SLACK = 0.5  # a command 1/1.5 of a period after the previous one still gets a whole step (tick jitter);
#   over any span the filter never exceeds 1.5x the velocity limit, and a burst shares one step


@dataclass(frozen=True)
class SafetyConfig:
    """Limits for `arms` x (6 joints + gripper) absolute joint targets."""

    arms: int = 2  # bimanual YAM: 2 x 7 = 14-dim targets
    rate_hz: float | None = None  # command rate; the per-tick step is max velocity / rate_hz. None: the robot's
    #                               (config/yam_robot.yaml, the one source); a stated one must agree
    joint_lower: tuple[float, ...] = (-2.61799, 0.0, 0.0, -1.69297, -1.5708, -2.0944)  # rad, model range
    joint_upper: tuple[float, ...] = (3.14159, 3.66519, 3.14159, 1.5708, 1.5708, 2.0944)  # rad, model range
    margin_rad: float = 0.15  # buffer kept inside the model range at every end without its own below
    # per-joint buffers at the lower / upper end (None: margin_rad). Never negative: the filter never passes a
    # target outside the model range (i2rt's own command clip is the range WIDENED by 0.15 rad; see the YAML)
    margin_lower_rad: tuple[float, ...] | None = None
    margin_upper_rad: tuple[float, ...] | None = None
    max_joint_velocity: tuple[float, ...] = (2.0, 2.0, 2.0, 3.0, 3.0, 3.0)  # rad/s per joint
    gripper_min: float = 0.0  # normalised gripper command range (i2rt linear grippers: 0..1)
    gripper_max: float = 1.0
    max_gripper_velocity: float = 2.0  # normalised units per second
    stale_after_s: float = STALE_AFTER_S  # a command older than this, or silence this long, holds the arm

    # a safety file states every limit: none falls back to a default because a line is missing
    YAML_REQUIRED = ("arms", "joint_lower", "joint_upper", "margin_rad", "max_joint_velocity",
                     "gripper_min", "gripper_max", "max_gripper_velocity", "stale_after_s")

    def __post_init__(self) -> None:
        robot = load_robot()
        check(isinstance(self.arms, int) and not isinstance(self.arms, bool) and 1 <= self.arms <= len(robot.arms),
              f"safety arms is {self.arms!r}: it must be an integer from 1 to the robot description's "
              f"{len(robot.arms)} arms {list(robot.arms)} (config/yam_robot.yaml)")
        if self.rate_hz is not None:
            check(math.isfinite(self.rate_hz) and self.rate_hz > 0, f"rate_hz must be > 0, got {self.rate_hz!r}")
        object.__setattr__(self, "rate_hz", robot_rate("safety ", self.rate_hz, robot))
        for name in ("joint_lower", "joint_upper", "max_joint_velocity"):
            value = tuple(getattr(self, name))
            check(len(value) == JOINTS_PER_ARM, f"{name} needs {JOINTS_PER_ARM} values, got {value!r}")
            check(all(math.isfinite(v) for v in value), f"{name} must be finite, got {value!r}")
            object.__setattr__(self, name, tuple(float(v) for v in value))
        check(self.margin_rad >= 0 and math.isfinite(self.margin_rad), f"margin_rad must be >= 0, got {self.margin_rad!r}")
        for name in ("margin_lower_rad", "margin_upper_rad"):
            value = getattr(self, name)
            if value is None:
                continue
            value = tuple(value)
            check(len(value) == JOINTS_PER_ARM, f"{name} needs {JOINTS_PER_ARM} values (one per joint), got {value!r}")
            for i, v in enumerate(value):
                check(math.isfinite(v) and 0.0 <= v <= 0.5,
                      f"{name}[{i}] (joint {i + 1}) must be in [0, 0.5] rad (never outside the model range), got {v!r}")
            object.__setattr__(self, name, tuple(float(v) for v in value))
        lower, upper = self.margins()
        for i, (lo, hi) in enumerate(zip(self.joint_lower, self.joint_upper)):
            check(lo + lower[i] < hi - upper[i],
                  f"joint {i + 1}: range [{lo!r}, {hi!r}] is empty after " + (
                      f"margin_rad={self.margin_rad!r}" if self.margin_lower_rad is None and self.margin_upper_rad is None
                      else f"margins {lower[i]!r} (lower) and {upper[i]!r} (upper)"))
        check(all(v > 0 for v in self.max_joint_velocity),
              f"max_joint_velocity must be > 0, got {self.max_joint_velocity!r}")
        check(math.isfinite(self.gripper_min) and math.isfinite(self.gripper_max) and self.gripper_min < self.gripper_max,
              f"gripper range must be finite with min < max, got [{self.gripper_min!r}, {self.gripper_max!r}]")
        check(math.isfinite(self.max_gripper_velocity) and self.max_gripper_velocity > 0,
              f"max_gripper_velocity must be > 0, got {self.max_gripper_velocity!r}")
        check(math.isfinite(self.stale_after_s) and self.stale_after_s > 0,
              f"stale_after_s must be > 0, got {self.stale_after_s!r}")
        check_within("margin_rad", self.margin_rad, 0.0, 0.5, "rad")
        check_safety(self, robot)      # ranges, speeds, rate and staleness against the robot description

    @property
    def dim(self) -> int:
        """Length of one target: arms x (joints + gripper)."""
        return self.arms * (JOINTS_PER_ARM + 1)

    def margins(self) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """(lower-end, upper-end) buffer per joint [rad]: the per-joint lists, else margin_rad."""
        every = (self.margin_rad,) * JOINTS_PER_ARM
        return self.margin_lower_rad or every, self.margin_upper_rad or every

    def bounds(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(lower [dim], upper [dim], max step per tick [dim]) for the whole target vector."""
        lower, upper = self.margins()
        lo = [v + m for v, m in zip(self.joint_lower, lower)] + [self.gripper_min]
        hi = [v - m for v, m in zip(self.joint_upper, upper)] + [self.gripper_max]
        vel = list(self.max_joint_velocity) + [self.max_gripper_velocity]
        step = [v / self.rate_hz for v in vel]
        tile = lambda xs: np.tile(np.asarray(xs, dtype=np.float64), self.arms)  # noqa: E731
        return tile(lo), tile(hi), tile(step)

    def gripper_dims(self) -> tuple[int, ...]:
        return tuple(a * (JOINTS_PER_ARM + 1) + JOINTS_PER_ARM for a in range(self.arms))


def load_safety_config(path: str | Path | None = None, section: str = "yam_safety") -> SafetyConfig:
    """Read the limits at start-up; a missing or malformed file raises ConfigError now."""
    return from_yaml(SafetyConfig, path if path is not None else config_dir() / "yam_safety.yaml", section)


@dataclass(frozen=True)
class SafetyResult:
    """What the filter did to one command."""

    sent: np.ndarray  # [dim] float64: the target actually forwarded to the driver
    clipped: frozenset[str]  # limit names that changed it: "position", "gripper", "velocity"
    clipped_dims: dict[str, tuple[int, ...]] = field(default_factory=dict)  # name -> dims changed
    held: bool = False  # True when the command was rejected and the last target held
    reason: str | None = None  # why it held: "estop", "nonfinite", "stale", "future", "backwards"


COUNTER_NAMES = ("commands", "sent", "held", "position", "gripper", "velocity", "nonfinite",
                 "estop", "stale", "future", "backwards", "watchdog")


class SafetyFilter:
    """Clips and gates absolute joint targets; see the module docstring for the order."""

    def __init__(self, cfg: SafetyConfig, clock=time.monotonic) -> None:
        if not isinstance(cfg, SafetyConfig):
            raise ConfigError(f"SafetyFilter needs a SafetyConfig, got {type(cfg).__name__}")
        self.cfg = cfg
        self._clock = clock
        self._lo, self._hi, self._step = cfg.bounds()
        self._gripper = np.zeros(cfg.dim, dtype=bool)
        self._gripper[list(cfg.gripper_dims())] = True
        self._lock = threading.Lock()
        self._last: np.ndarray | None = None
        self._last_time: float | None = None      # when the last target was sent (filter's clock)
        self._last_cmd_t: float | None = None     # time of the last command sent (its stamp, else `now`)
        self._estop_reason: str | None = None
        self._watchdog_tripped = False
        self.counts: dict[str, int] = {k: 0 for k in COUNTER_NAMES}

    # ----- state -----
    def reset(self, measured: np.ndarray) -> np.ndarray:
        """Prime with the measured position; returns the hold target (measured, range-clipped)."""
        m = self._check_shape(measured, "measured position")
        if not np.all(np.isfinite(m)):
            raise ValueError(f"measured position has non-finite values: {m.tolist()!r}")
        with self._lock:
            # Hold where the arm is; clipping into range here would command a jump.
            self._last = m.copy()
            self._last_time = self._clock()
            self._last_cmd_t = None      # the first command after a reset may move one tick's step
            self._watchdog_tripped = False
            return self._last.copy()

    @property
    def last_sent(self) -> np.ndarray | None:
        with self._lock:
            return None if self._last is None else self._last.copy()

    @property
    def estopped(self) -> bool:
        return self._estop_reason is not None

    def estop(self, reason: str = "e-stop") -> None:
        """Latch the e-stop: every later command holds the last target until clear_estop()."""
        with self._lock:
            if self._estop_reason is None:
                log.warning("safety: e-stop latched (%s); holding %s", reason,
                            None if self._last is None else np.round(self._last, 4).tolist())
            self._estop_reason = reason

    def clear_estop(self) -> None:
        """Release the latch explicitly; motion resumes rate-limited from the held target."""
        with self._lock:
            if self._estop_reason is not None:
                log.warning("safety: e-stop cleared (was: %s)", self._estop_reason)
            self._estop_reason = None

    # ----- commands -----
    def filter(self, target: np.ndarray, stamp: float | None = None, now: float | None = None) -> SafetyResult:
        """Check one command; `stamp` is when it was produced (same clock), if known."""
        t = self._check_shape(target, "target")
        stamp = None if stamp is None else _real(stamp, "stamp")
        now = self._clock() if now is None else _real(now, "now")
        with self._lock:
            if self._last is None:
                raise RuntimeError("SafetyFilter.reset(measured_position) must be called before the first command")
            self.counts["commands"] += 1
            if self._estop_reason is not None:
                return self._hold("estop", now)
            if not np.isfinite(t).all():
                bad = np.flatnonzero(~np.isfinite(t)).tolist()
                log.error("safety: non-finite target rejected (dims %s); holding", bad)
                return self._hold("nonfinite", now)
            if stamp is not None and not math.isfinite(stamp):
                log.error("safety: command with a non-finite stamp %r rejected; holding", stamp)
                return self._hold("nonfinite", now)
            if stamp is not None and now - stamp > self.cfg.stale_after_s:
                log.warning("safety: stale command rejected (age %.3f s > %.3f s); holding",
                            now - stamp, self.cfg.stale_after_s)
                return self._hold("stale", now)
            if stamp is not None and stamp - now > FUTURE_TOLERANCE_S:
                log.warning("safety: command dated %.3f s in the future rejected (clock mismatch?); holding",
                            stamp - now)
                return self._hold("future", now)
            t_cmd = now if stamp is None else stamp
            if self._last_cmd_t is not None and t_cmd < self._last_cmd_t:
                log.warning("safety: command dated %.3f s before the previous one rejected; holding",
                            self._last_cmd_t - t_cmd)
                return self._hold("backwards", now)
            # the step limit is a velocity bound over the commands' times, never more than one tick's
            # step: commands in a burst (30 at one instant) share one tick's motion, they do not add up.
            # JITTER_SLACK lets a tick that comes a little early (its stamp is its wake time) keep its step.
            frac = 1.0 if self._last_cmd_t is None else \
                min(1.0, (t_cmd - self._last_cmd_t) * self.cfg.rate_hz * (1.0 + JITTER_SLACK))
            step = self._step * frac
            pos = t.clip(self._lo, self._hi)
            sent = pos.clip(self._last - step, self._last + step)
            clipped: dict[str, tuple[int, ...]] = {}
            if (sent != t).any():  # slow path only when something was clipped: name the limits
                changed = pos != t
                if (changed & ~self._gripper).any():
                    clipped["position"] = tuple(np.flatnonzero(changed & ~self._gripper).tolist())
                if (changed & self._gripper).any():
                    clipped["gripper"] = tuple(np.flatnonzero(changed & self._gripper).tolist())
                rate = sent != pos
                if rate.any():
                    clipped["velocity"] = tuple(np.flatnonzero(rate).tolist())
            for name in clipped:
                self.counts[name] += 1
            self.counts["sent"] += 1
            self._last = sent
            self._last_time = now
            self._last_cmd_t = t_cmd
            self._watchdog_tripped = False
            return SafetyResult(sent=sent.copy(), clipped=frozenset(clipped), clipped_dims=clipped)

    def poll(self, now: float | None = None) -> SafetyResult:
        """Driver-side watchdog: the target to keep sending now (held, flagged when stale)."""
        now = self._clock() if now is None else _real(now, "now")
        with self._lock:
            if self._last is None:
                raise RuntimeError("SafetyFilter.reset(measured_position) must be called before poll()")
            if self._estop_reason is not None:
                return SafetyResult(sent=self._last.copy(), clipped=frozenset(), held=True, reason="estop")
            if self._last_time is not None and now - self._last_time > self.cfg.stale_after_s:
                if not self._watchdog_tripped:
                    self._watchdog_tripped = True
                    self.counts["watchdog"] += 1
                    log.warning("safety: no command for %.3f s (> %.3f s); holding last target",
                                now - self._last_time, self.cfg.stale_after_s)
                return SafetyResult(sent=self._last.copy(), clipped=frozenset(), held=True, reason="stale")
            return SafetyResult(sent=self._last.copy(), clipped=frozenset())

    # ----- helpers -----
    def _hold(self, reason: str, now: float) -> SafetyResult:
        self.counts["held"] += 1
        self.counts[reason] += 1
        return SafetyResult(sent=self._last.copy(), clipped=frozenset(), held=True, reason=reason)

    def _check_shape(self, x, what: str) -> np.ndarray:
        kind = np.asarray(x).dtype.kind
        if kind not in "iuf":      # complex (its imaginary part would be dropped), strings ("0.1"), objects, bools
            raise ValueError(f"{what} must be real numbers (int or float), got {np.asarray(x).dtype} ({x!r:.80})")
        a = np.asarray(x, dtype=np.float64)
        if a.shape != (self.cfg.dim,):
            raise ValueError(f"{what} must have shape ({self.cfg.dim},), got {a.shape} ({x!r:.80})")
        return a


def _real(x, what: str) -> float:
    """A stamp or clock reading as a float: a real number (a numeric string or a complex one is refused)."""
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, (numbers.Real, np.integer, np.floating)):
        raise ValueError(f"{what} must be a real number, got {type(x).__name__} {x!r:.80}")
    return float(x)
