"""launch_testing of `record.launch.py` (default arguments: the simulated YAM with the scripted
expert, the demo recorder) on a ROS 2 install (after `colcon build` and `source
install/setup.bash`): the recorder's services answer, the expert drives the arm through its safety
filter once ~/start_teleop is called, and every process exits 0 when launch stops it.

Skipped where launch_testing is missing (the package index carries rclpy, not launch): the same
processes with the same arguments run over DDS in tests/vam_data/test_record_graph_process.py.
"""
import unittest

import pytest

launch_testing = pytest.importorskip(
    "launch_testing", reason="launch_testing is not installed (the package index has rclpy, not launch); "
                             "run this on a ROS 2 machine after colcon build")

import launch_testing.actions  # noqa: E402
import launch_testing.asserts  # noqa: E402
from launch import LaunchDescription  # noqa: E402
from launch.actions import IncludeLaunchDescription  # noqa: E402
from launch.launch_description_sources import PythonLaunchDescriptionSource  # noqa: E402
from launch.substitutions import PathJoinSubstitution  # noqa: E402
from launch_ros.substitutions import FindPackageShare  # noqa: E402
from launch_testing_ros import WaitForTopics  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402


@pytest.mark.launch_test
def generate_test_description():
    import tempfile

    out = tempfile.mkdtemp(prefix="vam_record_launch_")
    record = IncludeLaunchDescription(
        PythonLaunchDescriptionSource(PathJoinSubstitution([FindPackageShare("vam_stack"), "launch",
                                                            "record.launch.py"])),
        launch_arguments={"out_dir": out}.items())
    return LaunchDescription([record, launch_testing.actions.ReadyToTest()])


def _trigger(service: str, timeout_s: float = 120.0):
    """Call a std_srvs/Trigger service from a context of its own; the response or None."""
    import time

    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from std_srvs.srv import Trigger

    context = rclpy.Context()
    rclpy.init(context=context)
    try:
        node = rclpy.create_node("record_probe", context=context)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(node)
        client = node.create_client(Trigger, service)
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            if client.wait_for_service(timeout_sec=1.0):
                future = client.call_async(Trigger.Request())
                executor.spin_until_future_complete(future, timeout_sec=max(1.0, end - time.monotonic()))
                if future.done() and future.result().success:
                    return future.result()
            time.sleep(0.5)
        return None
    finally:
        rclpy.shutdown(context=context)


class TestRecord(unittest.TestCase):
    def test_an_episode_records_while_the_expert_drives_the_arm(self):
        self.assertIsNotNone(_trigger("/demo_recorder/start"), "/demo_recorder/start never succeeded")
        self.assertIsNotNone(_trigger("/yam_mujoco_sim/start_teleop"), "/yam_mujoco_sim/start_teleop never succeeded")
        topics = [("/vam/joint_targets", JointState), ("/joint_states", JointState)]
        wait = WaitForTopics(topics, timeout=60.0)
        try:
            self.assertTrue(wait.wait(), "the expert's targets or the arm's joint states never arrived")
        finally:
            wait.shutdown()
        self.assertIsNotNone(_trigger("/demo_recorder/stop", 30.0), "/demo_recorder/stop failed")


@launch_testing.post_shutdown_test()
class TestShutdown(unittest.TestCase):
    def test_processes_exit_cleanly(self, proc_info):
        launch_testing.asserts.assertExitCodes(proc_info)
