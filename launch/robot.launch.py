"""The robot stack: cameras, policy (executor + safety filter), TR monitor, YAM driver,
and optionally rviz2 and rqt with the shipped layouts. With sim:=mujoco the simulated YAM
(yam_mujoco_sim: the MuJoCo world with the same camera bridge and driver nodes on it) stands in
for the cameras and the arm. Arguments: vam_stack/launch_args.py.

    ros2 launch vam_stack robot.launch.py checkpoint:=/path/real.safetensors \\
        instruction:="put the cup on the plate" use_emulated_driver:=true
    ros2 launch vam_stack robot.launch.py sim:=mujoco preset:=yam64 \\
        instruction:="pick up the blue block with the left arm and hand it to the right arm"
"""
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.conditions import IfCondition, UnlessCondition
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.substitutions import FindPackageShare

from vam_stack.launch_args import declare, flag, is_mujoco, text


def generate_launch_description():
    share = FindPackageShare("vam_stack")
    arg = LaunchConfiguration
    params = arg("params_file")
    return LaunchDescription([
        DeclareLaunchArgument("params_file", default_value=PathJoinSubstitution([share, "config", "vam_stack.params.yaml"]),
                              description="node parameters YAML"),
        *declare("robot"),
        Node(package="vam_stack", executable="camera_bridge", name="camera_bridge", output="screen",
             parameters=[params, {"config_file": text("camera_config")}], condition=UnlessCondition(is_mujoco())),
        Node(package="vam_stack", executable="vam_policy_node", name="vam_policy_node", output="screen",
             parameters=[params, {"preset": text("preset"), "checkpoint": text("checkpoint"),
                                  "guidance": text("guidance"), "backend": text("backend"),
                                  "device": text("device"), "instruction": text("instruction")}]),
        Node(package="vam_stack", executable="tr_monitor_node", name="tr_monitor_node", output="screen",
             parameters=[params]),
        Node(package="vam_stack", executable="yam_driver", name="yam_driver", output="screen",
             parameters=[params, {"use_emulator": flag("use_emulated_driver")}], condition=UnlessCondition(is_mujoco())),
        # one process, three nodes (yam_mujoco_sim, camera_bridge, yam_driver): no `name`, which would rename all three
        Node(package="vam_stack", executable="yam_mujoco_sim", output="screen",
             parameters=[params, {"task": text("sim_task")}], condition=IfCondition(is_mujoco())),
        Node(package="rviz2", executable="rviz2", name="rviz2", condition=IfCondition(arg("use_rviz")),
             arguments=["-d", PathJoinSubstitution([share, "config", "vam_stack.rviz"])]),
        Node(package="rqt_gui", executable="rqt_gui", name="rqt", condition=IfCondition(arg("use_rqt")),
             arguments=["--perspective-file", PathJoinSubstitution([share, "config", "vam_stack.perspective"])]),
    ])
