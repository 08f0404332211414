"""rclpy's rules that a node can break, checked through the public rclpy API so the same tests
hold against real rclpy (Humble/Jazzy) and against tests/fake_rclpy, which must be as strict:

* the logger (rclpy/impl/rcutils_logger.py): one severity, logger name and filter set per call
  site; unknown keywords refused; once / skip_first / throttle_duration_sec semantics;
* QoSProfile (rclpy/qos.py): keyword-only, unknown keywords refused, history/depth required;
* parameters (rclpy/node.py, rcl arguments and rcl_yaml_param_parser): `--params-file` and
  `-p` given to rclpy.init or Node(cli_args=...), node-name matching, rcl's YAML typing, no
  int-for-double conversion, rclpy's range checks (relative tolerance, step, ranges by type);
  the shipped params YAMLs load into every node they configure, as `ros2 run`/`ros2 launch`
  pass them;
* executors (rclpy/executors.py, rclpy/callback_groups.py): a thread-pool
  MultiThreadedExecutor where callbacks of one mutually exclusive group never overlap and
  different or reentrant groups do.
"""
from __future__ import annotations

import threading
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import rclpy
import yaml
from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor
from rclpy.callback_groups import MutuallyExclusiveCallbackGroup, ReentrantCallbackGroup
from rclpy.clock import Clock, ClockType
from rclpy.exceptions import InvalidParameterTypeException, InvalidParameterValueException
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor, SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import (DurabilityPolicy, HistoryPolicy, InvalidQoSProfileException, QoSProfile,
                       ReliabilityPolicy)
from std_msgs.msg import Bool, String
from std_srvs.srv import Trigger

pytestmark = pytest.mark.adapter

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def ros():
    """rclpy.init with given ROS arguments (as `ros2 run pkg exe --ros-args ...` passes them);
    nodes made through it are destroyed and rclpy shut down afterwards."""
    made = []

    def init(*ros_args: str, program: str = "node") -> None:
        rclpy.init(args=[program, "--ros-args", *ros_args] if ros_args else [program])

    def node(factory, *args, **kwargs):
        n = factory(*args, **kwargs)
        made.append(n)
        return n

    yield SimpleNamespace(init=init, node=node)
    for n in reversed(made):
        n.destroy_node()
    rclpy.try_shutdown()


# --- logger ---------------------------------------------------------------------------------

def _log_at(logger, severity: str, message: str = "m", **kw):
    return getattr(logger, severity)(message, **kw)  # one call site for every severity


def test_a_call_site_cannot_change_severity(ros):
    ros.init()
    log = ros.node(Node, "strict_logger").get_logger()
    assert _log_at(log, "info") is True
    with pytest.raises(ValueError, match="^Logger severity cannot be changed between calls.$"):
        _log_at(log, "error")
    assert _log_at(log, "info") is True  # the site keeps its first severity
    assert log.warning("w") is True and log.error("e") is True  # other call sites, other contexts


def test_a_call_below_the_level_is_dropped_before_the_call_site_is_remembered(ros):
    ros.init()
    log = ros.node(Node, "strict_logger_levels").get_logger()
    assert log.get_effective_level() == rclpy.logging.LoggingSeverity.INFO
    assert _log_at(log, "debug") is False  # not enabled: no context is kept for the site
    assert _log_at(log, "error") is True  # so the same site may then log at error


def test_unknown_keywords_and_changed_filters_are_refused(ros):
    ros.init()
    log = ros.node(Node, "strict_logger_kw").get_logger()
    with pytest.raises(TypeError, match='parameter "throttle" is not one of the recognized logging options'):
        log.info("m", throttle=1.0)
    with pytest.raises(TypeError):
        log.info("m", duration_sec=1.0)
    with pytest.raises(ValueError, match="is not a clock instance"):
        log.info("m", throttle_duration_sec=1.0, throttle_time_source_type="steady")

    def site(**kw):
        return log.warning("m", **kw)
    site(once=True)
    with pytest.raises(ValueError, match="filters cannot be changed"):
        site()

    def site2(d):
        return log.warning("m", throttle_duration_sec=d)
    site2(1.0)
    with pytest.raises(ValueError, match="filter parameters cannot be changed"):
        site2(2.0)

    def site3(name):
        return log.warning("m", name=name)
    site3("a")
    with pytest.raises(ValueError, match="Logger name cannot be changed"):
        site3("b")


