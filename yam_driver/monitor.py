"""The driver node's plain-Python core: its bus thread, what it follows, what it reports.

`DriverMonitor` owns the state the node's callbacks share, under one lock: the driver, the
lifecycle's `active`, the e-stop latch, the target gate (`CommandGate`) and its current refusal,
and the tick bookkeeping (achieved rate over the last second, the newest tick error).

The bus I/O runs in a thread of its own (`bus_thread.BusThread`, the one paced loop of the driver:
`YamDriver.run` and so `vam-stack bench driver` run it too), at SCHED_FIFO `BUS_RT_PRIORITY` where
the OS allows it: no subscription callback, diagnostics or junk message in the executor delays a
tick; targets arrive in the executor and are handed over under the lock (`YamDriver.set_targets`).
A tick that raises never ends the node's thread: `tick_failed` holds the arm and /diagnostics say
so until a tick works.

Fault detection reads in three files: `faults.py` (the per-joint checks: failed exchanges,
hardware flags, torque off, tracking, implausible readings), `driver.py` (`_step`: they run every
tick; what a fault does to the commands) and this file (what the node logs and reports).
"""
from __future__ import annotations

import threading
import time
from typing import Callable

import numpy as np

from vam_stack.arrivals import ArrivalStats

from .bus_thread import BUS_RT_PRIORITY, STOP_TIMEOUT_S, BusThread
from .command_gate import CommandGate
from .config import DriverConfig
from .driver import YamDriver
from yam_driver.faults import Mode, TickReport
from .emulators import EmulatedRig
from .emulators.process import EmulatedRigProcess

PROCESS_RT_PRIORITY = 45   # the node's other threads (executor, middleware): a thread holding the GIL the bus
#   thread waits for is never preempted by ordinary work (vam_stack/realtime.py; 0 stalled the bus thread 74 ms
#   on a loaded 2-core machine, and the write that followed went out after its deadline)


def effort_summary(d: YamDriver) -> dict[str, float | str]:
    """What /diagnostics shows of the torques the driver adds: the gravity feed-forward of the last
    write (Nm, per joint), the joints without one, and which grippers are held to their force limit."""
    if d.gravity is None:
        out: dict[str, float | str] = {"gravity_ff": "none (bus without feed-forward)"}
    elif not d.gravity.enabled:
        out = {"gravity_ff": "OFF (gravity_factor all zeros: the arm sags)"}
    else:
        out = {f"gravity_ff_{n}_nm": round(float(v), 3) for n, v, g in zip(d.names, d._ff, d._gripper) if not g}
        if d.gravity.off_joints():
            out["gravity_ff_off"] = ", ".join(d.gravity.off_joints()) + " (gravity_factor 0: sags)"
    limited = [n for n, b in zip(d.names, d.gripper_limit.blocked) if b]
    out["gripper_force_limited"] = ", ".join(limited) or "none"
    return out


