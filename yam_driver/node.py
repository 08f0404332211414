"""yam_driver node (managed, lifecycle): /vam/joint_targets in; /joint_states at the bus rate and
/diagnostics out; service ~/home.

Lifecycle: configure = connect and check every motor and limit (torque off; /joint_states flows);
activate = torque on with the goal at the measured position, ramp in, then follow the filtered
stream; deactivate = hold where the arm is (torque on, targets ignored); cleanup = hold, torque
off, disconnect; shutdown safe from every state. `autostart` (default true) configures and
activates at start-up, so `ros2 launch` needs no lifecycle manager. ~/home (std_srvs/Trigger):
drive to the config's `home_pose` at the ramp speed, then hold (only while active).

One `YamDriver` (plain Python) does the work; each timer tick is one driver step (read every
joint, update health, slew-limited write). Targets are matched by joint name; a message with
a missing joint or a non-finite value is rejected with a logged error, and the driver's
watchdog holds the arm when targets stop or go stale. Only the policy node's safety-filtered
stream is followed (`command_gate.CommandGate`: one publisher, the filter's frame_id, a fresh,
increasing stamp); a second publisher on the topic holds the arm where it is. At start-up the
driver's limits are checked to sit inside the safety filter's (`vam_stack.robot.check_layers`).
/vam/estop true: the measured position
becomes the target at once and later targets are ignored (the watchdog then keeps holding)
until false. `use_emulator` runs the same driver against emulated buses (yam_driver.emulators).

No message, service call or timer tick ends the node (a YAM has no brakes): a target with a
missing joint or a NaN/inf value, a refused stamp or source, a malformed e-stop, an invalid
lifecycle transition (`cleanup` while active: ChangeState answers false, the state stays) and a
failing ~/home are refused with a rate-limited log line (the first reason of each second in full,
then a count; `vam_stack.refusals`) and the arm holds (the last accepted target, then the
watchdog's hold). A tick that raises is logged the same way, the driver holds, and ticks go on.
Torque goes off only when an operator asks: the cleanup and shutdown transitions, and SIGINT /
SIGTERM (Ctrl-C, launch's stop) with `torque_off_on_exit` (or a motor fault with
`on_fault: torque_off`). An exception that ends the process anyway (`ros.spin_nodes` calls
`hold_on_exit`) and a transition that raises (on_error) hold the measured position with torque
ON, and the log says so; after on_error the node is finalized and keeps holding until stopped.
"""
from __future__ import annotations

import threading
import time

import numpy as np
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.lifecycle import LifecycleNode, TransitionCallbackReturn
from std_srvs.srv import Trigger

from vam_stack import msgs, ros
from vam_stack.arrivals import ArrivalStats
from vam_stack.robot import check_layers
from yam_driver.command_gate import CommandGate
from yam_driver.config import default_config_path, load_config
from yam_driver.driver import Mode, YamDriver

P = ros.Param
PARAMS = (
    P("config_file", "", "driver YAML (section yam_driver); empty = the shipped file for `bus`"),
    P("bus", "damiao", "bus kind when config_file is empty", choices=("damiao", "dynamixel")),
    P("use_emulator", False, "drive emulated motors instead of hardware (demos, CI)"),
    P("emulated_gravity", False, "use_emulator: the emulated Damiao arm carries its weight (the model x the file's "
                                 "gravity_factor; it sags without feed-forward). Off by default: the emulator's "
                                 "quasi-static load with 30 Hz feed-forward limit-cycles at the wrists (~0.05 rad)"),
    P("safety_config", "", "the policy node's safety limits YAML the driver's limits must sit inside; "
                           "empty = config/yam_safety.yaml"),
    P("autostart", True, "configure and activate at start-up (ros2 launch without a lifecycle manager); false: "
                         "wait for the lifecycle services (configure = connect, torque off; activate = torque on)"),
    ros.DIAGNOSTICS_PERIOD,
)