def test_once_skip_first_and_throttle_filter_as_rclpy_does(ros):
    ros.init()
    node = ros.node(Node, "strict_logger_filters")
    log = node.get_logger()
    once = [log.info("once", once=True) for _ in range(3)]
    skip = [log.info("skip", skip_first=True) for _ in range(3)]
    assert once == [True, False, False] and skip == [False, True, True]

    def throttled():
        return log.info("throttled", throttle_duration_sec=0.3)
    assert [throttled(), throttled()] == [True, False]  # the first call logs, the next is too soon
    time.sleep(0.35)
    assert [throttled(), throttled()] == [True, False]
    clock = Clock(clock_type=ClockType.STEADY_TIME)  # one object: a new Clock per call would be a change
    steady = [log.info("steady", throttle_duration_sec=10.0, throttle_time_source_type=clock) for _ in range(3)]
    assert steady == [True, False, False]
    with pytest.raises(ValueError, match="filter parameters cannot be changed"):
        for _ in range(2):
            log.info("steady", throttle_duration_sec=10.0, throttle_time_source_type=Clock())
    # filters run in the order throttle, skip_first, once: the throttle's window starts at the
    # skipped first call, so nothing is logged within it
    both = [log.info("both", throttle_duration_sec=10.0, skip_first=True) for _ in range(3)]
    assert both == [False, False, False]


def test_the_message_must_be_a_str(ros):
    ros.init()
    log = ros.node(Node, "strict_logger_msg").get_logger()
    with pytest.raises(TypeError):
        log.error(ValueError("not a str"))


def test_node_logs_reach_rosout_with_their_call_site(ros):
    from rcl_interfaces.msg import Log

    ros.init()
    node = ros.node(Node, "strict_logger_rosout")
    got = []
    node.create_subscription(Log, "/rosout", got.append, QoSProfile(depth=100))
    line = _log_at.__code__.co_firstlineno + 1
    _log_at(node.get_logger(), "warning", "hello rosout")
    ex = SingleThreadedExecutor()
    ex.add_node(node)
    end = time.monotonic() + 5
    while not any(m.msg == "hello rosout" for m in got) and time.monotonic() < end:
        ex.spin_once(timeout_sec=0.05)
    ex.shutdown()
    m = next(m for m in got if m.msg == "hello rosout")
    assert int(m.level) == 30 and m.name == "strict_logger_rosout"
    assert m.file.endswith("test_fake_rclpy_strict.py") and m.function == "_log_at" and m.line == line


# --- QoS ------------------------------------------------------------------------------------

def test_qos_profile_takes_only_its_own_keywords_and_needs_history_or_depth():
    with pytest.raises(AssertionError, match="Invalid arguments passed to constructor"):
        QoSProfile(depth=5, durabilty=DurabilityPolicy.TRANSIENT_LOCAL)  # misspelt
    with pytest.raises(TypeError):
        QoSProfile(10)  # keyword-only
    with pytest.raises(InvalidQoSProfileException, match="History and/or depth settings are required"):
        QoSProfile(reliability=ReliabilityPolicy.RELIABLE)
    with pytest.raises(InvalidQoSProfileException, match="KEEP_LAST without a depth"):
        QoSProfile(history=HistoryPolicy.KEEP_LAST)
    q = QoSProfile(depth=3)
    assert (q.history, q.depth, q.reliability, q.durability) == (
        HistoryPolicy.KEEP_LAST, 3, ReliabilityPolicy.RELIABLE, DurabilityPolicy.VOLATILE)
    assert QoSProfile(history=HistoryPolicy.KEEP_ALL).depth == 10
    with pytest.raises(AttributeError):
        q.durabilty = DurabilityPolicy.VOLATILE  # __slots__
    with pytest.raises(AssertionError):
        q.depth = 2.0


