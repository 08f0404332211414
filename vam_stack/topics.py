"""The one table of ROS 2 topics: names, message types, QoS profiles and frame ids.

Every node, the in-process simulation and the MCAP recorder take topic names from here, so a
recording made without ROS plays back onto exactly the topics the live nodes use
(`ros2 bag play recording.mcap` feeds rviz2 and rqt; Foxglove opens the file directly).

QoS profiles are named, not spelled out per topic:
- `sensor_data`: best effort, keep last 5, volatile — camera streams (drop rather than queue).
- `reliable`: reliable, keep last 10, volatile — commands, state, telemetry, diagnostics.
- `latched`: reliable, keep last 1, transient local — slowly changing state (phase,
  instruction, episode status, e-stop) that a late subscriber must still see.
A reliable publisher matches both reliable and best-effort subscribers; a best-effort one only
matches best-effort subscribers (rviz2's Image display lets you choose).
"""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass


# frame_id on every absolute joint target the policy node's safety filter sends: the driver
# follows no other stream (yam_driver.command_gate)
JOINT_TARGETS_SOURCE = "vam_safety_filter"


@dataclass(frozen=True)
class QosSpec:
    """A QoS profile in plain words; nodes map it to rclpy, the recorder to rosbag2 metadata."""

    reliability: str  # "reliable" | "best_effort"
    durability: str  # "volatile" | "transient_local"
    depth: int  # history depth (KEEP_LAST)


QOS_PROFILES: dict[str, QosSpec] = {
    "sensor_data": QosSpec("best_effort", "volatile", 5),
    "reliable": QosSpec("reliable", "volatile", 10),
    "latched": QosSpec("reliable", "transient_local", 1),
    "clock": QosSpec("best_effort", "volatile", 1),   # what rclpy's and rclcpp's time sources subscribe with
}


@dataclass(frozen=True)
class Topic:
    """One row of the topic table."""

    name: str  # absolute ROS 2 topic name
    msgtype: str  # ROS 2 interface name as the typestore spells it, e.g. "std_msgs/msg/Float32"
    qos: str  # key of QOS_PROFILES
    frame_id: str  # header.frame_id for stamped messages ("" = not stamped or no TF frame)
    publisher: str  # the node that publishes it (the simulation publishes all in one process)
    description: str  # what the data means, with units

    @property
    def qos_spec(self) -> QosSpec:
        return QOS_PROFILES[self.qos]


