"""The simulated stack: the mocked LIBERO bridge (cameras + arm), policy, TR monitor, and
optionally rviz2 and rqt. Runs on a CPU with the `libero64` preset (the shipped simulation
policy). Arguments: vam_stack/launch_args.py.

    ros2 launch vam_stack sim.launch.py suite:=spatial episodes:=3 guidance:=flat
"""
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.conditions import IfCondition
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.substitutions import FindPackageShare

from vam_stack.launch_args import declare, integer, text


def generate_launch_description():
    share = FindPackageShare("vam_stack")
    arg = LaunchConfiguration
    params = arg("params_file")
    return LaunchDescription([
        DeclareLaunchArgument("params_file", description="node parameters YAML",
                              default_value=PathJoinSubstitution([share, "config", "vam_stack_sim.params.yaml"])),
        *declare("sim"),
        Node(package="vam_stack", executable="libero_bridge", name="libero_bridge", output="screen",
             parameters=[params, {"suite": text("suite"), "first_task": integer("task"),
                                  "episodes": integer("episodes")}]),
        Node(package="vam_stack", executable="vam_policy_node", name="vam_policy_node", output="screen",
             parameters=[params, {"preset": text("preset"), "checkpoint": text("checkpoint"),
                                  "guidance": text("guidance"), "backend": text("backend"),
                                  "device": text("device")}]),
        Node(package="vam_stack", executable="tr_monitor_node", name="tr_monitor_node", output="screen",
             parameters=[params]),
        Node(package="rviz2", executable="rviz2", name="rviz2", condition=IfCondition(arg("use_rviz")),
             arguments=["-d", PathJoinSubstitution([share, "config", "vam_stack.rviz"])]),
        Node(package="rqt_gui", executable="rqt_gui", name="rqt", condition=IfCondition(arg("use_rqt")),
             arguments=["--perspective-file", PathJoinSubstitution([share, "config", "vam_stack.perspective"])]),
    ])
