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

With `teleop: expert` the world node also plays a teleoperator (`teleop.ExpertTeleop`): once
~/start_teleop (std_srvs/Trigger) is called and /joint_states has arrived, the scripted expert
reads the scene every control period; its raw command goes out on /teleop/joint_command and, through
a safety filter (config/yam_safety.yaml), onto /vam/joint_targets, as the policy node's would; it announces the task's instruction on
/vam/instruction and the expert's phase on /vam/phase, and holds its last target once the task is
solved or its plan has run out (`yam_mujoco_sim: teleop` in /diagnostics says which). No policy
node may run beside it: the driver follows one publisher only. `vam-stack record` drives this
with the `demo_recorder` node (record.launch.py).

    ros2 launch vam_stack robot.launch.py sim:=mujoco preset:=yam64 \\
        instruction:="pick up the blue block with the left arm and hand it to the right arm"
"""
from __future__ import annotations

from vam_stack.process_exit import quiet_stop_while_importing

quiet_stop_while_importing("yam_mujoco_sim")   # before the heavy imports below

import time

from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from std_srvs.srv import Trigger

from camera_bridge.node import CameraBridgeNode
from vam_control.pacing import IncreasingStamps
from vam_control.safety import SafetyFilter, load_safety_config
from vam_sim.yam_mujoco.robot import build_sim_robot
from vam_sim.yam_mujoco.runner import JointNoise, YamRunConfig
from vam_sim.yam_mujoco.teleop import ExpertTeleop
from vam_stack import msgs, ros
from vam_stack.names import NOISE_WHERE, YAM_TASKS
from vam_stack.robot import load_robot
from vam_stack.topics import JOINT_TARGETS_SOURCE
from yam_driver.node import YamDriverNode

P = ros.Param
PARAMS = (
    P("sim_config", "", "simulator YAML (sections yam_mujoco and camera_bridge); empty = config/yam_mujoco.yaml"),
    P("task", "handover", "task whose objects populate the scene", choices=tuple(sorted(YAM_TASKS))),
    P("clock_hz", 100.0, "rate of /clock, the world's time [Hz]", range=(1.0, 1000.0)),
    P("seed", 0, "seed of the scene's initial state (vam-stack sim's episode seeds are 32-bit)", range=(0, 2**32 - 1)),
    P("teleop", "none", "none | expert: the scripted expert teleoperates through a safety filter onto "
      "/vam/joint_targets after ~/start_teleop (no policy node may run beside it)", choices=("none", "expert")),
    P("safety_config", "", "safety limits YAML of the teleoperator's filter; empty = config/yam_safety.yaml"),
    # the teleoperator's perturbation, as `vam-stack collect --joint-noise/--noise-where` (its noise draws are
    # seeded from `seed` as collect's are, so one scene gets the same perturbation through the graph)
    *ros.params_from(YamRunConfig, ("expert_noise", "expert_noise_where"),
                     rename={"expert_noise": "teleop_noise", "expert_noise_where": "teleop_noise_where"},
                     ranges={"expert_noise": (0.0, 0.2)}, choices={"expert_noise_where": NOISE_WHERE}),
    ros.DIAGNOSTICS_PERIOD,
)


class YamMujocoSimNode(Node):
    """The MuJoCo world on the host clock; `camera_bridge()` and `yam_driver()` build the two
    hardware nodes on it."""

    def __init__(self, **node_kwargs):
        super().__init__("yam_mujoco_sim", **node_kwargs)
        p = ros.declare(self, PARAMS)
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
        self.teleop = None
        if p["teleop"] == "expert":
            self._init_teleop(p)
        self.get_logger().info(f"MuJoCo YAM, task {p['task']!r} (seed {p['seed']}), "
                               f"{self.sim.cfg.control_hz:g} Hz control, views {list(self.sim.cfg.cameras)}")

    def _init_teleop(self, p) -> None:
        safety = SafetyFilter(load_safety_config(ros.config_path(p["safety_config"], "yam_safety.yaml")),
                              clock=self._now)
        if safety.cfg.rate_hz != self.sim.cfg.control_hz:
            raise ros.ParameterError(f"safety config rate {safety.cfg.rate_hz} Hz differs from the world's control "
                                     f"rate {self.sim.cfg.control_hz} Hz")
        run = YamRunConfig(policy="expert", expert_noise=p["teleop_noise"], expert_noise_where=p["teleop_noise_where"])
        noise = (JointNoise(run.expert_noise, run.expert_noise_tau_s, 1.0 / self.sim.cfg.control_hz,
                            int(p["seed"]) ^ 0x5EED, run.expert_noise_fade_s) if run.expert_noise > 0 else None)
        self.teleop = ExpertTeleop(self.sim, safety, noise, run.expert_noise_where)
        self._names = load_robot().published_names()
        self._measured = None
        self._requested = False
        self._phase = None
        self._teleop_pub = {k: ros.publisher(self, k) for k in ("joint_targets", "teleop_command", "instruction", "phase")}
        self._stamps = IncreasingStamps()
        ros.subscription(self, "joint_states", self._on_joint_states)
        self.create_service(Trigger, "~/start_teleop", self._start_teleop)
        # on the node's clock: the world's /clock under use_sim_time, so the expert acts at the control rate of
        # simulated time even when the host falls behind real time (the driver's ticks are on the same clock)
        self.create_timer(1.0 / self.sim.cfg.control_hz, self._teleop_tick)

    def _now(self) -> float:
        return self.get_clock().now().nanoseconds * 1e-9

    def _on_joint_states(self, msg) -> None:
        js = msgs.joint_state_to_numpy(ros.from_ros(msg, "sensor_msgs/msg/JointState"))
        missing = [n for n in self._names if n not in js.names]
        if missing:
            self.get_logger().error(f"teleop: /joint_states lacks {missing}; not following it")
            return
        self._measured = js.position[[js.names.index(n) for n in self._names]]

    def _start_teleop(self, request, response):
        response.success = self._measured is not None and not self._requested
        if self._requested:
            response.message = "teleop already started (restart the world for another episode)"
        elif self._measured is None:
            response.message = "no /joint_states yet: is the driver up?"
        else:
            self._requested = True
            response.message = f"teleoperating {self.sim.cfg.task!r}: {self.sim.task.instruction!r}"
        return response

    def _teleop_tick(self) -> None:
        if not self._requested:
            return
        if not self.teleop.started:
            self.teleop.start(self._measured)
            self._teleop_pub["instruction"].publish(ros.to_ros(msgs.string_msg(self.sim.task.instruction)))
            noise = self.teleop.noise
            self.get_logger().info(f"teleop started: {self.sim.task.instruction!r} (arm-joint noise "
                                   f"{noise.std if noise else 0:g} rad, {self.teleop.noise_where})")
        now = self._now()
        tick = self.teleop.tick(now, now)
        # strictly after the last target: this timer runs on the world's /clock, which can fire it twice at one time
        stamp = msgs.time_from_ns(self._stamps.next(self.get_clock().now().nanoseconds))
        self._teleop_pub["teleop_command"].publish(ros.to_ros(msgs.joint_state_msg(
            self._names, tick.command, stamp_s=stamp, frame_id="teleop")))
        self._teleop_pub["joint_targets"].publish(ros.to_ros(msgs.joint_state_msg(
            self._names, tick.target, stamp_s=stamp, frame_id=JOINT_TARGETS_SOURCE)))
        if tick.phase != self._phase:
            self._phase = tick.phase
            self._teleop_pub["phase"].publish(ros.to_ros(msgs.string_msg(tick.phase)))
        if tick.done and not getattr(self, "_done_logged", False):
            self._done_logged = True
            self.get_logger().info(f"teleop done after {self.teleop.ticks} ticks (solved at tick "
                                   f"{self.teleop.solved_at})")

    def _teleop_status(self) -> dict:
        t = self.teleop
        return {"name": "yam_mujoco_sim: teleop", "level": "ok", "hardware_id": "mujoco",
                "message": "done" if t.done else "teleoperating" if t.started else "waiting for ~/start_teleop",
                "values": {"started": t.started, "ticks": t.ticks, "phase": self._phase or "", "done": t.done,
                           "solved_at_tick": -1 if t.solved_at is None else t.solved_at}}

    def camera_bridge(self, **node_kwargs):
        return CameraBridgeNode(bridge=self.robot.bridge(), **node_kwargs)

    def yam_driver(self, **node_kwargs):
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
        extra = [self._teleop_status()] if self.teleop is not None else []
        self.diag_pub.publish(ros.diagnostics(self, extra + [{
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
    ros.spin_nodes(build_nodes, args, exit_process=True)


if __name__ == "__main__":
    main()