# Key -> topic. Keys are stable identifiers used in code; names are what ROS sees.
TOPICS: dict[str, Topic] = {
    "stacked_image": Topic(
        "/camera/stacked/image_raw", "sensor_msgs/msg/Image", "sensor_data", "camera_stacked",
        "camera_bridge, libero_bridge",
        "camera views stacked horizontally, rgb8 (real 672x168, LIBERO 448x224)"),
    "stacked_image_compressed": Topic(
        "/camera/stacked/image_raw/compressed", "sensor_msgs/msg/CompressedImage", "sensor_data", "camera_stacked",
        "camera_bridge, libero_bridge (publish_compressed)",
        "the stacked frame as JPEG, image_transport's compressed transport: format "
        "'rgb8; jpeg compressed bgr8', header of the raw frame"),
    "joint_states": Topic(
        "/joint_states", "sensor_msgs/msg/JointState", "reliable", "",
        "yam_driver, libero_bridge",
        "measured state: 14 joint angles [rad] / LIBERO 8-dim proprio, named; NaN for a joint the driver could "
        "not read this tick"),
    "joint_targets": Topic(
        "/vam/joint_targets", "sensor_msgs/msg/JointState", "reliable", "",
        "vam_policy_node; a teleoperator (yam_mujoco_sim teleop, yam_leader)",
        "commanded action at the control rate, safety-filtered: 14 absolute joint targets "
        "[rad] (real) or the 7-dim end-effector delta (LIBERO); names say which"),
    "teleop_command": Topic(
        "/teleop/joint_command", "sensor_msgs/msg/JointState", "reliable", "teleop",
        "yam_mujoco_sim (teleop: expert), yam_leader", "the teleoperator's raw joint command, before the safety "
        "filter (what a leader arm reads): a demonstration's action; 14 absolute joint targets [rad], named"),
    "joint_trajectory": Topic(
        "/vam/joint_trajectory", "trajectory_msgs/msg/JointTrajectory", "reliable", "vam_safety_filter",
        "vam_policy_node (command_outputs)",
        "the safety-filtered target of each tick as a one-point trajectory reached one period later, for "
        "ros2_control's joint_trajectory_controller (remap to /<controller>/joint_trajectory)"),
    "forward_commands": Topic(
        "/vam/commands", "std_msgs/msg/Float64MultiArray", "reliable", "",
        "vam_policy_node (command_outputs)",
        "the safety-filtered target of each tick in joint order, for ros2_control's "
        "forward_command_controller (remap to /<controller>/commands)"),
    "tr": Topic("/vam/tr", "std_msgs/msg/Float32", "reliable", "",
             "tr_monitor_node", "Temporal Ratio TR_i of the latest replan (dimensionless)"),
    "tr0": Topic("/vam/tr0", "std_msgs/msg/Float32", "reliable", "",
              "tr_monitor_node", "episode TR baseline TR_0, set at the first replan"),
    "tr_steps": Topic("/vam/tr_steps", "std_msgs/msg/Float32MultiArray", "reliable", "",
                   "tr_monitor_node", "TR at each Euler step of the latest replan"),
    "s": Topic("/vam/s", "std_msgs/msg/Float32", "reliable", "",
            "tr_monitor_node", "guidance scale s_i = clip(TR_i/TR_0 - 1, 0, s_max)"),
    "w_lang": Topic("/vam/w_lang", "std_msgs/msg/Float32", "reliable", "",
                 "tr_monitor_node", "language guidance weight of the latest replan"),
    "w_plan": Topic("/vam/w_plan", "std_msgs/msg/Float32", "reliable", "",
                 "tr_monitor_node", "plan (video rollout) guidance weight of the latest replan"),
    "latency_ms": Topic("/vam/latency_ms", "std_msgs/msg/Float32", "reliable", "",
                     "tr_monitor_node", "wall time of the latest replan [ms]"),
    "phase": Topic("/vam/phase", "std_msgs/msg/String", "latched", "",
                "tr_monitor_node", "'planning' or 'manipulation' (labels, else inferred from TR)"),
    "telemetry": Topic("/vam/telemetry", "std_msgs/msg/String", "reliable", "",
                    "vam_policy_node", "per-replan telemetry as JSON (attention left out)"),
    "attention": Topic(
        "/vam/attention", "std_msgs/msg/Float32MultiArray", "reliable", "", "vam_policy_node",
        "TR-layer attention of the action queries over the video tokens of the latest replan, "
        "[A_H, n_video_tokens] (feeds the monitor's overlay)"),
    "instruction": Topic("/vam/instruction", "std_msgs/msg/String", "latched", "",
                      "operator, libero_bridge", "language instruction; a new one starts an episode"),
    "estop": Topic("/vam/estop", "std_msgs/msg/Bool", "latched", "",
                "operator", "true holds the arm and stops the policy until cleared (the operator's form that "
                            "always lands is the /vam/estop service, std_srvs/SetBool)"),
    "estop_state": Topic("/vam/estop_state", "std_msgs/msg/Bool", "latched", "",
                      "yam_driver, libero_bridge", "the e-stop as the node that moves the arm latched it "
                                                   "(set by the /vam/estop service); the policy node stops on true"),
    "trace_image": Topic(
        "/tr_monitor/trace_image", "sensor_msgs/msg/Image", "reliable", "tr_monitor",
        "tr_monitor_node", "rendered TR trace (TR, TR_0, s_i, weights, phase), rgb8"),
    "attention_overlay": Topic(
        "/tr_monitor/attention_overlay", "sensor_msgs/msg/Image", "reliable", "camera_stacked",
        "tr_monitor_node",
        "action-token attention over the current frame's video tokens on the stacked frame, rgb8"),
    "clock": Topic("/clock", "rosgraph_msgs/msg/Clock", "clock", "", "yam_mujoco_sim",
                   "the simulated world's time (sim:=mujoco): every node of that graph runs with use_sim_time"),
    "diagnostics": Topic("/diagnostics", "diagnostic_msgs/msg/DiagnosticArray", "reliable", "",
                      "every node", "rates, ages, latencies and faults (rqt_runtime_monitor)"),
    "episode_status": Topic("/libero/episode_status", "std_msgs/msg/String", "latched", "",
                         "libero_bridge", "episode status as JSON: suite, task, step, success, "
                         "done, reason"),
}

