"""Record demonstrations through the ROS graph: the arm (sim:=mujoco: the simulated YAM with the
scripted expert as teleoperator; sim:=none: camera bridge and driver of the hardware, and with
teleop:=leader the yam_leader node reading a leader arm) and the demo recorder, which writes one MCAP
per episode between its ~/start and
~/stop services. Arguments, processes and their parameters: the one table in
vam_stack/launch_args.py (`vam-stack record` starts the same processes per episode without
launch, calls the services and checks every episode).

    ros2 launch vam_stack record.launch.py sim_task:=handover seed:=7 out_dir:=runs/recordings
    ros2 service call /demo_recorder/start std_srvs/srv/Trigger
    ros2 service call /yam_mujoco_sim/start_teleop std_srvs/srv/Trigger
    ros2 service call /demo_recorder/stop std_srvs/srv/Trigger

    ros2 launch vam_stack record.launch.py sim:=none teleop:=leader out_dir:=runs/recordings
    ros2 service call /yam_leader/engage std_srvs/srv/Trigger     # once the leader matches the arm's pose
"""
from launch import LaunchDescription

from vam_stack.launch_args import check_action, declare, node_actions


def generate_launch_description():
    return LaunchDescription([*declare("record"), *check_action("record"), *node_actions("record")])
