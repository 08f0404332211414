"""The executor's configuration and its chunk schedule: which target belongs to which tick
(chunk bookkeeping, holds and seam cross-fades), pure and clock-free; vam_control.executor
runs it (the executor module documents the modes and timing)."""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import Any

import numpy as np

from vam_stack.config import check
from vam_stack.libero import CONTROL_HZ as LIBERO_HZ
from vam_stack.robot import load_robot

MODES = ("lockstep", "realtime")
RTC_MODES = ("guided", "trained", "off")
ACTION_KINDS = ("absolute", "delta")


@dataclass(frozen=True)
class ExecutorConfig:
    """Timing and seam handling of the chunk executor."""

    # timing and width: the policy's spec (`from_spec`), the robot's (`robot_config`: config/yam_robot.yaml) or
    # LIBERO's (`libero_config`); no default here
    rate_hz: float  # targets per second
    chunk: int  # A_H, actions per chunk the policy returns
    execute: int  # N, actions run from each chunk before the next takes over
    action_dim: int  # width of one action (YAM: 2 x (6 joints + gripper); LIBERO: 7)
    mode: str = "realtime"  # "lockstep" (sim time, deterministic) | "realtime" (wall clock)
    action_kind: str = "absolute"  # "absolute": hold repeats the last target; "delta": hold emits 0
    hold_keep_dims: tuple[int, ...] = ()  # delta only: dims kept at their last value on hold (gripper)
    blend_ticks: int = 5  # cross-fade window at a seam, ticks; 0 switches instantly
    latency_ema: float = 0.3  # weight of the newest latency sample in the running estimate
    latency_init_s: float = 0.25  # estimate before the first measurement (guided replan ~0.3 s on H200)
    latency_margin_s: float = 0.05  # slack added to the estimate when choosing when to replan
    retry_after_s: float = 0.5  # wait after an inference exception before the next request
    spin_s: float = 0.0005  # the last part of each wait polls the clock instead of sleeping
    switch_interval_s: float = 0.0005  # realtime: sys.setswitchinterval while running (GIL hand-off)
    rt_priority: int = 0  # realtime: SCHED_FIFO priority of the tick thread (1-99; 0 = normal scheduling)
    max_samples: int = 200_000  # timing samples kept (1.8 h at 30 Hz)
    overrun_after: int = 2  # realtime: chunks dropped in a row (all late) that enter the overrun state
    rtc: str = "off"  # realtime: guided = each request carries the rest of the executing chunk and the expected delay,
                      # and a policy that accepts them continues that chunk (real-time chunking); trained = the same
                      # request for a head trained with a committed prefix (it takes the frozen actions clean);
                      # off = not (the default: on mocked LIBERO guided lost and trained tied, docs/realtime_chunking.md)
    lockstep_delay: int = 0  # lockstep: ticks a replan takes in simulated time. The observation is taken that many
                             # ticks before the executed part ends and the new chunk starts that many actions in, as
                             # the realtime executor does with an exact latency estimate (with rtc guided the request
                             # carries the committed actions and this delay). Deterministic stand-in for inference
                             # latency; 0 = the simulation waits for every replan
    reanchor: bool = False  # delta only: a chunk installed d > 0 ticks after its observation skips its first d
                            # displacements, but the arm ran the old chunk's d instead; the difference (the rest of
                            # the chunk's offset from its planned path) is added back over the next d actions
                            # (hold_keep_dims, absolute commands such as the gripper, are left alone)

    def __post_init__(self) -> None:
        check(math.isfinite(self.rate_hz) and self.rate_hz > 0, f"rate_hz must be > 0, got {self.rate_hz!r}")
        check(self.chunk >= 1, f"chunk must be >= 1, got {self.chunk!r}")
        check(1 <= self.execute <= self.chunk, f"execute must be in [1, chunk={self.chunk}], got {self.execute!r}")
        check(self.action_dim >= 1, f"action_dim must be >= 1, got {self.action_dim!r}")
        check(self.mode in MODES, f"mode must be one of {MODES}, got {self.mode!r}")
        check(self.action_kind in ACTION_KINDS, f"action_kind must be one of {ACTION_KINDS}, got {self.action_kind!r}")
        object.__setattr__(self, "hold_keep_dims", tuple(self.hold_keep_dims))
        check(all(0 <= d < self.action_dim for d in self.hold_keep_dims),
              f"hold_keep_dims must index [0, {self.action_dim}), got {self.hold_keep_dims!r}")
        check(0 <= self.blend_ticks <= self.chunk, f"blend_ticks must be in [0, chunk], got {self.blend_ticks!r}")
        check(0 < self.latency_ema <= 1, f"latency_ema must be in (0, 1], got {self.latency_ema!r}")
        for name in ("latency_init_s", "latency_margin_s", "retry_after_s", "spin_s"):
            v = getattr(self, name)
            check(math.isfinite(v) and v >= 0, f"{name} must be >= 0, got {v!r}")
        check(0 < self.switch_interval_s <= 0.1, f"switch_interval_s must be in (0, 0.1], got {self.switch_interval_s!r}")
        check(0 <= self.rt_priority <= 99, f"rt_priority must be in [0, 99], got {self.rt_priority!r}")
        check(self.max_samples >= 100, f"max_samples must be >= 100, got {self.max_samples!r}")
        check(1 <= self.overrun_after <= 100, f"overrun_after must be in [1, 100], got {self.overrun_after!r}")
        check(self.rtc in RTC_MODES, f"rtc must be one of {RTC_MODES}, got {self.rtc!r}")
        check(isinstance(self.lockstep_delay, int) and 0 <= self.lockstep_delay < self.execute,
              f"lockstep_delay must be an int in [0, execute={self.execute}), got {self.lockstep_delay!r}")
        check(self.lockstep_delay == 0 or self.mode == "lockstep",
              f"lockstep_delay simulates latency in lockstep; the realtime executor measures it (mode {self.mode!r})")
        check(isinstance(self.reanchor, bool), f"reanchor must be true or false, got {self.reanchor!r}")
        check(not self.reanchor or self.action_kind == "delta",
              f"reanchor corrects displacement actions; absolute targets need no correction (action_kind "
              f"{self.action_kind!r})")

    @classmethod
    def from_spec(cls, spec: Any, **overrides: Any) -> "ExecutorConfig":
        """Take chunk, execute, action_dim and rate_hz from a policy spec; overrides win."""
        base = {k: getattr(spec, k) for k in ("chunk", "execute", "action_dim", "rate_hz")}
        base["rate_hz"] = float(base["rate_hz"])
        base.update(overrides)
        return cls(**base)