def test_create_calls_take_rclpys_signatures(ros):
    ros.init()
    node = ros.node(Node, "strict_qos")
    with pytest.raises(ValueError, match="history depth must be greater than or equal to zero"):
        node.create_publisher(String, "/strict/a", -1)
    with pytest.raises(TypeError):
        node.create_publisher(String, "/strict/a", "10")
    with pytest.raises(TypeError):
        node.create_publisher(String, "/strict/a", 10, qos=QoSProfile(depth=1))  # not a keyword of rclpy
    with pytest.raises(TypeError):
        node.create_subscription(String, "/strict/a", print, 10, group=None)
    with pytest.raises(TypeError):
        node.create_service(Trigger, "~/x", lambda q, r: r, MutuallyExclusiveCallbackGroup())  # keyword-only
    group = ReentrantCallbackGroup()
    sub = node.create_subscription(String, "/strict/a", print, 10, callback_group=group)
    timer = node.create_timer(1.0, lambda: None, callback_group=group)
    srv = node.create_service(Trigger, "~/x", lambda q, r: r, callback_group=group)
    assert all(group.has_entity(e) for e in (sub, timer, srv))
    other = node.create_subscription(String, "/strict/b", print, 10)
    assert node.default_callback_group.has_entity(other)
    assert isinstance(node.default_callback_group, MutuallyExclusiveCallbackGroup)


# --- parameters: ranges and types -------------------------------------------------------------

def _float_range(lo, hi, step=0.0):
    return ParameterDescriptor(floating_point_range=[FloatingPointRange(from_value=lo, to_value=hi, step=step)])


def _int_range(lo, hi, step=1):
    return ParameterDescriptor(integer_range=[IntegerRange(from_value=lo, to_value=hi, step=step)])


def test_float_ranges_use_rclpys_relative_tolerance_and_step(ros):
    ros.init()
    node = ros.node(Node, "strict_ranges")
    assert node.declare_parameter("a", 10.000005, _float_range(0.1, 10.0)).value == 10.000005  # within 1e-6 rel
    with pytest.raises(InvalidParameterValueException):
        node.declare_parameter("b", -1e-10, _float_range(0.0, 1.0))  # no absolute tolerance at 0
    with pytest.raises(InvalidParameterValueException):
        node.declare_parameter("c", 10.0001, _float_range(0.1, 10.0))
    assert node.declare_parameter("d", 0.75, _float_range(0.0, 1.0, 0.25)).value == 0.75
    with pytest.raises(InvalidParameterValueException, match="valid step"):
        node.declare_parameter("e", 0.3, _float_range(0.0, 1.0, 0.25))


def test_integer_ranges_apply_their_step_and_ranges_apply_by_type(ros):
    ros.init()
    node = ros.node(Node, "strict_int_ranges")
    assert node.declare_parameter("a", 4, _int_range(0, 10, 2)).value == 4
    with pytest.raises(InvalidParameterValueException, match="valid step"):
        node.declare_parameter("b", 3, _int_range(0, 10, 2))
    assert node.declare_parameter("c", 10, _int_range(0, 10, 3)).value == 10  # a bound is always in
    # a floating-point range says nothing about an integer parameter (and the other way round)
    assert node.declare_parameter("d", 50, _float_range(0.0, 1.0)).value == 50
    assert node.declare_parameter("e", 50.0, _int_range(0, 1)).value == 50.0


def test_overrides_of_another_type_are_refused_and_set_parameters_reports(ros):
    ros.init()
    typed = ros.node(Node, "strict_types", parameter_overrides=[Parameter("period_s", value=1)])
    with pytest.raises(InvalidParameterTypeException):
        typed.declare_parameter("period_s", 0.5)  # an int for a double: refused, not converted
    node = ros.node(Node, "strict_types_set")
    node.declare_parameter("period_s", 0.5, _float_range(0.1, 1.0))
    node.declare_parameter("fixed", 1, ParameterDescriptor(read_only=True))
    wrong_type, out_of_range, read_only = node.set_parameters(
        [Parameter("period_s", value=1), Parameter("period_s", value=5.0), Parameter("fixed", value=2)])
    assert not wrong_type.successful and wrong_type.reason.startswith("Wrong parameter type")
    assert not out_of_range.successful and "out of range" in out_of_range.reason
    assert not read_only.successful and read_only.reason == "Trying to set a read-only parameter: fixed."
    assert node.get_parameter("period_s").value == 0.5 and node.get_parameter("fixed").value == 1
    assert node.get_parameter("use_sim_time").value is False  # every node has it (TimeSource)


