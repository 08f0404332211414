"""The simulated stack: the mocked LIBERO bridge (cameras + arm), policy, TR monitor, and
optionally rviz2 and rqt. Runs on a CPU with the `libero64` preset (the shipped simulation policy).

    ros2 launch vam_stack sim.launch.py suite:=spatial episodes:=3 guidance:=flat
"""
from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument
from launch.conditions import IfCondition
from launch.substitutions import LaunchConfiguration, PathJoinSubstitution
from launch_ros.actions import Node
from launch_ros.descriptions import ParameterValue
from launch_ros.substitutions import FindPackageShare

ARGUMENTS = {  # name: (default, description)
    "preset": ("libero64", "model preset used when no checkpoint is given"),
    "checkpoint": ("", "policy checkpoint; empty = models/<preset>.safetensors if shipped"),
    "guidance": ("tr_adaptive", "guidance schedule: none | flat | tr_adaptive"),
    "backend": ("torch", "runtime of the DiT calls: torch | onnxruntime | tensorrt"),
    "suite": ("goal", "LIBERO suite (spatial, object, goal, long and the _ood variants)"),
    "task": ("0", "task of the first episode (0-9)"),
    "episodes": ("10", "episodes to run"),
    "use_rviz": ("false", "start rviz2 with config/vam_stack.rviz"),
    "use_rqt": ("false", "start rqt with config/vam_stack.perspective"),
}


def generate_launch_description():
    share = FindPackageShare("vam_stack")
    arg = LaunchConfiguration
    text = lambda name: ParameterValue(arg(name), value_type=str)  # noqa: E731  ("" must stay a string)
    params = arg("params_file")
    return LaunchDescription([
        DeclareLaunchArgument("params_file", description="node parameters YAML",
                              default_value=PathJoinSubstitution([share, "config", "vam_stack_sim.params.yaml"])),
        *[DeclareLaunchArgument(n, default_value=d, description=t) for n, (d, t) in ARGUMENTS.items()],
        Node(package="vam_stack", executable="libero_bridge", name="libero_bridge", output="screen",
             parameters=[params, {"suite": text("suite"), "first_task": ParameterValue(arg("task"), value_type=int),
                                  "episodes": ParameterValue(arg("episodes"), value_type=int)}]),
        Node(package="vam_stack", executable="vam_policy_node", name="vam_policy_node", output="screen",
             parameters=[params, {"preset": text("preset"), "checkpoint": text("checkpoint"),
                                  "guidance": text("guidance"), "backend": text("backend")}]),
        Node(package="vam_stack", executable="tr_monitor_node", name="tr_monitor_node", output="screen",
             parameters=[params]),
        Node(package="rviz2", executable="rviz2", name="rviz2", condition=IfCondition(arg("use_rviz")),
             arguments=["-d", PathJoinSubstitution([share, "config", "vam_stack.rviz"])]),
        Node(package="rqt_gui", executable="rqt_gui", name="rqt", condition=IfCondition(arg("use_rqt")),
             arguments=["--perspective-file", PathJoinSubstitution([share, "config", "vam_stack.perspective"])]),
    ])
