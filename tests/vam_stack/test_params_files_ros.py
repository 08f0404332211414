"""The shipped params YAMLs loaded into every node they configure, on real rclpy, as `ros2 run` /
`ros2 launch` pass them (`--params-file`, node-name sections, rcl's YAML typing); and a file
whose value has the wrong type stops the node."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import rclpy
import yaml
from rclpy.exceptions import InvalidParameterTypeException

pytestmark = pytest.mark.adapter

ROOT = Path(__file__).resolve().parents[2]


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
                if (name, key) == ("camera_bridge", "process_rt_priority"):   # declared with cameras of its own
                    from camera_bridge.node import OWN_CAMERA_PARAMS    # (this test injects a push bridge)
                    assert [q.name for q in OWN_CAMERA_PARAMS] == [key] and isinstance(value, int)
                    continue
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
        finally:
            node.destroy_node()
    finally:
        rclpy.try_shutdown()


def test_an_integer_in_a_params_file_for_a_double_parameter_stops_the_node(tmp_path):
    from tr_monitor_node.node import TRMonitorNode

    f = tmp_path / "p.yaml"
    f.write_text("tr_monitor_node:\n  ros__parameters:\n    diagnostic_updater.period: 1\n")
    rclpy.init(args=["tr_monitor_node", "--ros-args", "--params-file", str(f)])
    try:
        with pytest.raises(InvalidParameterTypeException):
            TRMonitorNode()
    finally:
        rclpy.try_shutdown()
