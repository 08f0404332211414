"""The simulated stack: the mocked LIBERO bridge (cameras + arm), policy, TR monitor, and
optionally (use_rviz:=true, use_rqt:=true; headless by default) rviz2 and rqt. Runs on a CPU with
the `libero64` preset (the shipped simulation policy). Arguments, processes and their parameters: the one table in vam_stack/launch_args.py
(`vam-stack ros-graph sim ...` starts the same processes without launch).

    ros2 launch vam_stack sim.launch.py suite:=spatial episodes:=3 guidance:=flat
"""
from launch import LaunchDescription

from vam_stack.launch_args import check_action, declare, gui_actions, node_actions


def generate_launch_description():
    # rviz2 / rqt only with use_rviz:=true / use_rqt:=true and where installed (gui_actions says so otherwise)
    return LaunchDescription([*declare("sim"), *check_action("sim"), *node_actions("sim"), *gui_actions("sim")])
