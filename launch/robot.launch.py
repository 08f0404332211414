"""The robot stack: cameras, policy (executor + safety filter), TR monitor, YAM driver,
and optionally (use_rviz:=true, use_rqt:=true; headless by default) rviz2 and rqt with the
shipped layouts. With sim:=mujoco the simulated YAM
(yam_mujoco_sim: the MuJoCo world with the same camera bridge and driver nodes on it) stands in
for the cameras and the arm. Arguments, processes and their parameters: the one table in
vam_stack/launch_args.py (`vam-stack ros-graph robot ...` starts the same processes without launch).

    ros2 launch vam_stack robot.launch.py checkpoint:=/path/real.safetensors \\
        instruction:="put the cup on the plate" bus:=emulated
    ros2 launch vam_stack robot.launch.py bus:=dynamixel driver_config:=/path/my_yam_driver_dynamixel.yaml
    ros2 launch vam_stack robot.launch.py sim:=mujoco preset:=yam64 \\
        instruction:="pick up the blue block with the left arm and hand it to the right arm"

bus:=damiao (the default: the YAM's Damiao motors on can_left / can_right) | dynamixel | emulated
(emulated Damiao motors, the same as use_emulated_driver:=true) picks the driver's bus from the
launch line; driver_config:=FILE gives the driver's YAML (its `bus:` must match; empty =
config/yam_driver_<bus>.yaml), and the policy node checks its limits against the same file.
"""
from launch import LaunchDescription

from vam_stack.launch_args import check_action, declare, gui_actions, node_actions


def generate_launch_description():
    # rviz2 / rqt only with use_rviz:=true / use_rqt:=true and where installed (gui_actions says so otherwise)
    return LaunchDescription([*declare("robot"), *check_action("robot"), *node_actions("robot"), *gui_actions("robot")])
