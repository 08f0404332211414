"""yam_driver node (managed, lifecycle): /vam/joint_targets in; /joint_states at the bus rate and
/diagnostics out; services ~/home and ~/reset_faults (the operator's reset after a fault: torque
never off, the measured pose held; activate from a fault does the same). Parameters and wiring only: `monitor.DriverMonitor` holds what is
followed and reported and runs the bus I/O in a deadline-paced thread of its own (no executor
callback delays a tick), over one `YamDriver` (driver.py). configure = connect, check every motor
and limit (torque off); activate = torque on, ramp in, follow the safety filter's stream
(`command_gate`); deactivate = hold; cleanup = hold, torque off, disconnect. `autostart`: configure
and activate at start-up. /vam/estop true holds and ignores targets until false. `use_emulator`:
emulated motors (Damiao: in a process of their own, `emulators.process`). No message, service call
or tick ends the node (a YAM has no brakes): refused with a rate-limited log line, the arm holds;
torque goes off only on an operator's cleanup/shutdown/SIGINT (`torque_off_on_exit`) or a motor
fault with `on_fault: torque_off`; an internal error holds with torque ON."""
from __future__ import annotations

from vam_stack.process_exit import quiet_stop_while_importing

quiet_stop_while_importing("yam_driver")   # before the heavy imports below

import dataclasses

import numpy as np
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.lifecycle import LifecycleNode, TransitionCallbackReturn
from std_srvs.srv import Trigger

from vam_control.safety import load_safety_config
from vam_stack import msgs, rclpy_msgs, refusals, ros
from vam_stack.estop import EstopService
from vam_stack.refusals import describe
from vam_stack.robot import check_layers
from yam_driver.config import default_config_path, load_config
from yam_driver.driver import YamDriver
from yam_driver.bus_thread import BUS_RT_PRIORITY
from yam_driver.monitor import PROCESS_RT_PRIORITY, DriverMonitor

P = ros.Param
PARAMS = (
    P("config_file", "", "driver YAML (section yam_driver); empty = the shipped file for `bus`"),
    P("bus", "damiao", "bus kind when config_file is empty", choices=("damiao", "dynamixel")),
    P("use_emulator", False, "drive emulated motors instead of hardware (demos, CI)"),
    P("emulated_gravity", False, "use_emulator: the emulated Damiao arm carries its weight (it sags without feed-"
                                 "forward); off: its quasi-static load limit-cycles at the wrists (~0.05 rad)"),
    P("safety_config", "", "safety limits YAML the driver's limits must sit inside; empty: config/yam_safety.yaml"),
    P("autostart", True, "configure and activate at start-up (ros2 launch without a lifecycle manager); false: "
                         "wait for the lifecycle services (configure = connect, torque off; activate = torque on)"),
    P("rt_priority", BUS_RT_PRIORITY, "SCHED_FIFO priority of the bus thread (every motor read and written each "
                                      "tick), 0 = normal scheduling", range=(0, 99)),
    ros.DIAGNOSTICS_PERIOD,
)
OWN_BUS_PARAMS = (dataclasses.replace(ros.PROCESS_RT_PRIORITY, default=PROCESS_RT_PRIORITY),)   # not a simulator's


