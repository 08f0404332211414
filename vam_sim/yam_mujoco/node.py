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

With `teleop: expert` the world node also plays a teleoperator (`teleop.TeleopSession` over
`teleop.ExpertTeleop`): once ~/start_teleop (std_srvs/Trigger) is called and /joint_states has
arrived, the scripted expert reads the scene every control period; its raw command goes out on
/teleop/joint_command and, through a safety filter (config/yam_safety.yaml), onto
/vam/joint_targets, as the policy node's would; it announces the task's instruction on
/vam/instruction and the expert's phase on /vam/phase, and holds its last target once the task is
solved or its plan has run out (`yam_mujoco_sim: teleop` in /diagnostics says which). No policy
node may run beside it: the driver follows one publisher only. `vam-stack record` drives this
with the `demo_recorder` node (record.launch.py). The world's own report (real-time factor,
task solved) is `world_monitor.WorldMonitor`.

    ros2 launch vam_stack robot.launch.py sim:=mujoco preset:=yam64 \\
        instruction:="pick up the blue block with the left arm and hand it to the right arm"
"""
from __future__ import annotations

from vam_stack.process_exit import quiet_stop_while_importing

quiet_stop_while_importing("yam_mujoco_sim")   # before the heavy imports below

from rclpy.clock import Clock, ClockType
from rclpy.node import Node
from std_srvs.srv import Trigger

from camera_bridge.node import CameraBridgeNode
from vam_control.pacing import IncreasingStamps
from vam_control.safety import SafetyFilter, load_safety_config
from vam_sim.yam_mujoco.robot import build_sim_robot
from vam_sim.yam_mujoco.runner import JointNoise, YamRunConfig
from vam_sim.yam_mujoco.teleop import ExpertTeleop, TeleopSession
from vam_sim.yam_mujoco.world_monitor import WorldMonitor
from vam_stack import msgs, rclpy_msgs, ros
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
TELEOP_TOPICS = ("joint_targets", "teleop_command", "instruction", "phase")


class YamMujocoSimNode(Node):
    """The MuJoCo world on the host clock; `camera_bridge()` and `yam_driver()` build the two
    hardware nodes on it."""

    def __init__(self, **node_kwargs):
        super().__init__("yam_mujoco_sim", **node_kwargs)
        p = ros.declare(self, PARAMS)
        self.robot = build_sim_robot(ros.config_path(p["sim_config"], "yam_mujoco.yaml"), task=p["task"],
                                     seed=p["seed"], step_mode="wall_clock")
        self.sim = self.robot.sim
        self.monitor = WorldMonitor(self.sim)
        self.diag_pub = ros.publisher(self, "diagnostics")
        self.clock_pub = ros.publisher(self, "clock")
        # on the host's steady clock: with use_sim_time this node's own ROS clock is the /clock it publishes
        self.create_timer(1.0 / p["clock_hz"], self._publish_clock, clock=Clock(clock_type=ClockType.STEADY_TIME))
        self.create_timer(p[ros.DIAGNOSTICS_PERIOD.name], self._publish_diagnostics)
        self.teleop = None
        if p["teleop"] == "expert":
            self._init_teleop(p)
        self.get_logger().info(f"MuJoCo YAM, task {p['task']!r} (seed {p['seed']}), "
                               f"{self.sim.cfg.control_hz:g} Hz control, views {list(self.sim.cfg.cameras)}")

    def _init_teleop(self, p: dict) -> None:
        safety_path = ros.config_path(p["safety_config"], "yam_safety.yaml")
        safety = SafetyFilter(load_safety_config(safety_path), clock=self._now)
        if safety.cfg.rate_hz != self.sim.cfg.control_hz:
            raise ros.ParameterError(f"safety config rate {safety.cfg.rate_hz} Hz differs from the world's control "
                                     f"rate {self.sim.cfg.control_hz} Hz")
        run = YamRunConfig(policy="expert", expert_noise=p["teleop_noise"], expert_noise_where=p["teleop_noise_where"])
        noise = JointNoise.for_expert(run, 1.0 / self.sim.cfg.control_hz, p["seed"])
        expert = ExpertTeleop(self.sim, safety, noise, run.expert_noise_where)
        self.teleop = TeleopSession(expert, load_robot().published_names())
        self._teleop_pub = {key: ros.publisher(self, key) for key in TELEOP_TOPICS}
        self._stamps = IncreasingStamps()
        ros.subscription(self, "joint_states", self._on_joint_states)
        self.create_service(Trigger, "~/start_teleop", self._start_teleop)
        # on the node's clock: the world's /clock under use_sim_time, so the expert acts at the control rate of
        # simulated time even when the host falls behind real time (the driver's ticks are on the same clock)
        self.create_timer(1.0 / self.sim.cfg.control_hz, self._teleop_tick)

    def _now(self) -> float:
        return self.get_clock().now().nanoseconds * 1e-9

    def _on_joint_states(self, msg) -> None:
        js = msgs.joint_state_to_numpy(msg)
        try:
            self.teleop.observe(js.names, js.position)
        except ValueError as e:
            self.get_logger().error(str(e))

    def _start_teleop(self, request, response):
        response.success, response.message = self.teleop.request_start()
        return response

    def _teleop_tick(self) -> None:
        session = self.teleop
        if not session.requested:
            return
        if session.due_to_start:
            session.start()
            self._publish_teleop("instruction", msgs.string_msg(self.sim.task.instruction))
            noise = session.teleop.noise
            self.get_logger().info(f"teleop started: {self.sim.task.instruction!r} (arm-joint noise "
                                   f"{noise.std if noise else 0:g} rad, {session.teleop.noise_where})")
        step = session.step(self._now())
        # strictly after the last target: this timer runs on the world's /clock, which can fire it twice at one time
        stamp = self._stamps.next(self.get_clock().now().nanoseconds)
        self._teleop_pub["teleop_command"].publish(rclpy_msgs.joint_state(session.names, step.tick.command,
                                                                          stamp_ns=stamp, frame_id="teleop"))
        self._teleop_pub["joint_targets"].publish(rclpy_msgs.joint_state(session.names, step.tick.target,
                                                                         stamp_ns=stamp, frame_id=JOINT_TARGETS_SOURCE))
        if step.new_phase is not None:
            self._publish_teleop("phase", msgs.string_msg(step.new_phase))
        if step.finished:
            self.get_logger().info(f"teleop done after {session.teleop.ticks} ticks (solved at tick "
                                   f"{session.teleop.solved_at})")

    def _publish_teleop(self, key: str, msg) -> None:
        self._teleop_pub[key].publish(ros.to_ros(msg))

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
        if self.monitor.update():
            self.get_logger().info(f"task solved at {self.monitor.sim_time_s:.1f} s simulated")
        statuses = [self.monitor.status()]
        if self.teleop is not None:
            statuses.insert(0, self.teleop.status())
        self.diag_pub.publish(ros.diagnostics(self, statuses))

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
