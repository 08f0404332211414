"""The YAM driver core: 14-dim joint targets in, motor commands out, the arm kept safe.

One tick (`step`): read every joint (the bus retries within the tick budget), update each
joint's health, choose what to command, slew-limit it, write it, report. Modes:
  ramping  after start (or after a hold/fault reset): commands leave the measured present
           position at `ramp_speed_scale * max_speed` and reach the target without a jump;
  running  following fresh targets at up to `max_speed`;
  holding  the newest target is older than `watchdog_s` (or none came yet): hold the
           position measured when the targets went stale; a fresh target resumes via ramping;
  fault    a joint failed `fault_after_failures` ticks in a row or reported a hardware error:
           latched with the joint's name and the reason; every healthy joint holds (or, with
           on_fault: torque_off, torque goes off); `clear_faults()` is the operator's reset.
While torque is meant on every motor gets a frame every tick (a Damiao motor without one for its
400 ms command timeout disables itself): a joint read this tick and healthy gets its slew-limited
command, one not read or faulted is held at its last command; only finite targets within the limits
are sent (out-of-range ones are clipped and flagged). Faulted joints are still read every tick.
Every write carries the gravity feed-forward at the measured pose (`GravityModel`, Damiao: the
MIT command's t_ff), and a blocked gripper's command is held within its force limit of the
measured opening (i2rt's gripper force limiter).
`run()` runs the driver node's paced loop (`bus_thread.BusThread`: absolute deadlines on the
monotonic clock, in a thread of its own), measures the achieved rate, and shuts down on every exit
path: normal end, exception, SIGINT/SIGTERM. Shutdown
holds the measured position, then disables torque when `torque_off_on_exit`.
"""
from __future__ import annotations

import logging
import math
import signal
import threading
import time
from collections import deque
from typing import Callable

import numpy as np

from vam_stack.stamps import FUTURE_TOLERANCE_S

from .bus import BusError, BusReading, JointBus, WriteResult
from .bus_thread import paced_run
from .buses import make_bus
from .config import DriverConfig, is_gripper
from .gravity import GravityModel
from .gripper_limit import GripperLimiter
from .faults import JointHealth, LoopStats, Mode, TickReport

log = logging.getLogger(__name__)