# JointState names on the LIBERO topics (the real arm's names come from yam_driver's config).
LIBERO_PROPRIO_NAMES = ("eef_pos_x", "eef_pos_y", "eef_pos_z",  # end-effector position [m]
                        "eef_rot_x", "eef_rot_y", "eef_rot_z",  # axis-angle orientation [rad]
                        "gripper_finger_left", "gripper_finger_right")  # finger positions [m]
LIBERO_ACTION_NAMES = ("delta_x", "delta_y", "delta_z",  # end-effector translation command
                       "delta_rot_x", "delta_rot_y", "delta_rot_z",  # rotation command
                       "gripper")  # -1 open .. +1 close

_VIEW_RE = re.compile(r"^[a-z][a-z0-9_]*$")


def camera_topic(view: str, compressed: bool = False) -> Topic:
    """Topic of one camera view, e.g. `camera_topic("agentview")` -> /camera/agentview/image_raw;
    `compressed`: its JPEG twin /camera/agentview/image_raw/compressed (image_transport's naming)."""
    if not isinstance(view, str) or not _VIEW_RE.match(view) or view == "stacked":
        raise ValueError(
            f"camera view name must be lowercase letters/digits/underscores and not 'stacked', "
            f"got {view!r}")
    if compressed:
        return Topic(f"/camera/{view}/image_raw/compressed", "sensor_msgs/msg/CompressedImage", "sensor_data",
                     f"{view}_camera", "camera_bridge, libero_bridge (publish_compressed)",
                     f"camera view {view!r} as JPEG, format 'rgb8; jpeg compressed bgr8'")
    return Topic(f"/camera/{view}/image_raw", "sensor_msgs/msg/Image", "sensor_data",
                 f"{view}_camera", "camera_bridge, libero_bridge", f"camera view {view!r}, rgb8")


def topic(key: str) -> Topic:
    """Row of the table by key; an unknown key raises KeyError with a "did you mean"."""
    try:
        return TOPICS[key]
    except KeyError:
        close = difflib.get_close_matches(str(key), list(TOPICS), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise KeyError(f"unknown topic key {key!r}{hint}") from None


def by_name(name: str) -> Topic:
    """Row of the table by ROS topic name (camera views included)."""
    for t in TOPICS.values():
        if t.name == name:
            return t
    m = re.match(r"^/camera/([^/]+)/image_raw(/compressed)?$", name) if isinstance(name, str) else None
    if m and m.group(1) != "stacked":
        return camera_topic(m.group(1), compressed=bool(m.group(2)))
    names = [t.name for t in TOPICS.values()]
    close = difflib.get_close_matches(str(name), names, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise KeyError(f"topic {name!r} is not in the topic table{hint}")


def resolve(key_or_name: str) -> Topic:
    """Accept either a table key ("tr") or a topic name ("/vam/tr")."""
    if isinstance(key_or_name, str) and key_or_name.startswith("/"):
        return by_name(key_or_name)
    return topic(key_or_name)


def markdown_table() -> str:
    """The topic table as Markdown, for the README."""
    rows = ["| topic | type | QoS | frame_id | publisher | meaning |",
            "|---|---|---|---|---|---|"]
    cam, jpeg = camera_topic("view"), camera_topic("view", compressed=True)
    cam = Topic("/camera/<view>/image_raw", cam.msgtype, cam.qos, "<view>_camera",
                cam.publisher, "one camera view, rgb8")
    jpeg = Topic("/camera/<view>/image_raw/compressed", jpeg.msgtype, jpeg.qos, "<view>_camera",
                 jpeg.publisher, "one camera view as JPEG, format 'rgb8; jpeg compressed bgr8'")
    for t in [*TOPICS.values(), cam, jpeg]:
        rows.append(f"| `{t.name}` | `{t.msgtype}` | {t.qos} | {t.frame_id or '-'} | "
                    f"{t.publisher} | {t.description} |")
    return "\n".join(rows)