def test_command_line_values_are_typed_as_rcl_types_them(ros):
    ros.init("-p", "count:=010", "-p", "label:=null", "-p", "quoted:='5'", "-p", "flag:=on",
             "-p", "gain:=1e3", "-p", "names:=[a, b]", "-p", "strict_cli:period_s:=2")
    node = ros.node(Node, "strict_cli")
    assert node.declare_parameter("count", 0).value == 8  # strtoll base 0: octal
    assert node.declare_parameter("label", "").value == "null"  # not YAML's None
    assert node.declare_parameter("quoted", "").value == "5"
    assert node.declare_parameter("flag", False).value is True
    assert node.declare_parameter("gain", 0.0).value == 1000.0  # strtod: a double, YAML 1.1 says str
    assert node.declare_parameter("names", ["x"]).value == ["a", "b"]
    with pytest.raises(InvalidParameterTypeException):
        node.declare_parameter("period_s", 1.0)  # "2" is an integer: no conversion to double


def test_unknown_or_broken_ros_arguments_fail_init(tmp_path):
    with pytest.raises(RuntimeError):
        rclpy.init(args=["node", "--ros-args", "--param-file", "x.yaml"])  # unknown ROS argument
    rclpy.try_shutdown()
    bad = tmp_path / "bad.yaml"
    bad.write_text("strict:\n  ros__parameters:\n    xs: [1, a]\n")  # mixed sequence
    with pytest.raises(RuntimeError):
        rclpy.init(args=["node", "--ros-args", "--params-file", str(bad)])
    rclpy.try_shutdown()
    with pytest.raises(RuntimeError):
        rclpy.init(args=["node", "--ros-args", "--params-file", str(tmp_path / "missing.yaml")])
    rclpy.try_shutdown()
    rclpy.init(args=["node", "-p", "ignored:=1"])  # not after --ros-args: not a ROS argument
    rclpy.try_shutdown()


