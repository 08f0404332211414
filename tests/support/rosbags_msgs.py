"""rosbags builders of the ros2_control outputs (trajectory_msgs/JointTrajectory,
std_msgs/Float64MultiArray), for the tests: the nodes build these as rclpy messages
(vam_stack.rclpy_msgs); the conversion tests need each topic-table type as a rosbags message too."""
from __future__ import annotations

import numpy as np

from vam_stack import msg_base


def trajectory(names, points, times_s, stamp_s, frame_id):
    """A rosbags trajectory_msgs/JointTrajectory (the nodes build theirs as rclpy: vam_stack.rclpy_msgs)."""
    C, empty = msg_base.msg_class, np.zeros(0)
    pts = [C("trajectory_msgs/msg/JointTrajectoryPoint")(
        positions=np.asarray(p, np.float64), velocities=empty, accelerations=empty, effort=empty,
        time_from_start=C("builtin_interfaces/msg/Duration")(sec=int(t), nanosec=round((t % 1) * 1e9)))
        for p, t in zip(points, times_s)]
    return C("trajectory_msgs/msg/JointTrajectory")(header=msg_base.header(stamp_s, frame_id), joint_names=list(names),
                                                    points=pts)


def float64_array(values, label="joint"):
    """A rosbags std_msgs/Float64MultiArray."""
    C, arr = msg_base.msg_class, np.asarray(values, np.float64)
    dim = C("std_msgs/msg/MultiArrayDimension")(label=label, size=arr.size, stride=arr.size)
    return C("std_msgs/msg/Float64MultiArray")(layout=C("std_msgs/msg/MultiArrayLayout")(dim=[dim], data_offset=0),
                                               data=arr)