class YamDriverNode(ros.SafeLifecycle, LifecycleNode):
    def __init__(self, driver: YamDriver | None = None, **node_kwargs):
        """`driver`: an unstarted driver on a bus made elsewhere (vam_sim/yam_mujoco/node.py)."""
        super().__init__("yam_driver", **node_kwargs)
        try:
            self._build(driver)
        except BaseException:       # a node that fails to start leaves nothing behind (its entities, the bus)
            self.destroy_node()
            raise

    def _build(self, driver: YamDriver | None) -> None:
        p = self.p = ros.declare(self, PARAMS + (OWN_BUS_PARAMS if driver is None else ()))
        if driver is not None and p["use_emulator"]:
            raise ValueError("yam_driver: use_emulator cannot be combined with a given driver (the simulator's bus)")
        cfg = driver.config if driver is not None else load_config(p["config_file"] or default_config_path(p["bus"]))
        check_layers(cfg, load_safety_config(ros.config_path(p["safety_config"], "yam_safety.yaml")))
        self._refused = refusals.refusal_log(self, "joint targets")   # one line a second, then a count
        self.cfg, self._given, self.names, self._sim_ticks = cfg, driver, cfg.joint_names, None
        self.monitor = DriverMonitor(cfg, self.get_logger(), self._refused)
        self.pub = {k: ros.publisher(self, k) for k in ("joint_states", "diagnostics")}
        self._tick_guard = refusals.guarded(self, "driver tick", self._tick, lambda e: self.monitor.tick_failed(describe(e)),
                                       verb="failed")
        self._targets_topic = ros.subscription(self, "joint_targets", self._on_targets).topic_name
        group = MutuallyExclusiveCallbackGroup()
        ros.subscription(self, "estop", self._on_estop, group)
        # the operator's e-stop that always lands (vam_stack/estop.py): answered once the hold is latched
        self.estop_service = EstopService(self, self.monitor.estop_answer)
        refusals.service(self, Trigger, "~/home", self._on_home)
        refusals.service(self, Trigger, "~/reset_faults", self._on_reset_faults)
        self.monitor.reset_service = self.resolve_service_name("~/reset_faults")   # as an operator types it
        refusals.timer(self, p[ros.DIAGNOSTICS_PERIOD.name], self._publish_diagnostics, "diagnostics")
        if p["autostart"]:     # `ros2 launch` without a lifecycle manager: configure and activate now
            self.autostart(lambda step: RuntimeError(f"yam_driver: autostart could not {step} the driver: "
                                                     f"{self.monitor.last_error}"))

    driver = property(lambda self: self.monitor.driver)
    rig = property(lambda self: self.monitor.rig)
    estopped = property(lambda self: self.monitor.estopped)
    gate = property(lambda self: self.monitor.gate)

    def on_configure(self, state) -> TransitionCallbackReturn:
        gravity = self.cfg.bus == "damiao" and self.p["emulated_gravity"]
        ok = self.monitor.connect(self._given, self.p["use_emulator"], gravity, self._tick_guard, self.p["rt_priority"])
        if ok and self._given is not None:   # the simulator's bus: ticks on this node's clock (use_sim_time: the world's)
            self._sim_ticks = self.create_timer(self.cfg.period_s, self._tick_guard)
        return TransitionCallbackReturn.SUCCESS if ok else TransitionCallbackReturn.FAILURE

    def on_activate(self, state) -> TransitionCallbackReturn:
        return super().on_activate(state) if self.monitor.enable() else TransitionCallbackReturn.FAILURE

    def on_deactivate(self, state) -> TransitionCallbackReturn:
        self.monitor.set_active(False)
        self.get_logger().info("deactivated: holding, targets ignored")
        return super().on_deactivate(state)

    def on_cleanup(self, state) -> TransitionCallbackReturn:
        self._release()
        self.get_logger().info("cleaned up: torque off, disconnected")
        return TransitionCallbackReturn.SUCCESS

    def on_error(self, state) -> TransitionCallbackReturn:
        """A transition raised: hold, torque on; FAILURE finalizes the node, which keeps holding."""
        self.monitor.on_error()
        return TransitionCallbackReturn.FAILURE

    def _on_home(self, request, response):
        response.success, response.message = self.monitor.home()
        return response

    def _on_reset_faults(self, request, response):
        response.success, response.message = self.monitor.reset_faults()
        return response

    def _on_targets(self, msg) -> None:
        now, stamp = self.get_clock().now().nanoseconds * 1e-9, msg.header.stamp
        self.monitor.follow(lambda: msgs.joint_state_to_numpy(msg), now,
                            stamp.sec + stamp.nanosec * 1e-9, lambda: self.count_publishers(self._targets_topic))

    def _on_estop(self, msg) -> None:
        self.monitor.latch_estop(bool(msg.data))

    def _tick(self) -> None:      # the bus thread (a simulator's bus: the node's timer)
        report = self.monitor.tick()
        if report is None:
            return
        # a joint not read this tick (no reply, a refused glitch) is not presented as measured: NaN, the ROS
        # convention for an unknown value (sensor_msgs/JointState); its last reading would be a lie with a fresh stamp
        unread = ~report.read_ok
        self.pub["joint_states"].publish(rclpy_msgs.joint_state(
            self.names, np.where(unread, np.nan, report.position), np.where(unread, np.nan, report.velocity),
            np.where(unread, np.nan, report.effort), stamp_ns=self.get_clock().now().nanoseconds, unknown_nan=True))

    def _publish_diagnostics(self) -> None:
        refusals.flush_refusals(self)
        state = self._state_machine.current_state[1] if hasattr(self, "_state_machine") else "unknown"
        self.pub["diagnostics"].publish(ros.diagnostics(self, [self.monitor.status(state, self._refused.total)]))

    def _release(self, torque_off: bool = True) -> None:
        if self._sim_ticks is not None:
            self.destroy_timer(self._sim_ticks)
            self._sim_ticks = None
        self.monitor.release(torque_off)

    def destroy_node(self) -> None:
        """Safe state first, then the ROS entities: the operator's stop holds and turns torque off as
        configured; an internal error (`hold_on_exit`) holds with torque ON (a YAM has no brakes)."""
        if hasattr(self, "monitor"):
            reason = getattr(self, "_exit_hold", None)
            self._release(torque_off=reason is None)
            self.monitor.say_exit(internal_error=reason is not None)
        super().destroy_node()


def main(args=None) -> None:
    ros.spin_node(YamDriverNode, args, exit_process=True)