class DriverMonitor:
    """The driver node's shared state and its decisions (module docstring)."""

    def __init__(self, config: DriverConfig, log, refused):
        """`log`: the node's logger (info/warning/error; rclpy's allows one severity per call site);
        `refused`: its rate-limited log of refused targets (`vam_stack.refusals.RefusalLog`)."""
        self.cfg, self.names, self.log, self.refused = config, config.joint_names, log, refused
        self.last_error = ""                        # the newest failed transition's reason (autostart quotes it)
        self.reset_service = "/yam_driver/reset_faults"   # the node sets its resolved name
        self.hw_id = f"{config.bus}: " + ", ".join(dict.fromkeys(a.port for a in config.arms))  # "damiao: can_left, .."
        self.lock = threading.Lock()                # targets, e-stop, home and lifecycle run in different callbacks
        self.driver: YamDriver | None = None
        self.rig: EmulatedRig | EmulatedRigProcess | None = None
        self.bus_thread: BusThread | None = None
        self.active = False                         # following targets (the lifecycle's active state)
        self.estopped = False
        self.gate = CommandGate(max_age_s=config.watchdog_s)
        self.refusal: str | None = None             # why the target stream is not followed now (None: followed)
        self.position: np.ndarray | None = None     # latest measured position (all joints valid)
        self.tick_error: str | None = None          # the newest tick that raised (diagnostics), None once ticks work
        self._ticks: list[float] = []               # tick times over the last second (achieved rate)
        self.targets_in = ArrivalStats(config.rate_hz)   # policy -> driver: latency, period jitter, missed ticks

    # --- lifecycle --------------------------------------------------------------------------
    def _failed(self, what: str, e: Exception) -> bool:
        self.last_error = f"{type(e).__name__}: {e}"
        self.log.error(f"{what} failed: {self.last_error}")
        return False

    def connect(self, given: YamDriver | None, emulate: bool, gravity: bool, tick: Callable[[], None],
                rt_priority: int = BUS_RT_PRIORITY) -> bool:
        """Connect (torque off) the `given` driver, or one on the configured bus, or (`emulate`) on
        emulated motors (Damiao: in a process of their own, with `gravity`), then, for a bus of its own,
        start the bus thread (SCHED_FIFO `rt_priority`) calling `tick` (the node's guarded tick; a
        `given` driver's node calls it). False: logged, released."""
        try:
            cfg = self.cfg
            if given is None and emulate:
                self.rig = EmulatedRigProcess(cfg, gravity=gravity) if cfg.bus == "damiao" else EmulatedRig(cfg)
                cfg = self.rig.config
            self.driver = given or YamDriver(cfg)
            self.driver.connect()
        except Exception as e:
            self.release()
            return self._failed("configure", e)
        if given is None:     # a simulator's bus is stepped in the simulator's time: its node ticks on a ROS timer
            self.bus_thread = BusThread(self.cfg.rate_hz, tick, lambda e: None, rt_priority).start()
        where = " (emulated)" if self.rig else (f" on {type(self.driver.bus).__name__}" if given else "")
        self.log.info(f"{self.cfg.bus} driver connected{where}: {len(self.names)} motors, torque off")
        return True

    def enable(self) -> bool:
        """Torque on with the goal at the measured position, then follow. False: logged."""
        was_fault = self.driver.mode == Mode.FAULT
        try:
            self.driver.enable()
        except Exception as e:
            return self._failed(f"activate ({self.arm_state()})", e)
        self.set_active(True)
        self.log.info(f"{self.cfg.bus} driver at {self.cfg.rate_hz} Hz: torque on, "
                      + ("faults reset, holding the measured pose until a fresh target" if was_fault
                         else "following targets"))
        return True

    def arm_state(self) -> str:
        """What the arm is doing now, in words (for a message that must not guess)."""
        d = self.driver
        if d is None or d.mode in (Mode.IDLE, Mode.STOPPED):
            return "not connected"
        if not d.bus.torque_enabled:
            return "torque off, holding nothing"
        if d.mode == Mode.FAULT:
            return f"torque on, in fault: every motor held at its last command ({'; '.join(map(str, d.faults))})"
        return f"torque on, {d.mode.value}"

    def reset_faults(self) -> tuple[bool, str]:
        """~/reset_faults, the operator's reset (`YamDriver.clear_faults`): (success, what the arm does now).
        Never turns torque off; refused while not connected; a reset that fails leaves the fault latched."""
        with self.lock:
            d = self.driver
            if d is None or d.mode in (Mode.IDLE, Mode.STOPPED):
                ok, message = False, "the driver is not connected (configure it first)"
            else:
                try:
                    ok, message = True, d.clear_faults()
                except Exception as e:   # BusError: the bus is still down, a motor still in error
                    ok, message = False, f"fault reset failed: {type(e).__name__}: {e}; {self.arm_state()}"
        if ok:
            self.log.warning(f"reset_faults: {message}")
        else:
            self.log.error(f"reset_faults refused: {message}")
        return ok, message

    def set_active(self, active: bool) -> None:
        with self.lock:
            self.active = active
            if not active and self.driver is not None:
                self.driver.hold()

    def on_error(self) -> None:
        """A lifecycle transition raised (an internal error, not an operator's request): hold the
        measured position with torque on, stop following, say so."""
        self.set_active(False)
        torque = self.driver is not None and bool(self.driver.bus.torque_enabled)
        self.log.error(f"a lifecycle transition failed ({self.last_error or 'it raised'}): holding, torque "
                       f"{'ON' if torque else 'off'}, targets ignored; the node is finalized: stop it (Ctrl-C turns "
                       f"torque off as configured) and start it again")

    def release(self, torque_off: bool = True) -> None:
        """Stop the bus thread, hold, torque off as configured (`torque_off` false: left on,
        holding), disconnect; stop the emulators (their state stays readable). Idempotent."""
        with self.lock:
            self.active = False
        if self.bus_thread is not None and not self.bus_thread.stop():
            self.log.error(f"the bus thread is still in a tick after {STOP_TIMEOUT_S} s; shutting the driver down")
        self.bus_thread = None
        if self.driver is not None:
            self.driver.shutdown(torque_off=None if torque_off else False)
        if self.rig is not None:
            self.rig.stop()

    def say_exit(self, internal_error: bool) -> None:
        """After `release` on the way out: what happened to the arm."""
        d = self.driver
        if d is None:
            return
        if internal_error:
            torque = ("torque left ON, holding (an internal error, not an operator, stopped the driver: torque off "
                      "would drop the arm; power the motors down or restart the driver)")
        else:
            torque = "torque off" if d.config.torque_off_on_exit else "torque left on (torque_off_on_exit: false)"
        if d.shutdown_errors:
            self.log.error(f"driver shut down with problems ({torque}): {'; '.join(d.shutdown_errors)}")
        else:
            self.log.info(f"driver shut down: arm held, {torque}")

    # --- the bus thread -------------------------------------------------------------------
    def tick(self) -> TickReport | None:
        """One driver step; None once shut down (cleanup, destroy_node) or before connect."""
        driver = self.driver
        report = None if driver is None else driver.try_step()
        self.tick_error = None
        if report is None:
            return None
        now = time.monotonic()
        self._ticks = [t for t in self._ticks if t > now - 1.0] + [now]
        for f in report.new_faults:
            self.log.error(f"fault latched: {f}")
        if np.isfinite(report.position).all():
            self.position = report.position
        return report

    def tick_failed(self, reason: str) -> None:
        """A tick raised (an internal error): hold (the next tick that works holds the measured
        position; until then the motors keep their last goal, torque on), and say so until a tick works."""
        self.tick_error = reason
        if self.driver is not None:
            self.driver.hold()

    def rate_hz(self) -> float:
        t = self._ticks
        return (len(t) - 1) / (t[-1] - t[0]) if len(t) > 1 and t[-1] > t[0] else 0.0

    # --- commands (each under `lock`) ------------------------------------------------------------
    def follow(self, parse: Callable[[], object], now_s: float, stamp_s: float, publishers: Callable[[], int]) -> None:
        """A target message stamped `stamp_s` (`parse()` gives it as `msgs.joint_state_to_numpy`
        does): followed, or refused (a rate-limited line: a refusal of a new kind at once)."""
        self.targets_in.add(now_s, stamp_s)
        with self.lock:   # an e-stop cannot land between the checks and the set
            if self.estopped or not self.active or self.driver is None:
                return
            try:
                refusal, say = self._follow(parse(), now_s, publishers)
            except ValueError as e:  # MessageError is a ValueError too
                refusal, say = f"{e} (holding)", True
        if refusal is not None and say:
            self.refused.refuse(refusal)
        elif say:
            self.log.info("joint targets followed again", throttle_duration_sec=1.0)

    def _follow(self, js, now_s: float, publishers: Callable[[], int]) -> tuple[str | None, bool]:
        missing = [n for n in self.names if n not in js.names]
        if missing:
            raise ValueError(f"targets lack joints {missing} (got {js.names})")
        target = np.asarray(js.position, np.float64)[[js.names.index(n) for n in self.names]]
        bad = ~np.isfinite(target)
        if bad.any():    # the driver core refuses them too; refused here, before the gate counts the stamp
            raise ValueError(f"non-finite targets { {self.names[i]: float(target[i]) for i in np.flatnonzero(bad)} }")
        before = self.gate.last_reason
        refusal = self.gate.check(js.stamp_s, js.frame_id, now_s, publishers())
        if refusal is not None:
            if self.gate.last_reason == "publishers":
                self.driver.hold()                   # hold where the arm is while a second publisher exists
            say = self.refusal is None or self.gate.last_reason != before
            self.refusal = refusal
            return refusal, say
        self.driver.set_targets(target)              # the core's own checks raise ValueError
        was, self.refusal = self.refusal, None
        return None, was is not None

    def latch_estop(self, on: bool) -> None:
        """E-stop on: hold where the arm is now, not where it was heading; off: follow again."""
        with self.lock:
            if on == self.estopped:
                return
            self.estopped = on
            if on and self.driver is not None and self.active:
                self.driver.hold()
        self.log.warning("e-stop: holding, targets ignored" if on else "e-stop released")

    def estop_answer(self, on: bool) -> str:
        """The /vam/estop service (vam_stack/estop.py): latch or release, and what the arm now does."""
        self.latch_estop(on)
        with self.lock:
            if not on:
                return "e-stop released: yam_driver follows joint targets again"
            if self.driver is not None and self.active:
                return "e-stop latched: yam_driver holds the arm where it is (torque on), targets ignored"
            return "e-stop latched: yam_driver ignores targets (not active: nothing is driven)"

    def home(self) -> tuple[bool, str]:
        """~/home: (accepted, what the operator is told), logged."""
        with self.lock:
            ok, message = self._home(self.cfg.home_pose)
        if ok:                        # one severity per call site (rclpy's logger refuses a change)
            self.log.info(f"home: {message}")
        else:
            self.log.warning(f"home refused: {message}")
        return ok, message

    def _home(self, pose) -> tuple[bool, str]:
        if not self.active or self.driver is None:
            return False, "home needs the driver active (torque on)"
        if self.estopped:
            return False, "e-stop latched: release it first"
        if self.driver.mode == Mode.FAULT:
            return False, (f"a fault is latched ({'; '.join(map(str, self.driver.faults))}): reset it first "
                           f"(ros2 service call {self.reset_service} std_srvs/srv/Trigger)")
        if pose is None:
            return False, "no home_pose in the driver config"
        try:
            self.driver.home(pose)
        except (ValueError, RuntimeError) as e:
            return False, str(e)
        speed = self.cfg.ramp_speed_scale * max(j.max_speed for _, j in self.cfg.joints)
        return True, f"moving to the home pose at <= {speed:.2f} rad/s"

    # --- /diagnostics -----------------------------------------------------------------------
    def status(self, lifecycle_state: str, refused_messages: int) -> dict:
        """The driver's /diagnostics status (`vam_stack.ros.diagnostics` form)."""
        d = self.driver
        if d is None or d.mode in (Mode.IDLE, Mode.STOPPED):
            return {"task": "driver", "level": "stale", "message": f"{lifecycle_state}: not connected",
                    "hardware_id": self.hw_id, "values": {"lifecycle_state": lifecycle_state, "estop": self.estopped}}
        p50, p99 = d.io_percentiles_ms()
        level = {Mode.FAULT: "error", Mode.STOPPED: "stale", Mode.HOLDING: "warn"}.get(d.mode, "ok")
        level = "warn" if self.estopped and level == "ok" else level
        message = "; ".join(map(str, d.faults)) or d.mode.value
        if d.mode == Mode.FAULT:   # what the arm does, and the way back
            held = ("torque off (on_fault: torque_off)" if not d.bus.torque_enabled else
                    "torque on, every motor held at its last command")
            message = f"fault, {held}; once the cause is gone: ros2 service call {self.reset_service} " \
                      f"std_srvs/srv/Trigger: {message}"
        if self.refusal is not None:  # the target stream is not being followed
            level = "error" if self.gate.last_reason == "publishers" else ("warn" if level == "ok" else level)
            message = f"targets refused: {self.refusal}"
        if self.tick_error is not None:
            level, message = "error", f"tick failed (holding): {self.tick_error}"
        values = {"lifecycle_state": lifecycle_state, "mode": d.mode.value, "torque": bool(d.bus.torque_enabled),
                  "ticks": d.tick, "rate_hz": self.rate_hz(), "io_p50_ms": p50, "io_p99_ms": p99,
                  "estop": self.estopped, "faults": "; ".join(map(str, d.faults)) or "none",
                  **{f"refused_{k}": v for k, v in self.gate.counts.items()}, "refused_messages": refused_messages,
                  **effort_summary(d), **self.targets_in.summary("targets_")}
        return {"task": "driver", "level": level, "message": message, "hardware_id": self.hw_id, "values": values}
