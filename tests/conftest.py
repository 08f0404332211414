"""Project-wide test setup: real ROS 2 (rclpy and its message packages), set up for tests.

rclpy is the pip-installed Jazzy of scripts/setup_env.sh, or a sourced ROS 2 install's. Before
any message module is imported:
- ROS_PYTHON_CHECK_FIELDS=1: Jazzy's generated messages check field types only when asked
  (Humble's always do), so code that passes here also passes on Humble;
- a ROS_DOMAIN_ID of this test run's own (VAM_TEST_ROS_DOMAIN_ID to choose it), and discovery
  limited to this machine, so concurrent runs and other robots on the network never meet.
"""
from __future__ import annotations

import os

os.environ["ROS_PYTHON_CHECK_FIELDS"] = "1"             # read by each message module at its import

from vam_stack.process_graph import isolate_ros  # noqa: E402  (imports no message module)

isolate_ros(int(os.environ["VAM_TEST_ROS_DOMAIN_ID"]) if os.environ.get("VAM_TEST_ROS_DOMAIN_ID") else None)


def _checkout_on_the_ament_index() -> None:
    """Where ROS 2's launch is importable (a sourced ROS 2), the launch tests find `vam_stack` through
    ament's index (FindPackageShare, Node(package=...)): a development prefix of this checkout goes
    first on AMENT_PREFIX_PATH for this run, so they start the code under test, not an installed copy."""
    import atexit
    import importlib.util
    import shutil
    import tempfile
    from pathlib import Path

    if importlib.util.find_spec("launch") is None or os.environ.get("VAM_TEST_KEEP_AMENT_PREFIX"):
        return
    from vam_stack.dev_prefix import make_prefix

    out = tempfile.mkdtemp(prefix="vam_prefix_")
    atexit.register(shutil.rmtree, out, True)
    rest = [p for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]
    os.environ["AMENT_PREFIX_PATH"] = os.pathsep.join([str(make_prefix(out)), *rest])
    # `ros2 launch` (a console script of whichever interpreter built ros2cli) imports the launch files'
    # `vam_stack.launch_args`: from this checkout too
    root = str(Path(__file__).resolve().parents[1])
    rest = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != root]
    os.environ["PYTHONPATH"] = os.pathsep.join([root, *rest])


_checkout_on_the_ament_index()


# --- a harness for node tests ------------------------------------------------------------------
import time  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT_DIR = Path(__file__).resolve().parents[1]

import pytest  # noqa: E402


class RosHarness:
    """A test node on one executor with the nodes under test (or, for nodes in other processes,
    alone): publish table topics, capture them (as rosbags messages, via vam_stack.ros.from_ros),
    call services, spin until a condition holds, and read what the nodes logged at ERROR level
    (from /rosout)."""

    def __init__(self):
        import rclpy
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.qos import QoSProfile

        self.rclpy = rclpy
        rclpy.init()
        self.node = rclpy.create_node("test_harness")
        self.executor = SingleThreadedExecutor()
        self.executor.add_node(self.node)
        self.nodes, self._pubs, self.logs = [], {}, []
        from rcl_interfaces.msg import Log

        self.log_stamps: list[tuple[str, str, float]] = []   # (node, message, stamp [s, system clock])

        def on_log(m) -> None:
            self.logs.append((int(m.level), m.name, m.msg))
            self.log_stamps.append((m.name, m.msg, m.stamp.sec + 1e-9 * m.stamp.nanosec))
        self.node.create_subscription(Log, "/rosout", on_log, QoSProfile(depth=1000))

    def add(self, node):
        self.executor.add_node(node)
        self.nodes.append(node)
        return node

    def remove(self, node):
        self.executor.remove_node(node)
        if node in self.nodes:
            self.nodes.remove(node)

    def advertise(self, key: str):
        """The harness's publisher on a topic-table row (made once)."""
        from vam_stack import ros

        if key not in self._pubs:
            self._pubs[key] = ros.publisher(self.node, key)
        return self._pubs[key]

    def publish(self, key: str, msg) -> None:
        """Publish a rosbags message (vam_stack.msgs builders) on a topic-table row."""
        from vam_stack import ros

        self.advertise(key).publish(ros.to_ros(msg))

    def capture(self, key: str) -> list:
        """List that fills with every message on the row's topic (converted to rosbags)."""
        from vam_stack import ros
        from vam_stack.topics import resolve

        out, t = [], resolve(key)
        ros.subscription(self.node, key, lambda m: out.append(ros.from_ros(m, t.msgtype)))
        return out

    def spin_until(self, cond, timeout: float = 20.0, every=None, period: float = 0.05) -> bool:
        """Spin until cond() is true; call every() each `period` s (e.g. to keep inputs fresh)."""
        end = time.monotonic() + timeout
        nxt = 0.0
        while time.monotonic() < end:
            if every is not None and time.monotonic() >= nxt:
                every()
                nxt = time.monotonic() + period
            if cond():
                return True
            self.executor.spin_once(timeout_sec=0.01)
        return bool(cond())

    def spin_for(self, seconds: float, every=None) -> None:
        self.spin_until(lambda: False, timeout=seconds, every=every)

    def call(self, srv_type, name: str, timeout: float = 20.0, resend_every: float | None = None):
        """Call `name` and return its answer. With `resend_every`, a request not answered in that many
        seconds is sent again (until `timeout`): the first call to a service of a process that has just
        started can lose its answer on a loaded host (Fast DDS sends the response only once the
        server has matched the client's response reader, and waits a bounded time for that); the
        caller then reads an answer to a repeated request."""
        client = self.node.create_client(srv_type, name)
        assert client.wait_for_service(timeout_sec=5.0), f"service {name} not available"
        end = time.monotonic() + timeout
        while True:
            future = client.call_async(srv_type.Request())
            wait = end - time.monotonic() if resend_every is None else min(resend_every, end - time.monotonic())
            self.executor.spin_until_future_complete(future, timeout_sec=max(0.1, wait))
            if future.done() or time.monotonic() >= end:
                break
            client.remove_pending_request(future)
        assert future.done(), f"service {name} did not answer in {timeout} s"
        return future.result()

    def wait_active(self, node_name: str, timeout: float = 900.0) -> bool:
        """Wait for a lifecycle node's own readiness signal: its `get_state` answers `active`. A node
        answers only once its start-up (load, warm-up, a first ONNX export: minutes on a cold cache)
        is over and it spins; asking again until then costs nothing."""
        from lifecycle_msgs.srv import GetState

        client = self.node.create_client(GetState, f"/{node_name}/get_state")
        end = time.monotonic() + timeout
        try:
            while time.monotonic() < end:
                if not client.wait_for_service(timeout_sec=1.0):
                    continue
                future = client.call_async(GetState.Request())
                self.executor.spin_until_future_complete(future, timeout_sec=max(0.1, min(30.0, end - time.monotonic())))
                if future.done() and future.result() is not None and future.result().current_state.label == "active":
                    return True
                if not future.done():
                    client.remove_pending_request(future)
                time.sleep(0.5)
            return False
        finally:
            self.node.destroy_client(client)

    def errors(self, node_name: str | None = None) -> list[str]:
        return [m for lvl, n, m in self.logs if lvl >= 40 and (node_name is None or n.endswith(node_name))]

    def close(self):
        for n in list(self.nodes):
            self.remove(n)
            n.destroy_node()
        self.node.destroy_node()
        self.executor.shutdown()
        self.rclpy.try_shutdown()
        # finalise the destroyed nodes now: a lifecycle node's rcl handle otherwise outlives it until the
        # garbage collector runs, and its late fini removes rcl's /rosout entry of a newer node of the
        # same name (rclpy 7.1), whose log lines then never reach /rosout
        import gc

        gc.collect()


