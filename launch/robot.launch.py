"""The robot stack: cameras, policy (executor + safety filter), TR monitor, YAM driver,
and optionally rviz2 and rqt with the shipped layouts.

    ros2 launch vam_stack robot.launch.py checkpoint:=/path/real.safetensors \\
        instruction:="put the cup on the plate" use_emulated_driver:=true
"""
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.conditions import IfCondition
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution, PythonExpression
from launch_ros.actions import Node
from launch_ros.descriptions import ParameterValue
from launch_ros.substitutions import FindPackageShare

ARGUMENTS = {  # name: (default, description); "" config paths = the shipped config/ files
    "camera_config": ("", "camera bridge YAML; empty = config/cameras.yaml"),
    "preset": ("real", "model preset used when no checkpoint is given"),
    "checkpoint": ("", "trained policy checkpoint (safetensors)"),
    "guidance": ("tr_adaptive", "guidance schedule: none | flat | tr_adaptive"),
    "backend": ("torch", "runtime of the DiT calls: torch | onnxruntime | tensorrt"),
    "instruction": ("", "start an episode with this instruction once inputs arrive"),
    "use_emulated_driver": ("false", "drive emulated motors instead of the arm"),
    "use_rviz": ("true", "start rviz2 with config/vam_stack.rviz"),
    "use_rqt": ("false", "start rqt with config/vam_stack.perspective"),
}


def generate_launch_description():
    share = FindPackageShare("vam_stack")
    arg = LaunchConfiguration
    text = lambda name: ParameterValue(arg(name), value_type=str)  # noqa: E731  ("" must stay a string)
    # a bool argument takes what launch's conditions take on Humble and Jazzy (true/false/1/0, any
    # case); a parameter typed bool alone would refuse 1/0 on Humble; anything else fails the launch
    flag = lambda name: ParameterValue(PythonExpression(  # noqa: E731
        ["{'true': True, '1': True, 'false': False, '0': False}['", arg(name), "'.strip().lower()]"]), value_type=bool)
    params = arg("params_file")
    return LaunchDescription([
        DeclareLaunchArgument("params_file", default_value=PathJoinSubstitution([share, "config", "vam_stack.params.yaml"]),
                              description="node parameters YAML"),
        *[DeclareLaunchArgument(n, default_value=d, description=t) for n, (d, t) in ARGUMENTS.items()],
        Node(package="vam_stack", executable="camera_bridge", name="camera_bridge", output="screen",
             parameters=[params, {"config_file": text("camera_config")}]),
        Node(package="vam_stack", executable="vam_policy_node", name="vam_policy_node", output="screen",
             parameters=[params, {"preset": text("preset"), "checkpoint": text("checkpoint"),
                                  "guidance": text("guidance"), "backend": text("backend"),
                                  "instruction": text("instruction")}]),
        Node(package="vam_stack", executable="tr_monitor_node", name="tr_monitor_node", output="screen",
             parameters=[params]),
        Node(package="vam_stack", executable="yam_driver", name="yam_driver", output="screen",
             parameters=[params, {"use_emulator": flag("use_emulated_driver")}]),
        Node(package="rviz2", executable="rviz2", name="rviz2", condition=IfCondition(arg("use_rviz")),
             arguments=["-d", PathJoinSubstitution([share, "config", "vam_stack.rviz"])]),
        Node(package="rqt_gui", executable="rqt_gui", name="rqt", condition=IfCondition(arg("use_rqt")),
             arguments=["--perspective-file", PathJoinSubstitution([share, "config", "vam_stack.perspective"])]),
    ])