def robot_config(**overrides: Any) -> ExecutorConfig:
    """The real YAM (config/yam_robot.yaml: its rate, chunk and execute, 2 x (6 joints + gripper) absolute
    joint targets), realtime, blended, tick thread at SCHED_FIFO 50 when the process may (a warning and
    normal scheduling if not)."""
    r = load_robot()
    return ExecutorConfig(**{**dict(rate_hz=r.rate_hz, chunk=r.chunk, execute=r.execute, action_dim=r.dim,
                                    mode="realtime", action_kind="absolute", blend_ticks=5, rt_priority=50),
                             **overrides})


def libero_config(**overrides: Any) -> ExecutorConfig:
    """LIBERO: 7-dim end-effector deltas at its controller rate (vam_stack.libero.CONTROL_HZ), chunk 17, execute 10,
    lockstep, no blending, re-anchored after a delay (+4 / +6 points at a 3-tick delay under none / tr_adaptive,
    docs/realtime_chunking.md).

    Holding emits a zero motion delta and keeps the gripper command (dim 6)."""
    return ExecutorConfig(**{**dict(rate_hz=LIBERO_HZ, chunk=17, execute=10, action_dim=7, mode="lockstep",
                                    action_kind="delta", hold_keep_dims=(6,), blend_ticks=0, reanchor=True),
                             **overrides})