@pytest.fixture(autouse=True)
def _our_loggers_propagate():
    """Where ROS 2's launch is importable, launch_testing's pytest plugin imports it, and `launch.logging`
    makes every logger created after it a LaunchLogger that does not propagate (and a launch test's
    LaunchService does so again): caplog, a handler on the root logger, would then see none of our
    modules' lines. Before each test our loggers propagate again and new loggers are plain ones."""
    import sys

    if "launch.logging" in sys.modules:
        import logging

        ours = {p.parent.name for p in ROOT_DIR.glob("*/__init__.py")}
        logging.setLoggerClass(logging.Logger)
        for name, logger in list(logging.Logger.manager.loggerDict.items()):
            if isinstance(logger, logging.Logger) and name.split(".")[0] in ours:
                logger.propagate = True
    yield


@pytest.fixture(autouse=True)
def _normal_scheduling_after_each_test():
    """A test that runs a node process's `main()` in the test process (`ros.spin_nodes`) makes it
    real-time as a node process is (`process_rt_priority`: every thread SCHED_FIFO, a 0.5 ms GIL
    switch interval); the rest of the suite, and every process it starts, must not inherit that."""
    yield
    import sys

    if sys.getswitchinterval() < 0.005:
        sys.setswitchinterval(0.005)
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return
    for tid in map(int, tids):
        try:
            if os.sched_getscheduler(tid) != os.SCHED_OTHER:
                os.sched_setscheduler(tid, os.SCHED_OTHER, os.sched_param(0))
        except (OSError, AttributeError):
            pass


@pytest.fixture
def ros_harness():
    h = RosHarness()
    try:
        yield h
    finally:
        h.close()


# --- small models shared by the policy, training and fault-campaign tests ------------------
@pytest.fixture(scope="session")
def tiny_cfg():
    from vam_model.networks.config import load_config

    return load_config("tiny")


@pytest.fixture(scope="session")
def tiny_model(tiny_cfg):
    import torch

    from vam_model.networks.model import VideoActionModel

    torch.manual_seed(0)
    return VideoActionModel(tiny_cfg).eval()


@pytest.fixture(scope="session")
def micro_cfg(tiny_cfg):
    """The tiny networks on 64x64 views (128x64 stacked: 32 DiT / 8 head tokens per latent
    frame), so behaviour tests that run many replans stay fast on a 2-core CI machine."""
    import dataclasses

    robot = dataclasses.replace(tiny_cfg.robot, camera_width=64, camera_height=64)
    return dataclasses.replace(tiny_cfg, name="micro", robot=robot)


@pytest.fixture(scope="session")
def micro_model(micro_cfg):
    import torch

    from vam_model.networks.model import VideoActionModel

    torch.manual_seed(0)
    return VideoActionModel(micro_cfg).eval()


@pytest.fixture(scope="session")
def mujoco_renders():
    """Skip (with the backend's own message) where MuJoCo cannot render the YAM's views offscreen."""
    from vam_sim.yam_mujoco.robot import build_sim_robot
    from vam_sim.yam_mujoco.sim import RenderUnavailable

    r = build_sim_robot(task="handover", seed=0)
    try:
        r.sim.render("top")
    except RenderUnavailable as e:
        pytest.skip(f"offscreen rendering unavailable here: {e}")
    finally:
        r.close()
    return True


@pytest.fixture(scope="session")
def onnx_cache(tmp_path_factory):
    """One export cache for the benchmarks' onnxruntime runs: graphs are keyed by preset and
    weights hash, so the seeded `tiny` graphs are exported once per test session, not per test."""
    return tmp_path_factory.mktemp("onnx_cache")
