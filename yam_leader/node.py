"""yam_leader node: a leader arm teleoperates the YAM through the safety filter.

Reads the leader arm's bus (config/yam_leader.yaml: the build's signs and the calibrated offsets,
yam_leader.mapping, composed into a bus in the follower's driver schema, so a reading is in the
follower's units; its torque is never switched on) every control period. While engaged the reading goes out raw on
/teleop/joint_command (frame_id "teleop": what the demo recorder stores as the action) and,
through the same safety filter as the policy's targets, on /vam/joint_targets for the driver.

Services (std_srvs/Trigger):
- ~/engage: accepted only when every leader arm joint is within `engage_tolerance_rad` of the
  follower's measured pose (/joint_states); the answer names the joints that are too far.
- ~/disengage: stop sending; the driver holds its last target.

A glitching joint (a jump beyond `max_jump_rad` in one period) or `max_failed_reads` failed reads
in a row disengage it with an error naming the joint; /diagnostics `yam_leader: teleop` says the
state and why. A bad message, service call or tick is answered or logged, never fatal to the node.
Core: `yam_leader.leader.LeaderTeleop`; calibration: `vam-stack leader calibrate` (yam_leader.cli).

    ros2 launch vam_stack record.launch.py sim:=none teleop:=leader out_dir:=runs/recordings
"""
from __future__ import annotations

from vam_stack.process_exit import quiet_stop_while_importing

quiet_stop_while_importing("yam_leader")   # before the heavy imports below

import time

import numpy as np
from rclpy.node import Node
from std_srvs.srv import Trigger

from vam_stack import msgs, rclpy_msgs, ros
from vam_stack.config import ConfigError
from vam_stack.topics import JOINT_TARGETS_SOURCE
from yam_leader.leader import LeaderConfig, LeaderTeleop

P = ros.Param
PARAMS = (
    P("config_file", "", "the leader arm's YAML: its build, signs and offsets (yam_leader) and its bus (yam_driver "
                         "schema); empty = config/yam_leader.yaml"),
    P("safety_config", "", "safety limits YAML of the filter; empty = config/yam_safety.yaml"),
    P("use_emulator", False, "read an emulated leader arm (yam_driver.emulators) instead of hardware: demos, CI"),
    # (the read-and-send rate is no parameter: the robot's, config/yam_robot.yaml rate_hz)
    *ros.params_from(LeaderConfig, ("engage_tolerance_rad", "max_jump_rad", "max_failed_reads"),
                     ranges={"engage_tolerance_rad": (0.001, 0.5),
                             "max_jump_rad": (0.001, 1.0), "max_failed_reads": (1, 10)}),
    ros.DIAGNOSTICS_PERIOD,
)


