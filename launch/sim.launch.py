"""The simulated stack: the mocked LIBERO bridge (cameras + arm), policy, TR monitor, and
optionally rviz2 and rqt. Runs on a CPU with the `libero64` preset (the shipped simulation
policy). Arguments, processes and their parameters: the one table in vam_stack/launch_args.py
(`vam-stack ros-graph sim ...` starts the same processes without launch).

    ros2 launch vam_stack sim.launch.py suite:=spatial episodes:=3 guidance:=flat
"""
from launch import LaunchDescription
from launch.conditions import IfCondition
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.substitutions import FindPackageShare

from vam_stack.launch_args import declare, node_actions


def generate_launch_description():
    share = FindPackageShare("vam_stack")
    arg = LaunchConfiguration
    return LaunchDescription([
        *declare("sim"),
        *node_actions("sim"),
        Node(package="rviz2", executable="rviz2", name="rviz2", condition=IfCondition(arg("use_rviz")),
             arguments=["-d", PathJoinSubstitution([share, "config", "vam_stack.rviz"])]),
        Node(package="rqt_gui", executable="rqt_gui", name="rqt", condition=IfCondition(arg("use_rqt")),
             arguments=["--perspective-file", PathJoinSubstitution([share, "config", "vam_stack.perspective"])]),
    ])