def test_params_files_match_node_names_as_rclpy_does(ros, tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text(
        "/**:\n  ros__parameters:\n    a: 1\n    b: 1\n"
        "strict_match:\n  ros__parameters:\n    b: 2\n    nested:\n      c: 3\n"
        "robot:\n  strict_match:\n    ros__parameters:\n      b: 4\n"
        "/*/strict_other:\n  ros__parameters:\n    a: 5\n")
    ros.init("--params-file", str(f), "-p", "a:=7")
    root = ros.node(Node, "strict_match")
    assert [root.declare_parameter(n, 0).value for n in ("a", "b", "nested.c")] == [7, 2, 3]
    spaced = ros.node(Node, "strict_match", namespace="/robot")
    assert spaced.get_fully_qualified_name() == "/robot/strict_match"
    assert [spaced.declare_parameter(n, 0).value for n in ("a", "b")] == [7, 4]
    other = ros.node(Node, "strict_other", namespace="/robot")
    assert other.declare_parameter("a", 0).value == 5  # node entries after /** override it
    local = tmp_path / "local.yaml"
    local.write_text("strict_local:\n  ros__parameters:\n    a: 9\n")
    mine = ros.node(Node, "strict_local", cli_args=["--ros-args", "--params-file", str(local)])
    assert mine.declare_parameter("a", 0).value == 9  # the node's own arguments come last
    renamed = ros.node(Node, "strict_anon", cli_args=["--ros-args", "-r", "__node:=strict_local"])
    assert renamed.get_name() == "strict_local" and renamed.declare_parameter("a", 0).value == 7


# --- the shipped params YAMLs, loaded as `ros2 run` / `ros2 launch` pass them ------------------

def _policy(absolute: bool):
    dim = 14 if absolute else 7
    spec = SimpleNamespace(chunk=10, execute=5, action_dim=dim, proprio_dim=14 if absolute else 8, frames=3,
                           height=8, width=16, rate_hz=30.0 if absolute else 10.0,
                           action_type="absolute_joint" if absolute else "eef_delta")

    class Policy:
        def reset(self, instruction):
            pass

        def infer(self, obs):
            return {"actions": np.zeros((spec.chunk, dim))}
    p = Policy()
    p.spec = spec
    return p


def _push_bridge():
    from camera_bridge.bridge import CameraBridge
    from camera_bridge.config import BridgeConfig, CameraConfig

    cams = tuple(CameraConfig(n, kind="push", width=32, height=24, fps=20.0, encoding="rgb8", max_age_ms=150.0)
                 for n in ("left", "front", "right"))
    return CameraBridge(BridgeConfig(cameras=cams, view_width=32, view_height=24, source_fps=20.0, frame_skip=1,
                                     window_frames=5, buffer_frames=5, max_gap_ms=75.0, max_window_age_ms=150.0,
                                     tick_hz=40.0))


def _factories(params_file: str) -> dict:
    """Node name -> a maker of that node. Injected: a stand-in policy (the real presets build
    networks) and a push camera bridge (no cameras here); parameters still come from the file."""
    from camera_bridge.node import CameraBridgeNode
    from vam_sim.libero_mock.node import LiberoBridgeNode
    from tr_monitor_node.node import TRMonitorNode
    from vam_policy_node.node import VamPolicyNode
    from yam_driver.node import YamDriverNode

    robot = params_file == "vam_stack.params.yaml"
    return {"camera_bridge": lambda: CameraBridgeNode(bridge=_push_bridge()),
            "vam_policy_node": lambda: VamPolicyNode(policy=_policy(absolute=robot)),
            "tr_monitor_node": TRMonitorNode, "yam_driver": YamDriverNode, "libero_bridge": LiberoBridgeNode}


@pytest.mark.parametrize("params_file", ["vam_stack.params.yaml", "vam_stack_sim.params.yaml"])
def test_shipped_params_files_load_into_every_node_they_configure(params_file, tmp_path):
    path = ROOT / "config" / params_file
    sections = yaml.safe_load(path.read_text())
    # what robot.launch.py adds for the driver (use_emulated_driver:=true), as launch_ros
    # passes a parameter dict: one more params file for the node, after the shared one
    extra = tmp_path / "launch_params.yaml"
    extra.write_text(yaml.dump({"/yam_driver": {"ros__parameters": {"use_emulator": True}}}))
    factories = _factories(params_file)
    assert set(sections) <= set(factories), f"{params_file} configures nodes the test does not know"
    for name, section in sections.items():
        args = ["--params-file", str(path), "--params-file", str(extra), "-r", f"__node:={name}"]
        rclpy.init(args=[name, "--ros-args", *args])
        node = None
        try:
            node = factories[name]()
            assert node.get_name() == name
            for key, value in section["ros__parameters"].items():
                got = node.get_parameter(key)
                if (name, key) == ("yam_driver", "use_emulator"):
                    continue  # the launch's later file says true
                assert got.value == value and type(got.value) is type(value), (
                    f"{params_file}: {name}.{key} is {got.value!r}, the file says {value!r}")
            if name == "yam_driver":
                assert node.get_parameter("use_emulator").value is True
        finally:
            if node is not None:
                node.destroy_node()
            rclpy.try_shutdown()


def test_a_node_given_the_file_in_cli_args_starts_with_its_values():
    from tr_monitor_node.node import TRMonitorNode

    path = ROOT / "config" / "vam_stack.params.yaml"
    want = yaml.safe_load(path.read_text())["tr_monitor_node"]["ros__parameters"]
    rclpy.init(args=["test"])
    try:
        node = TRMonitorNode(cli_args=["--ros-args", "--params-file", str(path)])
        try:
            assert {k: node.get_parameter(k).value for k in want} == want
            assert node.monitor.cfg.token_grid == (want["token_rows"], want["token_cols"])
        finally:
            node.destroy_node()
    finally:
        rclpy.try_shutdown()


def test_an_integer_in_a_params_file_for_a_double_parameter_stops_the_node(tmp_path):
    from tr_monitor_node.node import TRMonitorNode

    f = tmp_path / "p.yaml"
    f.write_text("tr_monitor_node:\n  ros__parameters:\n    diagnostics_period_s: 1\n")
    rclpy.init(args=["tr_monitor_node", "--ros-args", "--params-file", str(f)])
    try:
        with pytest.raises(InvalidParameterTypeException):
            TRMonitorNode()
    finally:
        rclpy.try_shutdown()


# --- executors and callback groups ------------------------------------------------------------

class _Overlap:
    """Counts how many callbacks run at once."""

    def __init__(self):
        self.lock, self.now, self.most, self.calls = threading.Lock(), 0, 0, 0

    def __call__(self, *args):
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
            self.calls += 1
        time.sleep(0.05)
        with self.lock:
            self.now -= 1
        return args[1] if len(args) == 2 else None  # a service's response


def _spin(ex, seconds: float):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        ex.spin_once(timeout_sec=0.02)


@pytest.mark.parametrize("groups, overlap", [("default", False), ("one_exclusive", False),
                                             ("two_exclusive", True), ("reentrant", True)])
def test_multithreaded_executor_honours_callback_groups(ros, groups, overlap):
    ros.init()
    node = ros.node(Node, "strict_groups")
    seen = _Overlap()
    shared = MutuallyExclusiveCallbackGroup() if groups == "one_exclusive" else ReentrantCallbackGroup()
    for _ in range(2):
        group = {"default": None, "one_exclusive": shared, "reentrant": shared,
                 "two_exclusive": MutuallyExclusiveCallbackGroup()}[groups]
        node.create_timer(0.01, seen, callback_group=group)
    ex = MultiThreadedExecutor(num_threads=4)
    ex.add_node(node)
    _spin(ex, 0.8)
    ex.shutdown()
    assert seen.calls >= 4
    assert (seen.most > 1) is overlap, f"{groups}: at most {seen.most} callbacks ran at once"


def test_a_blocking_service_does_not_hold_a_subscription_in_another_group(ros):
    ros.init()
    node = ros.node(Node, "strict_busy")
    started, release, estops = threading.Event(), threading.Event(), []

    def slow(request, response):
        started.set()
        release.wait(5)
        response.success = True
        return response

    node.create_service(Trigger, "~/slow", slow, callback_group=MutuallyExclusiveCallbackGroup())
    node.create_subscription(Bool, "/strict/estop", lambda m: estops.append(m.data), 10,
                             callback_group=MutuallyExclusiveCallbackGroup())
    caller = ros.node(Node, "strict_caller")
    client = caller.create_client(Trigger, "/strict_busy/slow")
    pub = caller.create_publisher(Bool, "/strict/estop", 10)
    ex = MultiThreadedExecutor(num_threads=3)
    ex.add_node(node)
    ex.add_node(caller)
    assert client.wait_for_service(timeout_sec=5.0)
    future = client.call_async(Trigger.Request())
    end = time.monotonic() + 10
    while not started.is_set() and time.monotonic() < end:
        ex.spin_once(timeout_sec=0.02)
    assert started.is_set()
    while not estops and time.monotonic() < end:
        pub.publish(Bool(data=True))  # until discovery has matched them, on a real middleware
        ex.spin_once(timeout_sec=0.02)
    assert estops and estops[0] is True and not future.done(), "the e-stop waited for the service"
    release.set()
    ex.spin_until_future_complete(future, timeout_sec=5)
    assert future.done() and future.result().success
    ex.shutdown()


def test_single_threaded_executor_runs_one_callback_at_a_time_even_in_a_reentrant_group(ros):
    ros.init()
    node = ros.node(Node, "strict_single")
    seen = _Overlap()
    group = ReentrantCallbackGroup()
    for _ in range(2):
        node.create_timer(0.01, seen, callback_group=group)
    ex = SingleThreadedExecutor()
    ex.add_node(node)
    _spin(ex, 0.4)
    ex.shutdown()
    assert seen.calls >= 4 and seen.most == 1


def test_a_callback_exception_comes_out_of_spin_once(ros):
    ros.init()
    node = ros.node(Node, "strict_raise")

    def boom():
        raise RuntimeError("callback failed")
    node.create_timer(0.01, boom)
    ex = MultiThreadedExecutor(num_threads=2)
    ex.add_node(node)
    with pytest.raises(RuntimeError, match="callback failed"):
        _spin(ex, 2.0)
    ex.shutdown()


def test_a_node_belongs_to_one_executor_and_spin_ends_on_shutdown(ros):
    ros.init()
    node = ros.node(Node, "strict_owner")
    a, b = SingleThreadedExecutor(), MultiThreadedExecutor(num_threads=2)
    assert a.add_node(node) is True and a.add_node(node) is False
    b.add_node(node)
    assert node.executor is b and node not in a.get_nodes()
    b.remove_node(node)
    errors = []

    def spin():
        try:
            rclpy.spin(node)
        except ExternalShutdownException:
            errors.append("external shutdown")

    t = threading.Thread(target=spin, daemon=True)
    t.start()
    time.sleep(0.3)
    rclpy.try_shutdown()
    t.join(5)
    assert not t.is_alive()
    a.shutdown()
    b.shutdown()
