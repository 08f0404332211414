"""yam_mujoco_sim: the simulated bimanual YAM in place of the hardware in the ROS 2 graph.

The way Gazebo stands in for a ros2_control robot: one process holds the MuJoCo world on the
host's clock (`step_mode: wall_clock`: physics advances to the monotonic clock whenever the
bus is read or a camera polled, at most `max_catch_up_s` at a time) and runs the unchanged
`camera_bridge` and `yam_driver` nodes on it. The camera bridge reads the three rendered views
(`MujocoCameraSource`) and publishes /camera/stacked/image_raw; the driver core drives the
MuJoCo bus (`MujocoBus`) with its slew limits, watchdog and command gate, follows
/vam/joint_targets from the policy node's safety filter, and publishes /joint_states. The
policy node (its safety filter included) and the TR monitor are the robot's, unchanged.

A third node, `yam_mujoco_sim`, owns the world: its parameters (simulator YAML, task, seed)
and /diagnostics with the achieved real-time factor (simulated seconds per host second: 1.0
when the host keeps up; the world skips ahead after a stall instead of bursting), the physics
rate, and whether the task is solved. One scene per launch: restart to reset it.

    ros2 launch vam_stack robot.launch.py sim:=mujoco preset:=yam64 \\
        instruction:="pick up the blue block with the left arm and hand it to the right arm"
"""
from __future__ import annotations

import time

from rclpy.clock import Clock, ClockType
from rclpy.node import Node

from vam_sim.yam_mujoco.tasks import TASKS
from vam_stack import msgs, ros

P = ros.Param
PARAMS = (
    P("sim_config", "", "simulator YAML (sections yam_mujoco and camera_bridge); empty = config/yam_mujoco.yaml"),
    P("task", "handover", "task whose objects populate the scene", choices=tuple(sorted(TASKS))),
    P("clock_hz", 100.0, "rate of /clock, the world's time [Hz]", range=(1.0, 1000.0)),
    P("seed", 0, "seed of the scene's initial state (vam-stack sim's episode seeds are 32-bit)", range=(0, 2**32 - 1)),
    ros.DIAGNOSTICS_PERIOD,
)


class YamMujocoSimNode(Node):
    """The MuJoCo world on the host clock; `camera_bridge()` and `yam_driver()` build the two
    hardware nodes on it."""

    def __init__(self, **node_kwargs):
        super().__init__("yam_mujoco_sim", **node_kwargs)
        p = ros.declare(self, PARAMS)
        from vam_sim.yam_mujoco.robot import build_sim_robot

        self.robot = build_sim_robot(ros.config_path(p["sim_config"], "yam_mujoco.yaml"), task=p["task"],
                                     seed=p["seed"], step_mode="wall_clock")
        self.sim = self.robot.sim
        self.diag_pub = ros.publisher(self, "diagnostics")
        self.clock_pub = ros.publisher(self, "clock")
        # on the host's steady clock: with use_sim_time this node's own ROS clock is the /clock it publishes
        self.create_timer(1.0 / p["clock_hz"], self._publish_clock, clock=Clock(clock_type=ClockType.STEADY_TIME))
        self._last = (time.monotonic(), self.sim.time)
        self.real_time_factor = float("nan")
        self.solved = False
        self.create_timer(p[ros.DIAGNOSTICS_PERIOD.name], self._publish_diagnostics)
        self.get_logger().info(f"MuJoCo YAM, task {p['task']!r} (seed {p['seed']}), "
                               f"{self.sim.cfg.control_hz:g} Hz control, views {list(self.sim.cfg.cameras)}")

    def camera_bridge(self, **node_kwargs):
        from camera_bridge.node import CameraBridgeNode

        return CameraBridgeNode(bridge=self.robot.bridge(), **node_kwargs)

    def yam_driver(self, **node_kwargs):
        from yam_driver.node import YamDriverNode

        return YamDriverNode(driver=self.robot.driver(), **node_kwargs)

    def _publish_clock(self) -> None:
        """/clock: the world's simulated time (the nodes of sim:=mujoco run with use_sim_time). This
        timer runs on the host clock, so the world's time keeps flowing before anyone reads it."""
        self.sim.sync()
        self.clock_pub.publish(ros.to_ros(msgs.clock_msg(self.sim.time)))

    def _publish_diagnostics(self) -> None:
        self.sim.sync()
        now, t_sim = time.monotonic(), self.sim.time
        wall0, sim0 = self._last
        if now > wall0:
            self.real_time_factor = (t_sim - sim0) / (now - wall0)
        self._last = (now, t_sim)
        with self.sim.lock:
            solved = bool(self.sim.task.success(self.sim))
        if solved and not self.solved:
            self.get_logger().info(f"task solved at {t_sim:.1f} s simulated")
        self.solved = solved
        rtf = self.real_time_factor
        level = "ok" if rtf != rtf or rtf >= 0.9 else "warn"     # NaN: not measured yet
        self.diag_pub.publish(ros.diagnostics(self, [{
            "name": "yam_mujoco_sim: world", "level": level,
            "message": "real time" if level == "ok" else f"slower than real time ({rtf:.2f}x)",
            "hardware_id": "mujoco",
            "values": {"real_time_factor": rtf, "sim_time_s": t_sim, "task": self.sim.cfg.task,
                       "task_solved": solved}}]))

    def destroy_node(self) -> None:
        self.robot.close()
        super().destroy_node()


def build_nodes(nodes: list, **node_kwargs) -> list:
    """The world first, then the camera bridge and the driver on it (appended as each is built,
    so a failure still lets the caller destroy the ones that started)."""
    sim = YamMujocoSimNode(**node_kwargs)
    nodes.append(sim)
    nodes.append(sim.camera_bridge(**node_kwargs))
    nodes.append(sim.yam_driver(**node_kwargs))
    return nodes


def main(args=None) -> None:
    ros.spin_nodes(build_nodes, args)


if __name__ == "__main__":
    main()
