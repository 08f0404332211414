"""vam_stack: the ament package's shared ground, the modules several of its packages import.

What it holds today (the `vam-stack` command itself is `vam_cli`):
- the robot and its facts: `robot` (config/yam_robot.yaml: joints, ranges, speed ceilings, rate),
  `stamps` (a target's stale and future-stamp windows), `libero` and `names` (facts and name lists
  written once), `instruction` (what counts as an instruction), `views` (fitting a stacked frame);
- ROS 2 messages and nodes: `topics` (the topic table), `msg_base`, `msgs`, `image_msgs` (the
  message layer, without rclpy), `rclpy_msgs` (joint states and targets built directly as rclpy
  messages), `ros` (what every node shares, on rclpy), `refusals`, `estop`,
  `probe`, `realtime`, `process_exit`;
- launch and processes: `launch_args` (the launch files' one table), `process_graph` (a launch file's
  processes without launch), `dev_prefix`, `paths`;
- recordings and outputs: `recording` (MCAP), `outputs`, `progress`, `arrivals`, `latency`;
- the TR monitor's plain-Python parts: `tr_trace`, `tr_plot`;
- `config` (dataclass configs from YAML with clear errors) and `mujoco_gl` (MuJoCo's GL backend).
"""
__version__ = "0.1.0"