@dataclass
class StepInfo:
    """What happened at one tick."""

    tick: int  # tick index (realtime: wall-clock slot since start())
    chunk_id: int  # chunks installed so far - 1; -1 before the first
    index: int  # action index within the chunk executed at this tick; -1 when none
    replanned: bool = False  # a new chunk was installed at this tick
    skipped: int = 0  # actions skipped at install for latency compensation
    blend_weight: float = 1.0  # weight of the current chunk (< 1 inside a cross-fade window)
    held: bool = False  # the target is a hold, not a chunk action
    reason: str | None = None  # hold/late reason: "no_chunk", "late", "error", "overrun"
    overrun: bool = False  # executing beyond N because the next chunk is late
    telemetry: dict | None = None  # the policy's returned dict minus "actions" (replan ticks)
    error: str | None = None  # the inference exception at this tick, if any
    latency_s: float | None = None  # measured inference latency of the chunk installed here
    reanchored: float = 0.0  # reanchor: the largest per-dim offset this install adds back (0: none or on the path)
    time: float | None = None  # when the target was computed (the executor's clock): its stamp


class ObservationUnavailable(RuntimeError):
    """`obs_fn` has no observation yet (a window still filling, a stale camera or joint state):
    an expected state while inputs start or stall, logged as one line when its `kind` changes,
    not as a failure with a traceback. The arm holds as for any missing result."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


class ChunkSchedule:
    """Which target belongs to which tick: chunk bookkeeping, holds and seam cross-fades."""

    def __init__(self, cfg: ExecutorConfig, initial_target: np.ndarray | None = None) -> None:
        self.cfg = cfg
        self.chunk: np.ndarray | None = None  # [A_H, D] float64
        self.origin = 0  # tick to which chunk[0] belongs
        self.chunk_id = -1
        self.error_hold = False
        self._blend_path: np.ndarray | None = None  # [W, D] frozen old trajectory
        self._blend_start = 0
        self.last_target: np.ndarray | None = None
        self._sent: deque[tuple[int, np.ndarray]] = deque(maxlen=cfg.chunk)  # reanchor: (tick, target sent)
        self.last_reanchor = 0.0  # the largest per-dim offset the last install added back
        if initial_target is not None:
            t = np.asarray(initial_target, dtype=np.float64)
            if t.shape != (cfg.action_dim,) or not np.all(np.isfinite(t)):
                raise ValueError(f"initial_target must be finite with shape ({cfg.action_dim},), got {t!r}")
            self.last_target = t.copy()

    def needs_chunk(self, tick: int) -> bool:
        return self.chunk is None or self.error_hold or tick >= self.origin + self.cfg.execute

    def replan_due(self, tick: int, lead_ticks: int) -> bool:
        return self.needs_chunk(tick) or tick >= self.origin + self.cfg.execute - lead_ticks

    def committed(self, tick: int) -> np.ndarray | None:
        """The targets the current chunk gives ticks `tick` .. its last action (blends included):
        what the arm will do while a replan requested now runs. None without a usable chunk."""
        if self.chunk is None or self.error_hold or tick >= self.origin + self.cfg.chunk:
            return None
        return np.stack([self._planned(k) for k in range(tick, self.origin + self.cfg.chunk)])  # [n, D]

    def fail(self) -> None:
        """Inference failed: hold the last target from now until a chunk arrives."""
        self.error_hold = True
        self._blend_path = None

    def install(self, actions: np.ndarray, origin: int, tick: int) -> int | None:
        """Make `actions` (observed at `origin`) current at `tick`; None if it is all in the past."""
        skip = tick - origin
        if skip >= self.cfg.chunk:
            return None
        self.last_reanchor = 0.0
        if self.cfg.reanchor and skip > 0:
            actions = self._reanchored(np.array(actions, dtype=np.float64), origin, skip)
        w = self.cfg.blend_ticks
        if w > 0 and self.last_target is not None:
            self._blend_path = np.stack([self._planned(k) for k in range(tick, tick + w)])
            self._blend_start = tick
        else:
            self._blend_path = None
        self.chunk, self.origin, self.error_hold = actions, origin, False
        self.chunk_id += 1
        return skip

    def _reanchored(self, actions: np.ndarray, origin: int, skip: int) -> np.ndarray:
        """`actions` with the displacement the arm missed while they were computed added back: the chunk
        skips a_0..a_{d-1} but ticks origin..origin+d-1 sent b (holds and ticks with no target sent moved
        nothing), so e = sum(a - b) is spread evenly over actions d..2d-1 (fewer near the chunk's end)."""
        free = [i for i in range(self.cfg.action_dim) if i not in self.cfg.hold_keep_dims]
        zero = np.zeros(self.cfg.action_dim)
        by_tick = dict(self._sent)
        sent = np.stack([by_tick.get(k, zero) for k in range(origin, origin + skip)])     # [d, D]
        e = (actions[:skip] - sent).sum(axis=0)[free]                                     # [F]
        rows = np.arange(skip, min(2 * skip, self.cfg.chunk))  # the d actions after the skip
        actions[np.ix_(rows, free)] += e / len(rows)                                      # [d', F]
        self.last_reanchor = float(np.max(np.abs(e))) if e.size else 0.0
        return actions

    def target(self, tick: int) -> tuple[np.ndarray | None, StepInfo]:
        """The target for `tick` (None only before any chunk with no initial target)."""
        info = StepInfo(tick=tick, chunk_id=self.chunk_id, index=-1)
        if self.chunk is None or self.error_hold:
            info.held, info.reason = True, ("error" if self.error_hold else "no_chunk")
            a = None if self.last_target is None else self._hold_value()
        else:
            idx = tick - self.origin
            info.index = idx
            info.overrun = idx >= self.cfg.execute
            if info.overrun:
                info.reason = "late"
            if idx >= self.cfg.chunk:
                info.held, info.index = True, -1
            a = self._planned(tick)
            j = tick - self._blend_start
            if self._blend_path is not None and j >= len(self._blend_path):
                self._blend_path = None
            elif self._blend_path is not None and j >= 0:
                info.blend_weight = (j + 1) / (len(self._blend_path) + 1)
        if a is not None:
            self.last_target = a
            if self.cfg.reanchor:
                self._sent.append((tick, a.copy()))
        return (None if a is None else a.copy()), info

    def _planned(self, k: int) -> np.ndarray:
        """Target the current state gives tick k, blends included (no side effects)."""
        if self.chunk is None or self.error_hold:
            return self._hold_value()
        idx = k - self.origin
        if idx < self.cfg.chunk:
            a = self.chunk[idx]
        elif self.cfg.action_kind == "absolute":
            a = self.chunk[-1]  # ran out: hold the chunk's last target, never extrapolate
        else:
            a = self._delta_hold(self.chunk[-1])
        j = k - self._blend_start
        if self._blend_path is not None and 0 <= j < len(self._blend_path):
            w = (j + 1) / (len(self._blend_path) + 1)
            a = (1.0 - w) * self._blend_path[j] + w * a
        return np.array(a, dtype=np.float64)

    def _hold_value(self) -> np.ndarray:
        if self.cfg.action_kind == "absolute":
            return self.last_target.copy()
        return self._delta_hold(self.last_target)

    def _delta_hold(self, last: np.ndarray | None) -> np.ndarray:
        h = np.zeros(self.cfg.action_dim, dtype=np.float64)
        if last is not None and self.cfg.hold_keep_dims:
            keep = list(self.cfg.hold_keep_dims)
            h[keep] = last[keep]
        return h


class SeamMeter:
    """The seam metric of real-time chunking: the largest per-tick target step at a chunk switch
    against the largest step inside a chunk (max |a_k - a_k-1| over the action dims; holds do not
    count). A seam no larger than the within-chunk steps means the next chunk continued the last."""

    def __init__(self) -> None:
        self.last: np.ndarray | None = None
        self.seam_max = 0.0    # largest step at a tick that installed a new chunk
        self.within_max = 0.0  # largest step at any other tick that executed a chunk action
        self.seams = 0

    def update(self, target: np.ndarray | None, info: StepInfo) -> None:
        if target is None:
            return
        if self.last is not None and not info.held:
            step = float(np.max(np.abs(target - self.last)))
            if info.replanned:
                self.seam_max, self.seams = max(self.seam_max, step), self.seams + 1
            else:
                self.within_max = max(self.within_max, step)
        self.last = np.array(target, dtype=np.float64)

    def summary(self) -> dict[str, float]:
        return {"seam_max_step": self.seam_max, "within_chunk_max_step": self.within_max, "seams": float(self.seams)}