class YamDriverNode(ros.SafeLifecycle, LifecycleNode):
    def __init__(self, driver: YamDriver | None = None, **node_kwargs):
        """`driver`: an unstarted driver on a bus made elsewhere (the MuJoCo simulator's,
        vam_sim/yam_mujoco/node.py) instead of the one `config_file` and `bus` describe."""
        super().__init__("yam_driver", **node_kwargs)
        try:
            self._build(driver)
        except BaseException:       # a node that fails to start leaves nothing behind (its entities, the bus)
            self.destroy_node()
            raise

    def _build(self, driver: YamDriver | None) -> None:
        self.driver: YamDriver | None = None
        self.rig = None
        self._tick_timer = None
        self._cmd_lock = threading.Lock()  # e-stop and targets run in different callback groups
        self.active = False                       # following targets (the lifecycle's active state)
        p = self.p = ros.declare(self, PARAMS)
        if driver is not None and p["use_emulator"]:
            raise ValueError("yam_driver: use_emulator cannot be combined with a given driver (the simulator's bus)")
        cfg = driver.config if driver is not None else load_config(p["config_file"] or default_config_path(p["bus"]))
        from vam_control.safety import load_safety_config
        check_layers(cfg, load_safety_config(ros.config_path(p["safety_config"], "yam_safety.yaml")))
        self.cfg, self._given = cfg, driver
        self._hw_id = f"{cfg.bus}: " + ", ".join(dict.fromkeys(a.port for a in cfg.arms))   # e.g. "damiao: can_left, can_right"
        self.gate = CommandGate(max_age_s=cfg.watchdog_s)
        self._refusal: str | None = None
        self.names = cfg.joint_names
        self.estopped = False
        self._position: np.ndarray | None = None  # latest measured position (all joints valid)
        self._ticks: list[float] = []
        self.pub = {k: ros.publisher(self, k) for k in ("joint_states", "diagnostics")}
        self.targets_in = ArrivalStats(cfg.rate_hz)   # policy -> driver: latency, period jitter, missed ticks
        self._refused = ros.refusal_log(self, "joint targets")   # one line a second, then a count
        self._tick_error: str | None = None        # the newest tick that raised (diagnostics), None once ticks work
        sub = ros.subscription(self, "joint_targets", self._on_targets)
        self._targets_topic = sub.topic_name  # as resolved (and remapped) for this node
        self.estop_group = MutuallyExclusiveCallbackGroup()   # not behind another group's callback if multi-threaded
        ros.subscription(self, "estop", self._on_estop, self.estop_group)
        ros.service(self, Trigger, "~/home", self._on_home)
        ros.timer(self, p[ros.DIAGNOSTICS_PERIOD.name], self._publish_diagnostics, "diagnostics")
        if p["autostart"]:     # `ros2 launch` without a lifecycle manager: configure and activate now
            self.autostart(lambda step: RuntimeError(f"yam_driver: autostart could not {step} the driver: "
                                                     f"{self._last_error}"))

    # --- lifecycle ------------------------------------------------------------------------
    _last_error = ""

    def on_configure(self, state) -> TransitionCallbackReturn:
        """Connect and check every motor and limit; torque stays off; /joint_states flows."""
        try:
            cfg = self.cfg
            if self._given is not None:
                self.driver = self._given
            else:
                if self.p["use_emulator"]:
                    from yam_driver.emulators import EmulatedRig
                    from yam_driver.gravity import gravity_load

                    # with emulated_gravity, emulated Damiao motors carry the weight of the arm the driver file
                    # describes (the model x its gravity_factor), as a YAM's do: without feed-forward they sag
                    load = gravity_load(cfg, as_configured=True) \
                        if cfg.bus == "damiao" and self.p["emulated_gravity"] else None
                    self.rig = EmulatedRig(cfg, load_fn=load)
                    cfg = self.rig.config
                self.driver = YamDriver(cfg)
            self.driver.connect()
        except Exception as e:
            self._last_error = f"{type(e).__name__}: {e}"
            self.get_logger().error(f"configure failed: {self._last_error}")
            self._release()
            return TransitionCallbackReturn.FAILURE
        self._tick_timer = ros.timer(self, self.cfg.period_s, self._tick, "driver tick", on_error=self._tick_failed)
        where = " (emulated)" if self.rig else (f" on {type(self.driver.bus).__name__}" if self._given else "")
        self.get_logger().info(f"{self.cfg.bus} driver connected{where}: {len(self.names)} motors, torque off")
        return TransitionCallbackReturn.SUCCESS

    def on_activate(self, state) -> TransitionCallbackReturn:
        """Torque on with the goal at the measured position, then ramp in to the filtered stream."""
        try:
            self.driver.enable()
        except Exception as e:
            self._last_error = f"{type(e).__name__}: {e}"
            self.get_logger().error(f"activate failed (torque off, holding nothing): {self._last_error}")
            return TransitionCallbackReturn.FAILURE
        with self._cmd_lock:
            self.active = True
        self.get_logger().info(f"{self.cfg.bus} driver at {self.cfg.rate_hz} Hz: torque on, following targets")
        return super().on_activate(state)

    def on_deactivate(self, state) -> TransitionCallbackReturn:
        """Hold where the arm is, torque on; targets are ignored until activated again."""
        with self._cmd_lock:
            self.active = False
            self.driver.hold()
        self.get_logger().info("deactivated: holding, targets ignored")
        return super().on_deactivate(state)

    def on_cleanup(self, state) -> TransitionCallbackReturn:
        """Hold, torque off (as configured), disconnect."""
        self._release()
        self.get_logger().info("cleaned up: torque off, disconnected")
        return TransitionCallbackReturn.SUCCESS

    def on_error(self, state) -> TransitionCallbackReturn:
        """A transition raised (an internal error, not an operator's request): hold the measured
        position with torque on and stop following targets; FAILURE finalizes the node, which keeps
        ticking (holding) until the operator stops it (SIGINT: torque off as configured)."""
        with self._cmd_lock:
            self.active = False
        if self.driver is not None:
            self.driver.hold()
        torque = bool(self.driver is not None and self.driver.bus.torque_enabled)
        self.get_logger().error(f"a lifecycle transition failed ({self._last_error or 'it raised'}): holding, "
                                f"torque {'ON' if torque else 'off'}, targets ignored; the node is finalized: "
                                f"stop it (Ctrl-C turns torque off as configured) and start it again")
        return TransitionCallbackReturn.FAILURE


    def _on_home(self, request, response):
        """~/home: drive to the configured home pose at the ramp speed (only while active)."""
        with self._cmd_lock:
            if not self.active or self.driver is None:
                response.success, response.message = False, "home needs the driver active (torque on)"
            elif self.estopped:
                response.success, response.message = False, "e-stop latched: release it first"
            elif self.cfg.home_pose is None:
                response.success, response.message = False, "no home_pose in the driver config"
            else:
                try:
                    self.driver.home(self.cfg.home_pose)
                    speed = self.cfg.ramp_speed_scale * max(j.max_speed for _, j in self.cfg.joints)
                    response.success, response.message = True, f"moving to the home pose at <= {speed:.2f} rad/s"
                except (ValueError, RuntimeError) as e:
                    response.success, response.message = False, str(e)
        if response.success:          # one severity per call site (rclpy's logger refuses a change)
            self.get_logger().info(f"home: {response.message}")
        else:
            self.get_logger().warning(f"home refused: {response.message}")
        return response

    def _on_targets(self, msg) -> None:
        stamp = msg.header.stamp
        self.targets_in.add(self.get_clock().now().nanoseconds * 1e-9, stamp.sec + stamp.nanosec * 1e-9)
        with self._cmd_lock:   # an e-stop cannot land between the check and the set below
            self._follow(msg)

    def _follow(self, msg) -> None:
        if self.estopped or not self.active:
            return
        try:
            js = msgs.joint_state_to_numpy(ros.from_ros(msg, "sensor_msgs/msg/JointState"))
            missing = [n for n in self.names if n not in js.names]
            if missing:
                raise ValueError(f"targets lack joints {missing} (got {js.names})")
            target = js.position[[js.names.index(n) for n in self.names]]
            bad = ~np.isfinite(target)
            if bad.any():    # the driver core refuses them too; refused here, before the gate counts the stamp
                raise ValueError(f"non-finite targets { {self.names[i]: float(target[i]) for i in np.flatnonzero(bad)} }")
        except ValueError as e:  # MessageError is a ValueError too
            self._refused.refuse(f"{e} (holding)")
            return
        now = self.get_clock().now().nanoseconds * 1e-9
        before = self.gate.last_reason
        refusal = self.gate.check(js.stamp_s, js.frame_id, now, self.count_publishers(self._targets_topic))
        if refusal is not None:
            if self.gate.last_reason == "publishers":
                self.driver.hold()                       # hold where the arm is while a second publisher exists
            if self._refusal is None or self.gate.last_reason != before:   # a new kind: said at once (rate-limited)
                self._refused.refuse(refusal)
            self._refusal = refusal
            return
        try:
            self.driver.set_targets(target)
        except ValueError as e:                          # the core's own checks (shape, values): refused, holding
            self._refused.refuse(f"{e} (holding)")
            return
        if self._refusal is not None:
            self.get_logger().info("joint targets followed again", throttle_duration_sec=1.0)
            self._refusal = None

    def _on_estop(self, msg) -> None:
        with self._cmd_lock:
            self._latch(bool(msg.data))

    def _latch(self, on: bool) -> None:
        if on == self.estopped:
            return
        self.estopped = on
        if self.estopped and self.driver is not None and self.active:
            self.driver.hold()                        # hold where the arm is now, not where it was heading
        self.get_logger().warning("e-stop: holding, targets ignored" if self.estopped else "e-stop released")

    def _tick(self) -> None:
        driver = self.driver
        report = None if driver is None else driver.try_step()   # None once shut down (cleanup, destroy_node)
        self._tick_error = None
        if report is None:
            return
        now = time.monotonic()
        self._ticks = [t for t in self._ticks if t > now - 1.0] + [now]  # achieved rate over 1 s
        for f in report.new_faults:
            self.get_logger().error(f"fault latched: {f}")
        if np.isfinite(report.position).all():
            self._position = report.position
            vel = np.nan_to_num(report.velocity)
            eff = np.nan_to_num(report.effort)
            self.pub["joint_states"].publish(ros.to_ros(msgs.joint_state_msg(
                self.names, report.position, vel, eff, stamp_s=ros.stamp(self))))

    def _tick_failed(self, e: Exception) -> None:
        """A tick raised (an internal error; the guard logged it, rate-limited): never an exit, the arm
        would lose its driver. Hold (the next tick that works holds the measured position; until then
        the motors keep their last goal, torque on) and say so on /diagnostics until a tick works."""
        from vam_stack.refusals import describe

        self._tick_error = describe(e)
        if self.driver is not None:
            self.driver.hold()

    def _publish_diagnostics(self) -> None:
        ros.flush_refusals(self)
        d = self.driver
        state = self._state_machine.current_state[1] if hasattr(self, "_state_machine") else "unknown"
        if d is None or d.mode in (Mode.IDLE, Mode.STOPPED):
            self.pub["diagnostics"].publish(ros.diagnostics(self, [{
                "task": "driver", "level": "stale", "message": f"{state}: not connected", "hardware_id": self._hw_id,
                "values": {"lifecycle_state": state, "estop": self.estopped}}]))
            return
        p50, p99 = d.io_percentiles_ms()
        rate = (len(self._ticks) - 1) / (self._ticks[-1] - self._ticks[0]) if len(self._ticks) > 1 else 0.0
        level = {Mode.FAULT: "error", Mode.STOPPED: "stale", Mode.HOLDING: "warn"}.get(d.mode, "ok")
        level = "warn" if self.estopped and level == "ok" else level
        message = "; ".join(map(str, d.faults)) or d.mode.value
        if self._refusal is not None:  # the target stream is not being followed
            level = "error" if self.gate.last_reason == "publishers" else ("warn" if level == "ok" else level)
            message = f"targets refused: {self._refusal}"
        if self._tick_error is not None:
            level, message = "error", f"tick failed (holding): {self._tick_error}"
        values = {"lifecycle_state": state, "mode": d.mode.value, "torque": bool(d.bus.torque_enabled),
                  "ticks": d.tick, "rate_hz": rate, "io_p50_ms": p50, "io_p99_ms": p99,
                  "estop": self.estopped, "faults": "; ".join(map(str, d.faults)) or "none",
                  **{f"refused_{k}": v for k, v in self.gate.counts.items()}, "refused_messages": self._refused.total,
                  **d.effort_summary(),
                  **self.targets_in.summary("targets_")}
        self.pub["diagnostics"].publish(ros.diagnostics(self, [{"task": "driver", "level": level, "message": message,
                                                               "hardware_id": self._hw_id, "values": values}]))

    def _release(self, torque_off: bool = True) -> None:
        """Hold, torque off as configured (`torque_off` false: left on, holding), disconnect; stop the
        tick timer and the emulators. Idempotent."""
        with self._cmd_lock:
            self.active = False
        if self.driver is not None:
            # the core's shutdown holds the measured position, then disables torque as configured, or,
            # on an exit no operator asked for, leaves the motors powered and holding
            self.driver.shutdown(torque_off=None if torque_off else False)
        if self._tick_timer is not None:
            self.destroy_timer(self._tick_timer)
            self._tick_timer = None
        if self.rig is not None:
            self.rig.stop()                   # (kept: tests read the emulators' state after a stop)

    def destroy_node(self) -> None:
        """Safe state first, then the ROS entities. The operator's stop (SIGINT/SIGTERM, a direct
        call): hold, torque off as configured. An internal error (`hold_on_exit`, set by
        `ros.spin_nodes`): hold with torque ON (a YAM has no brakes), and say so."""
        reason = getattr(self, "_exit_hold", None)
        self._release(torque_off=reason is None)
        d = self.driver
        if d is None:
            super().destroy_node()
            return
        if reason is not None:
            torque = "torque left ON, holding (an internal error, not an operator, stopped the driver: torque off " \
                     "would drop the arm; power the motors down or restart the driver)"
        elif d.config.torque_off_on_exit:
            torque = "torque off"
        else:
            torque = "torque left on (torque_off_on_exit: false)"
        if d.shutdown_errors:
            self.get_logger().error(f"driver shut down with problems ({torque}): {'; '.join(d.shutdown_errors)}")
        else:
            self.get_logger().info(f"driver shut down: arm held, {torque}")
        super().destroy_node()


def main(args=None) -> None:
    ros.spin_node(YamDriverNode, args)


if __name__ == "__main__":
    main()