class YamLeaderNode(Node):
    def __init__(self, **node_kwargs):
        super().__init__("yam_leader", **node_kwargs)
        p = ros.declare(self, PARAMS)
        from vam_stack.robot import load_robot
        from vam_control.safety import SafetyFilter, load_safety_config
        from yam_driver.buses import make_bus
        from yam_leader.mapping import load_leader

        try:
            cfg = LeaderConfig(**{k: p[k] for k in ("engage_tolerance_rad", "max_jump_rad", "max_failed_reads")})
            self.mapping, bus_cfg = load_leader(ros.config_path(p["config_file"], "yam_leader.yaml"))
            safety = SafetyFilter(load_safety_config(ros.config_path(p["safety_config"], "yam_safety.yaml")),
                                  clock=self._now)
        except (ConfigError, ValueError) as e:
            raise ros.ParameterError(str(e)) from None
        self.names = tuple(load_robot().published_names())
        if tuple(bus_cfg.joint_names) != self.names:
            raise ros.ParameterError(f"leader joints {bus_cfg.joint_names} differ from the follower's {list(self.names)} "
                                     f"(same names, same order: a reading is a follower target)")
        self.core = LeaderTeleop(cfg, safety, self.names)
        self.rig = None
        if p["use_emulator"]:
            from yam_driver.emulators import EmulatedRig

            self.rig = EmulatedRig(bus_cfg)
            bus_cfg = self.rig.config
        self.bus = make_bus(bus_cfg)
        try:
            self.bus.connect()                # pings every motor; torque is never enabled on a leader
        except Exception:
            if self.rig is not None:
                self.rig.stop()
            raise
        self.period = 1.0 / cfg.rate_hz
        self.follower: np.ndarray | None = None
        self.pubs = {k: ros.publisher(self, k) for k in ("teleop_command", "joint_targets")}
        ros.subscription(self, "joint_states", self._on_joint_states)
        self.create_service(Trigger, "~/engage", self._engage)
        self.create_service(Trigger, "~/disengage", self._disengage)
        self.diag_pub = ros.publisher(self, "diagnostics")
        self.create_timer(self.period, self._tick)
        self.create_timer(p[ros.DIAGNOSTICS_PERIOD.name], self._publish_diagnostics)
        self._reported = ""
        self.get_logger().info(f"leader arm ({self.mapping.build}) on {[a.port for a in bus_cfg.arms]} "
                               f"({bus_cfg.bus}); ~/engage once it matches the follower's pose")

    def _now(self) -> float:
        return self.get_clock().now().nanoseconds * 1e-9

    def _on_joint_states(self, msg) -> None:
        try:
            js = msgs.joint_state_to_numpy(msg)
        except ValueError as e:          # a malformed message (MessageError is a ValueError): refused, never fatal
            self.get_logger().error(f"/joint_states refused: {e}", throttle_duration_sec=1.0)
            return
        missing = [n for n in self.names if n not in js.names]
        if missing:
            self.get_logger().error(f"/joint_states lacks {missing}; the follower's pose is unknown",
                                    throttle_duration_sec=1.0)
            return
        self.follower = js.position[[js.names.index(n) for n in self.names]]

    def _read(self):
        """One read of the leader; a bus that raises (a port gone) reads as every joint failed."""
        from yam_driver.bus import BusError, BusReading

        try:
            return self.bus.read_state(deadline=time.monotonic() + 0.7 * self.period)
        except (BusError, OSError) as e:
            self.get_logger().error(f"leader read failed: {e}", throttle_duration_sec=1.0)
            return BusReading.empty(len(self.names))

    def _engage(self, request, response):
        if self.follower is None:
            response.success, response.message = False, "no /joint_states from the follower yet: is the driver up?"
            return response
        try:
            reading = self._read()
            position = np.where(reading.ok, reading.position, np.nan)
            response.success, response.message = self.core.engage(position, self.follower)
        except Exception as e:           # a service call never takes the node down: the caller gets the reason
            response.success, response.message = False, f"engage failed: {type(e).__name__}: {e}"
        # one call site per severity: rclpy refuses a logger call site whose severity changes between
        # calls ("Logger severity cannot be changed between calls", issue 58 row 5)
        if response.success:
            self.get_logger().info(f"engage: {response.message}")
        else:
            self.get_logger().warning(f"engage: {response.message}")
        return response

    def _disengage(self, request, response):
        self.core.disengage("disengaged by the operator")
        response.success, response.message = True, "disengaged: the follower holds its last target"
        self.get_logger().info(response.message)
        return response

    def _tick(self) -> None:
        if self.core.state != "engaged":
            return
        try:
            self._send()
        except Exception as e:           # a timer tick never takes the node down: stop sending, say why
            self.core.disengage(f"teleop tick failed: {type(e).__name__}: {e}", fault=True)
            self.get_logger().error(f"leader disengaged: {self.core.reason}")

    def _send(self) -> None:
        reading = self._read()
        now = self._now()
        tick = self.core.tick(reading.position, reading.ok, now, now)
        if tick.target is None:
            if tick.state == "fault" and tick.reason != self._reported:
                self._reported = tick.reason
                self.get_logger().error(f"leader disengaged: {tick.reason}")
            return
        stamp = self.get_clock().now().nanoseconds
        self.pubs["teleop_command"].publish(rclpy_msgs.joint_state(
            self.names, tick.command, stamp_ns=stamp, frame_id="teleop"))
        self.pubs["joint_targets"].publish(rclpy_msgs.joint_state(
            self.names, tick.target, stamp_ns=stamp, frame_id=JOINT_TARGETS_SOURCE))

    def _publish_diagnostics(self) -> None:
        c = self.core
        level = {"engaged": "ok", "idle": "ok", "fault": "error"}[c.state]
        self.diag_pub.publish(ros.diagnostics(self, [{
            "name": "yam_leader: teleop", "level": level, "hardware_id": self.bus.config.bus,
            "message": c.state + (f": {c.reason}" if c.reason else ""),
            "values": {"state": c.state, "build": self.mapping.build, "sent": c.sent, "failed_reads": c.failed,
                       "follower_seen": self.follower is not None}}]))

    def destroy_node(self) -> None:
        self.core.disengage("node shut down")
        try:
            self.bus.close(disable_torque=False)     # never powered: nothing to switch off
        finally:
            if self.rig is not None:
                self.rig.stop()
        super().destroy_node()


def main(args=None) -> None:
    ros.spin_node(YamLeaderNode, args, exit_process=True)


if __name__ == "__main__":
    main()