class YamDriver:
    """Bimanual YAM driver over a `JointBus`; a context manager that starts and shuts down."""

    def __init__(self, config: DriverConfig, bus: JointBus | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self.config = config
        self.bus = bus if bus is not None else make_bus(config)
        self.clock = clock
        self.names = config.joint_names
        self.n = len(self.names)
        jm = self.bus.joint_map
        self._lower, self._upper = jm.lower, jm.upper
        self._max_speed = np.array([j.max_speed for _, j in config.joints])
        from vam_stack.robot import load_robot

        robot = load_robot()
        self._gripper = np.array([is_gripper(a, j) for a, j in config.joints])
        per_arm = list(robot.max_joint_speed) + [robot.max_gripper_speed]
        ceiling = np.array([per_arm[a.joints.index(j)] for a, j in config.joints], np.float64)  # (14,)
        self.health = JointHealth(config, ceiling, self._gripper, self._enter_fault)   # faults and their counts
        self._home = np.full(self.n, np.nan)      # pose of a `home()` in progress
        self.mode = Mode.IDLE
        self.shutdown_errors: list[str] = []
        self._present = np.full(self.n, np.nan)
        self._velocity = np.full(self.n, np.nan)
        self._effort = np.full(self.n, np.nan)
        self._command = np.full(self.n, np.nan)
        self._hold = np.full(self.n, np.nan)
        self._targets: np.ndarray | None = None
        self._target_stamp = 0.0
        self._lock = threading.Lock()          # the targets (set from any thread)
        self._bus_lock = threading.RLock()     # start / step / clear_faults / shutdown never overlap on the bus
        self._stop = threading.Event()
        self._stop_reason = ""
        self.tick = 0
        self._io_ms: deque[float] = deque(maxlen=config.stats_window)
        self.gravity = GravityModel(config) if config.gravity_factor is not None else None
        self._ff = np.zeros(self.n)               # feed-forward of the last write, Nm
        self.gripper_limit = GripperLimiter(config)

    faults = property(lambda self: self.health.faults, doc="latched faults, oldest first")
    glitches = property(lambda self: self.health.glitches, doc="readings refused as implausible jumps")
    _faulted = property(lambda self: self.health.faulted)

    def _feedforward(self, pose: np.ndarray) -> np.ndarray | None:
        """Joint-space gravity feed-forward at `pose` (the measured one), or None without a model."""
        if self.gravity is None:
            return None
        self._ff = self.gravity.feedforward(pose)
        return self._ff

    # --- inputs ----------------------------------------------------------------------
    def set_targets(self, targets, stamp: float | None = None) -> None:
        """New absolute targets: (14,) driver units (rad; grippers as opening fraction)."""
        arr = np.asarray(targets, dtype=np.float64)
        if arr.shape != (self.n,):
            raise ValueError(f"targets must be {self.n} values (2 arms x (6 joints + gripper)), got shape {arr.shape}")
        bad = ~np.isfinite(arr)
        if bad.any():
            raise ValueError(f"non-finite targets: { {self.names[i]: float(arr[i]) for i in np.flatnonzero(bad)} }")
        now = self.clock()
        if stamp is not None:     # the staleness check must never read a bad stamp as fresh
            stamp = float(stamp)
            if not math.isfinite(stamp):
                raise ValueError(f"target stamp must be finite, got {stamp!r}")
            if stamp > now + FUTURE_TOLERANCE_S:
                raise ValueError(f"target stamp {stamp:.6f} is {stamp - now:.3f} s ahead of the driver clock "
                                 f"({now:.6f}): another clock (wall time?) or a future-dated target")
        with self._lock:
            self._targets = arr.copy()
            self._target_stamp = now if stamp is None else stamp

    def request_stop(self, reason: str = "requested") -> None:
        """Ask `run()` to end after the current tick (thread- and signal-safe)."""
        self._stop_reason = self._stop_reason or reason
        self._stop.set()

    # --- start / shutdown --------------------------------------------------------------
    def start(self) -> np.ndarray:
        """Connect, read the present position, hold it, enable torque; returns the position."""
        with self._bus_lock:
            self._connect()
            return self._enable()

    def connect(self) -> np.ndarray:
        """Open the bus, check every motor answers and sits inside its limits; torque stays off
        (a managed node's configure). Returns the present position. From idle or stopped."""
        with self._bus_lock:
            return self._connect()

    def enable(self) -> np.ndarray:
        """Torque on from the connected state: the goal is the position measured now, so nothing
        jumps; then ramp toward the first fresh target (a managed node's activate)."""
        with self._bus_lock:
            return self._enable()

    def _connect(self) -> np.ndarray:
        if self.mode not in (Mode.IDLE, Mode.STOPPED):
            raise RuntimeError(f"connect() needs mode idle or stopped, driver is {self.mode.value}")
        self.health.reset()
        self.gripper_limit.reset()
        with self._lock:
            self._targets = None
        try:
            self.bus.connect()
            present = self._read_all_or_raise("start-up")
            self._present = present.copy()
            self.health.seen(time.monotonic())
            self._command = np.clip(present, self._lower, self._upper)
            self._hold = self._command.copy()
            self.mode = Mode.CONNECTED
            log.info("yam_driver connected on %s: %d motors, torque off", self.config.bus, self.n)
            return present
        except BaseException:
            self._shutdown()
            raise

    def _enable(self) -> np.ndarray:
        if self.mode == Mode.FAULT:           # activate after a fault: the operator's reset, torque never off
            self._clear_faults()
            return self._present.copy()
        if self.mode in (Mode.RAMPING, Mode.RUNNING, Mode.HOLDING, Mode.HOMING):   # torque already on (reactivated)
            with self._lock:
                self._targets = None          # a target from before is never followed; a fresh one ramps in
            self.mode = Mode.HOLDING
            return self._present.copy()
        if self.mode != Mode.CONNECTED:
            raise RuntimeError(f"enable() needs mode connected, driver is {self.mode.value}")
        try:
            present = self._read_all_or_raise("torque on")
            self._present = present.copy()
            self.health.seen(time.monotonic())
            self._command = np.clip(present, self._lower, self._upper)
            self._hold = self._command.copy()
            with self._lock:
                self._targets = None          # a target from before torque on is never followed
            # goal = present before torque on, gravity carried: no jump, no sag
            self.bus.write_targets(self._command, torque_ff=self._feedforward(present))
            if self.gravity is not None and self.gravity.warning() is not None:
                log.warning(self.gravity.warning())    # a factor of 0: that joint sags
            self.bus.enable()
            self.mode = Mode.RAMPING
            log.info("yam_driver started on %s at %.1f Hz", self.config.bus, self.config.rate_hz)
            return present
        except BaseException:
            self._shutdown()
            raise

    def hold(self) -> None:
        """Hold the position measured now and forget the targets (a managed node's deactivate; a
        fresh target later resumes through the ramp). Torque stays on."""
        with self._bus_lock:
            if self.mode in (Mode.IDLE, Mode.CONNECTED, Mode.STOPPED, Mode.FAULT):
                return
            with self._lock:
                self._targets = None
            self._hold = np.clip(np.where(np.isfinite(self._present), self._present, self._command),
                                 self._lower, self._upper)
            self.mode = Mode.HOLDING

    def home(self, pose) -> None:
        """Move to `pose` (14 values, driver units, inside the limits) at the ramp speed (the
        configured `ramp_speed_scale` x each joint's max_speed), then hold it; targets are ignored
        meanwhile and a fresh one afterwards resumes through the ramp. Only with torque on."""
        arr = np.asarray(pose, dtype=np.float64)
        if arr.shape != (self.n,) or not np.isfinite(arr).all():
            raise ValueError(f"home pose must be {self.n} finite values, got {pose!r}")
        outside = (arr < self._lower) | (arr > self._upper)
        if outside.any():
            raise ValueError(f"home pose outside the joint limits: "
                             f"{ {self.names[i]: float(arr[i]) for i in np.flatnonzero(outside)} }")
        with self._bus_lock:
            if self.mode not in (Mode.RAMPING, Mode.RUNNING, Mode.HOLDING, Mode.HOMING):
                raise RuntimeError(f"home needs torque on (ramping, running or holding), driver is {self.mode.value}")
            with self._lock:
                self._targets = None
            self._home = arr.copy()
            self.mode = Mode.HOMING

    def _read_all_or_raise(self, what: str) -> np.ndarray:
        deadline = time.monotonic() + max(self.config.period_s, 0.1)
        reading = self.bus.read_state(deadline)
        problems = {self.names[i]: r for i, r in reading.errors.items()}
        if problems or not reading.ok.all():
            raise BusError(f"{what} read failed: {problems}")
        margin = self.config.ramp_tolerance * 10 + 0.05
        outside = (reading.position < self._lower - margin) | (reading.position > self._upper + margin)
        if outside.any():
            detail = {self.names[i]: (round(float(reading.position[i]), 4), (self._lower[i], self._upper[i]))
                      for i in np.flatnonzero(outside)}
            raise BusError(f"{what}: joints outside their limits (position, limits): {detail}; "
                           f"move them inside by hand before starting")
        return reading.position

    def shutdown(self, torque_off: bool | None = None) -> None:
        """Hold where the arm is, then torque off (`torque_off`; None: as `torque_off_on_exit` says),
        then close. Idempotent, and safe from any thread: it waits for a tick in progress, and no
        tick runs after it. `torque_off=False` leaves the motors powered, holding (a YAM has no
        brakes: what an exit that no operator asked for must do)."""
        with self._bus_lock:
            self._shutdown(torque_off)

    def _shutdown(self, torque_off: bool | None = None) -> None:
        if self.mode == Mode.STOPPED:
            return
        off = self.config.torque_off_on_exit if torque_off is None else bool(torque_off)
        errors: list[str] = []
        try:
            if self.bus.connected and self.bus.torque_enabled:
                try:
                    reading = self.bus.read_state()
                    hold = np.where(reading.ok & ~self._faulted, reading.position, self._command)
                    mask = np.isfinite(hold)            # a faulted joint too, at its last command
                    self.bus.write_targets(np.where(mask, hold, 0.0), mask, torque_ff=self._feedforward(hold))
                except Exception as e:  # keep going: torque off matters more
                    errors.append(f"final hold failed: {e}")
                if off:
                    try:
                        errors += [f"{self.names[i]}: torque off failed: {r}" for i, r in self.bus.disable().items()]
                    except Exception as e:
                        errors.append(f"torque off failed: {e}")
        finally:
            try:
                self.bus.close(disable_torque=off)
            except Exception as e:
                errors.append(f"close failed: {e}")
            self.mode = Mode.STOPPED
            self.shutdown_errors = errors
            if errors:
                log.error("yam_driver shutdown problems: %s", "; ".join(errors))
            else:
                log.info("yam_driver shut down (torque %s)", "off" if off else "on")

    def clear_faults(self) -> str:
        """The operator's reset after a fault (the node's ~/reset_faults service, and activate from a
        fault): undo what a stall left (a motor's latched communication loss cleared, a lost port
        reopened), re-read every joint, command the measured pose with its gravity feed-forward, torque
        on for every motor (those already on stay on: torque never goes off here), then hold there
        until a fresh target ramps in. Returns what was done, for the operator; BusError (the bus still
        down, a motor still in error) leaves the driver in its fault, every motor still held."""
        with self._bus_lock:
            return self._clear_faults()

    def _clear_faults(self) -> str:
        if self.mode != Mode.FAULT:
            return f"no fault latched (mode {self.mode.value}): nothing to reset"
        was = "; ".join(map(str, self.health.faults)) or "fault"
        done = self.bus.prepare_reset()           # a port unplugged and back, a motor's latched comm loss
        present = self._read_all_or_raise("fault reset")
        self._present, self._command = present.copy(), np.clip(present, self._lower, self._upper)
        self.health.seen(time.monotonic())
        self._hold = self._command.copy()
        self.bus.write_targets(self._command, torque_ff=self._feedforward(present))   # goal = measured: no jump
        self.bus.enable()                         # every motor: a reconnected or power-cycled one is disabled
        self.health.reset()
        self.gripper_limit.reset()
        with self._lock:
            self._targets = None  # a fresh target is needed after a reset
        self.mode = Mode.RAMPING
        message = (f"faults cleared ({was})" + (f"; {'; '.join(done)}" if done else "") +
                   ": torque on, holding the measured pose; a fresh target ramps in")
        log.warning("yam_driver: %s", message)
        return message

    def __enter__(self) -> "YamDriver":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()

    # --- one tick ----------------------------------------------------------------------
    def step(self) -> TickReport:
        """One tick: read, update health, choose and slew-limit the command, write, report."""
        with self._bus_lock:
            if self.mode in (Mode.IDLE, Mode.STOPPED):
                raise RuntimeError(f"step() needs a started driver, mode is {self.mode.value}")
            return self._step()

    def try_step(self) -> TickReport | None:
        """`step()`, or None when the driver is not started or already shut down (a timer tick
        that raced `shutdown()` from another thread: nothing reaches the bus after it)."""
        with self._bus_lock:
            if self.mode in (Mode.IDLE, Mode.STOPPED):
                return None
            return self._step()

    def _step(self) -> TickReport:
        now = self.clock()
        budget = self.config.period_s * self.config.io_budget_fraction
        t0 = time.monotonic()
        try:   # every joint, faulted ones too: a faulted motor's state (a latched 0xD, a reply back) stays known
            reading = self.bus.read_state(t0 + 0.6 * budget)
        except BusError as e:
            reading = BusReading.empty(self.n)
            reading.errors = {i: f"bus error: {e}" for i in range(self.n)}
        t1 = time.monotonic()
        health = self.health
        health.refuse_glitches(reading, self._present, t1)
        self._present = np.where(reading.ok, reading.position, self._present)
        self._velocity = np.where(reading.ok, reading.velocity, self._velocity)
        self._effort = np.where(reading.ok, reading.effort, self._effort)
        new_faults = health.latch_hardware(reading.hardware_error, reading.errors, now)
        new_faults += health.check_torque(reading, self.bus.torque_enabled, now)
        new_faults += health.check_tracking(reading, self._command, self.bus.torque_enabled and self.mode not in (
            Mode.IDLE, Mode.CONNECTED, Mode.STOPPED), now)

        desired, speed, age, clipped = self._desired(now)
        cmd = np.full(self.n, np.nan)
        written = np.full(self.n, np.nan)
        write_errors: dict[int, str] = {}
        retries = reading.retries
        grip_limited = np.zeros(self.n, bool)
        if desired is not None:
            base = np.where(np.isfinite(self._command), self._command, self._present)
            step_lim = speed * self.config.period_s
            cmd = base + np.clip(desired - base, -step_lim, step_lim)
            cmd, grip_limited = self.gripper_limit.limit(cmd, self._present, self._velocity, self._command)
            # Every motor gets a frame every tick while torque is meant on: a Damiao motor left without one
            # for its command timeout (i2rt sets 400 ms: 8000 x 50 us, i2rt-robotics/i2rt @ 5d47b358
            # i2rt/motor_config_tool/set_timeout.py) disables itself and latches 0xD, and a YAM has no
            # brakes. A joint not read this tick, or faulted, is held at its last command (never advanced
            # on a stale reading); only on_fault: torque_off stops the writes (an explicit, logged decision).
            live = reading.ok & ~self._faulted
            cmd = np.where(live, cmd, self._command)
            mask = np.isfinite(cmd)
            if mask.any():
                try:
                    result = self.bus.write_targets(np.where(mask, cmd, 0.0), mask, t0 + budget,
                                                    torque_ff=self._feedforward(self._present))
                except BusError as e:
                    result = WriteResult(np.full(self.n, np.nan), {i: f"bus error: {e}" for i in np.flatnonzero(mask)})
                written, write_errors, retries = result.written, result.errors, retries + result.retries
                self._command = np.where(mask, cmd, self._command)
                if result.hardware_error is not None:
                    new_faults += health.latch_hardware(result.hardware_error, write_errors, now)
            if self.mode == Mode.RAMPING and age is not None and np.all(
                    np.abs(desired - self._command)[~self._faulted] <= self.config.ramp_tolerance):
                self.mode = Mode.RUNNING
        failed = ~reading.ok & ~self._faulted
        failed[list(write_errors)] = True
        new_faults += health.count_failures(failed, {**reading.errors, **write_errors}, now)
        t2 = time.monotonic()
        self._io_ms.append((t2 - t0) * 1000.0)
        self.tick += 1
        errors = {self.names[i]: r for i, r in {**reading.errors, **write_errors}.items()}
        return TickReport(self.tick, self.mode, self._present.copy(), self._velocity.copy(), self._effort.copy(),
                          cmd, written, reading.ok.copy(), clipped, errors, new_faults, age, t1 - t0, t2 - t1,
                          retries, self._ff.copy(), grip_limited)

    def _enter_fault(self) -> None:
        if self.mode != Mode.FAULT:
            self._hold = np.where(np.isfinite(self._command), self._command, self._present)
            self.mode = Mode.FAULT
        if self.config.on_fault == "torque_off" and self.bus.torque_enabled:
            log.error("yam_driver: on_fault: torque_off: turning torque off on every motor (%s); the arm is not "
                      "held and may fall", "; ".join(map(str, self.health.faults)) or "fault")
            failures = self.bus.disable()
            for i, r in failures.items():
                log.error("yam_driver: torque off of %s failed: %s", self.names[i], r)

    def _desired(self, now: float) -> tuple[np.ndarray | None, np.ndarray, float | None, np.ndarray]:
        """(desired position or None for no write, speed limit, target age, clipped mask)."""
        clipped = np.zeros(self.n, bool)
        if self.mode == Mode.CONNECTED:
            return None, self._max_speed, None, clipped        # torque off: read only
        if self.mode == Mode.FAULT:
            if self.config.on_fault == "torque_off":
                return None, self._max_speed, None, clipped
            return self._hold, self._max_speed, None, clipped
        if self.mode == Mode.HOMING:
            if np.all(np.abs(self._home - self._command)[~self._faulted] <= self.config.ramp_tolerance):
                self._hold = self._home.copy()
                self.mode = Mode.HOLDING                       # arrived: hold the home pose
                log.info("yam_driver: at the home pose, holding")
            else:
                return self._home, self._max_speed * self.config.ramp_speed_scale, None, clipped
        with self._lock:
            targets, stamp = self._targets, self._target_stamp
        age = None if targets is None else max(0.0, now - stamp)
        ramp_speed = self._max_speed * self.config.ramp_speed_scale
        if targets is None:
            return self._hold, ramp_speed, None, clipped
        if age > self.config.watchdog_s:
            if self.mode != Mode.HOLDING:
                self._hold = np.where(np.isfinite(self._present), self._present, self._command)
                self._hold = np.clip(self._hold, self._lower, self._upper)
                log.warning("yam_driver: targets stale (%.3f s > %.3f s), holding", age, self.config.watchdog_s)
                self.mode = Mode.HOLDING
            return self._hold, self._max_speed, age, clipped
        if self.mode == Mode.HOLDING:
            self.mode = Mode.RAMPING
        clipped = (targets < self._lower) | (targets > self._upper)
        speed = ramp_speed if self.mode == Mode.RAMPING else self._max_speed
        return np.clip(targets, self._lower, self._upper), speed, age, clipped

    # --- loop ------------------------------------------------------------------------
    def run(self, duration_s: float | None = None, max_ticks: int | None = None,
            handle_signals: bool = True, rt_priority: int = 0) -> LoopStats:
        """The driver node's paced loop (`bus_thread.BusThread`: a thread of its own, deadlines on this
        driver's clock, resync after an overrun, SCHED_FIFO `rt_priority` where allowed; 0: normal
        scheduling) calling `step()` until duration/ticks/stop/signal. A tick that raises ends the run
        and is raised here (the node's thread holds the arm and goes on instead); always shuts down."""
        previous: dict[int, object] = {}
        if handle_signals and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                previous[sig] = signal.signal(sig, lambda s, _f: self.request_stop(signal.Signals(s).name))
        stats = LoopStats()
        self._stop.clear()
        self._stop_reason = ""
        try:
            if self.mode == Mode.IDLE:
                self.start()
            run = paced_run(self.step, self.config.rate_hz, self._stop, self.clock, rt_priority, duration_s, max_ticks,
                            self.config.log_every_s, lambda: self.mode.value)
            self._stop_reason = self._stop_reason or run.reason
            stats.ticks, stats.overruns, stats.sched_fifo = run.ticks, run.overruns, run.sched_fifo
            stats.achieved_rate_hz = run.ticks / run.elapsed_s if run.elapsed_s > 0 else 0.0
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            self.shutdown()
            stats.stop_reason = self._stop_reason or "exception"
            if self._io_ms:
                stats.io_p50_ms, stats.io_p99_ms = (float(v) for v in np.percentile(list(self._io_ms), [50, 99]))
        return stats

    def io_percentiles_ms(self) -> tuple[float, float]:
        """p50 and p99 of read + write time per tick over the last `stats_window` ticks."""
        if not self._io_ms:
            return float("nan"), float("nan")
        p50, p99 = np.percentile(list(self._io_ms), [50, 99])
        return float(p50), float(p99)
