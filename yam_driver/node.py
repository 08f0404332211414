"""yam_driver node: /vam/joint_targets in; /joint_states at the bus rate and /diagnostics out.

One `YamDriver` (plain Python) does the work; each timer tick is one driver step (read every
joint, update health, slew-limited write). Targets are matched by joint name; a message with
a missing joint or a non-finite value is rejected with a logged error, and the driver's
watchdog holds the arm when targets stop or go stale. Only the policy node's safety-filtered
stream is followed (`command_gate.CommandGate`: one publisher, the filter's frame_id, a fresh,
increasing stamp); a second publisher on the topic holds the arm where it is. At start-up the
driver's limits are checked to sit inside the safety filter's (`vam_stack.robot.check_layers`).
/vam/estop true: the measured position
becomes the target at once and later targets are ignored (the watchdog then keeps holding)
until false. Safe state on every exit path:
destroy_node, Ctrl-C and exceptions hold the measured position, then turn torque off as
configured. `use_emulator` runs the same driver against emulated buses (yam_driver.emulators).
"""
from __future__ import annotations

import threading
import time

import numpy as np
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup
from rclpy.node import Node

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
    P("safety_config", "", "the policy node's safety limits YAML the driver's limits must sit inside; "
                           "empty = config/yam_safety.yaml"),
    P("diagnostics_period_s", 1.0, "period of /diagnostics [s]", range=(0.1, 60.0)),
)


class YamDriverNode(Node):
    def __init__(self, driver: YamDriver | None = None, **node_kwargs):
        """`driver`: an unstarted driver on a bus made elsewhere (the MuJoCo simulator's,
        vam_sim/yam_mujoco/node.py) instead of the one `config_file` and `bus` describe."""
        super().__init__("yam_driver", **node_kwargs)
        p = ros.declare(self, PARAMS)
        if driver is not None and p["use_emulator"]:
            raise ValueError("yam_driver: use_emulator cannot be combined with a given driver (the simulator's bus)")
        cfg = driver.config if driver is not None else load_config(p["config_file"] or default_config_path(p["bus"]))
        from vam_stack.safety import load_safety_config
        check_layers(cfg, load_safety_config(ros.config_path(p["safety_config"], "yam_safety.yaml")))
        self.gate = CommandGate(max_age_s=cfg.watchdog_s)
        self._refusal: str | None = None
        self.rig = None
        if p["use_emulator"]:
            from yam_driver.emulators import EmulatedRig
            self.rig = EmulatedRig(cfg)
            cfg = self.rig.config
        self.driver = driver if driver is not None else YamDriver(cfg)
        self.names = cfg.joint_names
        self.estopped = False
        self._cmd_lock = threading.Lock()  # e-stop and targets run in different callback groups
        self._position: np.ndarray | None = None  # latest measured position (all joints valid)
        self._ticks: list[float] = []
        self.pub = {k: ros.publisher(self, k) for k in ("joint_states", "diagnostics")}
        try:
            self.driver.start()
        except BaseException:
            self._release()
            raise
        self.targets_in = ArrivalStats(cfg.rate_hz)   # policy -> driver: latency, period jitter, missed ticks
        sub = ros.subscription(self, "joint_targets", self._on_targets)
        self._targets_topic = sub.topic_name  # as resolved (and remapped) for this node
        self.estop_group = MutuallyExclusiveCallbackGroup()   # not behind another group's callback if multi-threaded
        ros.subscription(self, "estop", self._on_estop, self.estop_group)
        self.create_timer(cfg.period_s, self._tick)
        self.create_timer(p["diagnostics_period_s"], self._publish_diagnostics)
        where = " (emulated)" if self.rig else (f" on {type(self.driver.bus).__name__}" if driver is not None else "")
        self.get_logger().info(f"{cfg.bus} driver at {cfg.rate_hz} Hz{where}")

    def _on_targets(self, msg) -> None:
        stamp = msg.header.stamp
        self.targets_in.add(self.get_clock().now().nanoseconds * 1e-9, stamp.sec + stamp.nanosec * 1e-9)
        with self._cmd_lock:   # an e-stop cannot land between the check and the set below
            self._follow(msg)

    def _follow(self, msg) -> None:
        if self.estopped:
            return
        try:
            js = msgs.joint_state_to_numpy(ros.from_ros(msg, "sensor_msgs/msg/JointState"))
            missing = [n for n in self.names if n not in js.names]
            if missing:
                raise ValueError(f"targets lack joints {missing} (got {js.names})")
        except ValueError as e:  # MessageError is a ValueError too
            self.get_logger().error(f"joint targets rejected (holding): {e}")
            return
        now = self.get_clock().now().nanoseconds * 1e-9
        before = self.gate.last_reason
        refusal = self.gate.check(js.stamp_s, js.frame_id, now, self.count_publishers(self._targets_topic))
        if refusal is not None:
            if self.gate.last_reason == "publishers" and self._position is not None:
                self.driver.set_targets(self._position)  # hold where the arm is while a second publisher exists
            if self._refusal is None or self.gate.last_reason != before:   # once per kind, not at 30 Hz
                self.get_logger().error(f"joint targets refused: {refusal}")
            self._refusal = refusal
            return
        if self._refusal is not None:
            self.get_logger().info("joint targets followed again")
            self._refusal = None
        self.driver.set_targets(js.position[[js.names.index(n) for n in self.names]])

    def _on_estop(self, msg) -> None:
        with self._cmd_lock:
            self._latch(bool(msg.data))

    def _latch(self, on: bool) -> None:
        if on == self.estopped:
            return
        self.estopped = on
        if self.estopped and self._position is not None:
            self.driver.set_targets(self._position)  # hold where the arm is now, not where it was heading
        self.get_logger().warning("e-stop: holding, targets ignored" if self.estopped else "e-stop released")

    def _tick(self) -> None:
        report = self.driver.try_step()      # None once destroy_node shut the driver down
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

    def _publish_diagnostics(self) -> None:
        d = self.driver
        p50, p99 = d.io_percentiles_ms()
        rate = (len(self._ticks) - 1) / (self._ticks[-1] - self._ticks[0]) if len(self._ticks) > 1 else 0.0
        level = {Mode.FAULT: "error", Mode.STOPPED: "stale", Mode.HOLDING: "warn"}.get(d.mode, "ok")
        level = "warn" if self.estopped and level == "ok" else level
        message = "; ".join(map(str, d.faults)) or d.mode.value
        if self._refusal is not None:  # the target stream is not being followed
            level = "error" if self.gate.last_reason == "publishers" else ("warn" if level == "ok" else level)
            message = f"targets refused: {self._refusal}"
        values = {"mode": d.mode.value, "ticks": d.tick, "rate_hz": rate, "io_p50_ms": p50, "io_p99_ms": p99,
                  "estop": self.estopped, "faults": "; ".join(map(str, d.faults)) or "none",
                  **{f"refused_{k}": v for k, v in self.gate.counts.items()}, **self.targets_in.summary("targets_")}
        self.pub["diagnostics"].publish(ros.diagnostics(self, [{"name": "yam_driver", "level": level,
                                        "message": message, "values": values}]))

    def _release(self) -> None:
        self.driver.shutdown()
        if self.rig is not None:
            self.rig.stop()

    def destroy_node(self) -> None:
        """Safe state first (hold, torque off as configured), then the ROS entities."""
        self._release()
        d = self.driver
        torque = "torque off" if d.config.torque_off_on_exit else "torque left on (torque_off_on_exit: false)"
        if d.shutdown_errors:
            self.get_logger().error(f"driver shut down with problems ({torque}): {'; '.join(d.shutdown_errors)}")
        else:
            self.get_logger().info(f"driver shut down: arm held, {torque}")
        super().destroy_node()


def main(args=None) -> None:
    ros.spin_node(YamDriverNode, args)


if __name__ == "__main__":
    main()
