"""Fault campaign, issue "Safety and data you can trust", rows 1-4 (config, robot description,
staleness on the ROS path, overrun). Each test is one row of the closing note's table: it
feeds the input that used to be accepted silently and asserts what happens now."""
from __future__ import annotations

import logging
import time
from types import SimpleNamespace

import numpy as np
import pytest
import yaml

from camera_bridge.config import load_bridge_config
from vam_control.executor import ChunkExecutor
from vam_control.schedule import robot_config
from vam_control.runtime import PolicyRuntime, RuntimeConfig
from vam_control.safety import JOINTS_PER_ARM, SafetyFilter, load_safety_config
from vam_stack import msgs
from vam_stack.config import ConfigError, from_dict, load_yaml
from vam_stack.paths import config_dir, models_dir
from vam_stack.robot import check_layers, load_robot
from vam_stack.topics import JOINT_TARGETS_SOURCE
from yam_driver.command_gate import CommandGate
from yam_driver.config import JOINTS_PER_ARM as DRIVER_DOF, DriverConfig, default_config_path, load_config

ROBOT = load_robot()


def shipped(name: str) -> dict:
    return yaml.safe_load((config_dir() / name).read_text())


def write(tmp_path, name: str, data: dict):
    p = tmp_path / name
    p.write_text(yaml.safe_dump(data))
    return p


# ---- row 1: values that switch protection off are errors ----------------------------------
DRIVER_CASES = [
    ("watchdog_s", float("inf"), "watchdog_s must be in \\(0, 1\\] s"),
    ("ramp_tolerance", float("inf"), "ramp_tolerance must be in"),
    ("rate_hz", 0.001, "rate_hz must be in \\[1, 1000\\] Hz"),
    ("log_every_s", -5.0, "log_every_s must be in \\[0.1, 3600\\]"),
]


@pytest.mark.unit
@pytest.mark.parametrize("key,value,msg", DRIVER_CASES)
def test_driver_values_that_disable_protection_are_refused(tmp_path, key, value, msg):
    data = shipped("yam_driver_damiao.yaml")
    data["yam_driver"][key] = value
    with pytest.raises(ConfigError, match=msg):
        load_config(write(tmp_path, "d.yaml", data))


@pytest.mark.unit
def test_driver_speed_above_the_motor_ceiling_is_refused(tmp_path):
    data = shipped("yam_driver_damiao.yaml")
    data["yam_driver"]["arms"][0]["joints"][0]["max_speed"] = 1e6
    with pytest.raises(ConfigError, match="left_joint1: max_speed 1000000.0 rad/s exceeds the robot description's "
                                          "max_joint_speed 5.0"):
        load_config(write(tmp_path, "d.yaml", data))


SAFETY_CASES = [
    ("rate_hz", 0.001, "rate_hz must be in \\[1, 1000\\] Hz, got 0.001"),
    ("max_joint_velocity", [1e6, 2.0, 2.0, 3.0, 3.0, 3.0], "joint1: max_joint_velocity 1000000.0 rad/s exceeds"),
    ("stale_after_s", 3600.0, "stale_after_s must be in \\(0, 1\\] s"),
    ("joint_upper", [10.0, 3.66519, 3.14159, 1.5708, 1.5708, 2.0944], "joint1: range \\[-2.61799, 10.0\\] leaves"),
    ("margin_rad", 0.6, "margin_rad must be in \\[0, 0.5\\]"),
]


@pytest.mark.unit
@pytest.mark.parametrize("key,value,msg", SAFETY_CASES)
def test_safety_values_that_disable_protection_are_refused(tmp_path, key, value, msg):
    data = shipped("yam_safety.yaml")
    data["yam_safety"][key] = value
    with pytest.raises(ConfigError, match=msg):
        load_safety_config(write(tmp_path, "s.yaml", data))


@pytest.mark.unit
def test_a_missing_safety_limit_is_named_not_defaulted(tmp_path):
    data = shipped("yam_safety.yaml")
    del data["yam_safety"]["joint_lower"]
    with pytest.raises(ConfigError, match="missing required field 'joint_lower' for SafetyConfig"):
        load_safety_config(write(tmp_path, "s.yaml", data))
    data = shipped("yam_driver_damiao.yaml")
    del data["yam_driver"]["arms"][1]["joints"][3]["upper"]
    with pytest.raises(ConfigError, match="missing required field 'upper' for JointConfig"):
        load_config(write(tmp_path, "d.yaml", data))


@pytest.mark.unit
def test_a_missing_required_field_is_named_not_a_python_type_error():
    with pytest.raises(ConfigError, match="config: missing required fields 'bus', 'arms'"):
        from_dict(DriverConfig, {"rate_hz": 30.0})


@pytest.mark.unit
def test_duplicate_yaml_keys_are_refused_with_their_lines(tmp_path):
    text = (config_dir() / "yam_safety.yaml").read_text() + "  stale_after_s: 0.9\n"
    p = tmp_path / "dup.yaml"
    p.write_text(text)
    with pytest.raises(ConfigError, match="duplicate key 'stale_after_s'"):
        load_safety_config(p)
    p.write_text("a: 1\nb: {c: 1, c: 2}\n")
    with pytest.raises(ConfigError, match="duplicate key 'c' \\(line 2; first at line 2\\)"):
        load_yaml(p)
    load_config(default_config_path("damiao"))     # YAML anchors and aliases still load


@pytest.mark.unit
def test_camera_window_that_the_tokenizer_cannot_compress_is_refused(tmp_path):
    data = shipped("cameras.yaml")
    data["camera_bridge"]["window_frames"] = 16
    data["camera_bridge"]["buffer_frames"] = 60
    with pytest.raises(ConfigError, match="window_frames must be 1 \\+ 4k .* got 16"):
        load_bridge_config(write(tmp_path, "c.yaml", data))


@pytest.mark.unit
def test_a_model_yaml_without_its_robot_section_is_refused(tmp_path):
    from vam_model.networks.config import load_config as load_model_config

    data = yaml.safe_load((models_dir() / "libero64.yaml").read_text())
    del data["robot"]
    with pytest.raises(ConfigError, match="missing required field 'robot' for ModelConfig"):
        load_model_config(write(tmp_path, "m.yaml", data))


# ---- row 2: one robot description -----------------------------------------------------------
@pytest.mark.unit
def test_every_layer_agrees_with_the_one_robot_description():
    safety = load_safety_config()
    assert JOINTS_PER_ARM == ROBOT.arm_joints == 6 and DRIVER_DOF == ROBOT.dof_per_arm == 7
    assert (safety.joint_lower, safety.joint_upper) == (ROBOT.joint_lower, ROBOT.joint_upper)
    for bus in ("damiao", "dynamixel"):
        drv = load_config(default_config_path(bus))
        assert drv.joint_names == ROBOT.published_names()
        check_layers(drv, safety)                    # the driver sits inside the filter
    from vam_sim.yam_mujoco.model import _LINKS
    assert [lim for lim, *_ in _LINKS] == list(zip(ROBOT.joint_lower, ROBOT.joint_upper))


@pytest.mark.unit
def test_a_driver_wider_than_the_filter_is_refused_at_start_up(tmp_path):
    data = shipped("yam_driver_damiao.yaml")
    data["yam_driver"]["arms"][0]["joints"][3]["lower"] = -1.69297   # the mechanical limit itself: loads
    drv = load_config(write(tmp_path, "d.yaml", data))
    safety_data = shipped("yam_safety.yaml")
    safety_data["yam_safety"]["joint_lower"][3] = -1.6               # a filter tighter than that driver
    safety = load_safety_config(write(tmp_path, "s.yaml", safety_data))
    with pytest.raises(ConfigError, match="driver left_joint4 limits \\[-1.69297, 1.57\\] are wider than the "
                                          "safety filter's \\[-1.6, 1.5708\\]"):
        check_layers(drv, safety)


@pytest.mark.adapter
def test_driver_node_refuses_to_start_outside_the_filter(ros_harness, tmp_path):
    from rclpy.parameter import Parameter

    from yam_driver.node import YamDriverNode

    safety_data = shipped("yam_safety.yaml")
    safety_data["yam_safety"]["max_joint_velocity"] = [1.0] * 6      # slower than the driver's 1.5 rad/s
    path = write(tmp_path, "s.yaml", safety_data)
    with pytest.raises(ConfigError, match="max_speed 1.5 exceeds the safety filter's max_joint_velocity 1.0"):
        YamDriverNode(parameter_overrides=[Parameter("use_emulator", value=True),
                                           Parameter("safety_config", value=str(path))])


# ---- row 3: staleness on every path; only the filtered stream drives the arm ----------------
@pytest.mark.unit
def test_filter_holds_future_dated_and_stale_commands():
    f = SafetyFilter(load_safety_config(), clock=lambda: 100.0)
    home = np.array(([0.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.5]) * 2)
    f.reset(home)
    assert f.filter(home, stamp=100.5).reason == "future"
    assert f.filter(home, stamp=99.0).reason == "stale"
    assert not f.filter(home, stamp=99.95).held
    assert f.counts["future"] == 1 and f.counts["stale"] == 1


class SlowTickPolicy:
    spec = SimpleNamespace(chunk=10, execute=5, action_dim=14, proprio_dim=14, height=4, width=6,
                           rate_hz=30.0, action_type="absolute_joint")

    def __init__(self, delay_s=0.0):
        self.delay_s = delay_s

    def reset(self, instruction):
        pass

    def infer(self, obs):
        time.sleep(self.delay_s)
        return {"actions": np.tile(obs["proprio"].astype(np.float64), (10, 1)), "tr": 1.0}


def _runtime(policy, cfg=None, **ex):
    sent, tel = [], []
    rt = PolicyRuntime(policy, robot_config(chunk=10, execute=5, rate_hz=30.0, **ex), cfg or RuntimeConfig(),
                       [f"j{i}" for i in range(14)], sent.append, tel.append, safety=SafetyFilter(load_safety_config()))
    rt.sent, rt.tel = sent, tel
    return rt


def _feed(rt, pos):
    rt.add_frame(np.zeros((4, 6, 3), np.uint8))
    rt.set_state([f"j{i}" for i in range(14)], pos)


HOME = np.array([0.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.5] * 2)


def _wait(cond, timeout=15.0, every=None):
    end = time.monotonic() + timeout
    while not cond() and time.monotonic() < end:
        if every is not None:
            every()
        time.sleep(0.02)
    return cond()


@pytest.mark.unit
def test_runtime_stamps_every_target_so_a_late_one_is_held():
    rt = _runtime(SlowTickPolicy())
    try:
        assert _wait(lambda: rt.request_start("hold", wait=True)[0], every=lambda: _feed(rt, HOME))
        assert _wait(lambda: rt.safety.counts["sent"] > 5, every=lambda: _feed(rt, HOME))
        rt.executor.stop()
        rt.executor.last_info.time -= 1.0            # the tick computed this target 1 s ago
        before = rt.safety.counts["stale"]
        rt._send(HOME)
        assert rt.safety.counts["stale"] == before + 1
    finally:
        rt.close()


@pytest.mark.unit
def test_command_gate_follows_only_the_filters_fresh_ordered_stream():
    g = CommandGate(max_age_s=0.2)
    now = 1000.0
    assert g.check(now - 0.01, JOINT_TARGETS_SOURCE, now, publishers=1) is None
    assert "2 publishers" in g.check(now, JOINT_TARGETS_SOURCE, now, publishers=2)
    assert "frame_id ''" in g.check(now, "", now, publishers=1)
    assert "old" in g.check(now - 0.5, JOINT_TARGETS_SOURCE, now, publishers=1)
    assert "future" in g.check(now + 0.5, JOINT_TARGETS_SOURCE, now, publishers=1)
    assert "not after" in g.check(now - 0.02, JOINT_TARGETS_SOURCE, now, publishers=1)
    assert "no header stamp" in g.check(0.0, JOINT_TARGETS_SOURCE, now, publishers=1)
    assert g.counts == {"publishers": 1, "source": 1, "unstamped": 1, "stale": 1, "future": 1, "order": 1}
    with pytest.raises(ValueError, match="max_age_s"):
        CommandGate(max_age_s=float("inf"))


@pytest.mark.adapter
def test_driver_node_ignores_a_second_publisher_and_unfiltered_targets(ros_harness, tmp_path):
    from rclpy.parameter import Parameter

    from vam_stack import ros
    from yam_driver.faults import Mode
    from yam_driver.node import YamDriverNode

    h = ros_harness
    data = shipped("yam_driver_damiao.yaml")
    data["yam_driver"].update(reply_timeout_ms=20.0, rate_hz=20.0, watchdog_s=0.5)
    node = h.add(YamDriverNode(parameter_overrides=[Parameter("config_file", value=str(write(tmp_path, "d.yaml", data))),
                                                    Parameter("use_emulator", value=True)]))
    states = h.capture("joint_states")
    assert h.spin_until(lambda: len(states) >= 3)
    start = msgs.joint_state_to_numpy(states[-1]).position.copy()
    far = start.copy()
    far[0] += 0.3
    # a plain JointState (no filter tag), e.g. from a teleop script: refused
    h.spin_for(1.0, every=lambda: h.publish("joint_targets", msgs.joint_state_msg(node.names, far, stamp_s=time.time())))
    assert abs(msgs.joint_state_to_numpy(states[-1]).position[0] - start[0]) < 0.02
    assert any("is not the safety filter's" in e for e in h.errors("yam_driver"))
    # a second publisher on the topic: even correctly tagged targets are refused while it exists
    intruder = h.rclpy.create_node("intruder")
    pub = ros.publisher(intruder, "joint_targets")
    tagged = lambda: h.publish("joint_targets", msgs.joint_state_msg(  # noqa: E731
        node.names, far, stamp_s=time.time(), frame_id=JOINT_TARGETS_SOURCE))
    h.spin_for(1.0, every=tagged)
    assert abs(msgs.joint_state_to_numpy(states[-1]).position[0] - start[0]) < 0.02
    assert any("2 publishers" in e for e in h.errors("yam_driver")) and node.gate.counts["publishers"] > 0
    intruder.destroy_publisher(pub)
    intruder.destroy_node()
    assert h.spin_until(lambda: abs(msgs.joint_state_to_numpy(states[-1]).position[0] - far[0]) < 0.02,
                        every=tagged, timeout=30)
    assert node.driver.mode in (Mode.RUNNING, Mode.RAMPING)


# ---- row 4: overrun is a state ---------------------------------------------------------------
@pytest.mark.unit
def test_inference_slower_than_a_chunk_is_an_overrun_state(caplog):
    # chunk 10 at 30 Hz spans 0.33 s; inference takes 0.45 s: every chunk arrives after its last action
    cfg = RuntimeConfig(on_overrun="stop")
    rt = _runtime(SlowTickPolicy(delay_s=0.45), cfg, latency_init_s=0.0)
    try:
        with caplog.at_level(logging.ERROR):
            rt.request_start("wave")
            assert _wait(lambda: rt.executor.overrun or rt.executor.dropped >= 4, every=lambda: _feed(rt, HOME),
                         timeout=30)
            assert rt.executor.overrun and rt.status()["overrun"] is True
            assert _wait(lambda: not rt.executor.running, every=lambda: _feed(rt, HOME))   # on_overrun: stop
        assert any("overrun: inference" in r.getMessage() for r in caplog.records)
        assert rt.tel and rt.tel[-1]["overrun"] is True
    finally:
        rt.close()
    with pytest.raises(ConfigError, match="on_overrun must be one of"):
        RuntimeConfig(on_overrun="ignore")


@pytest.mark.unit
def test_executor_reports_overrun_holds_and_recovers():
    class Slow:
        spec = SimpleNamespace(chunk=4, action_dim=14)
        delay = 0.3

        def reset(self, instruction):
            pass

        def infer(self, obs):
            time.sleep(self.delay)
            return {"actions": np.zeros((4, 14))}

    pol, out, infos = Slow(), [], []
    ex = None

    def sink(t):
        out.append(t)
        infos.append(ex.last_info)

    ex = ChunkExecutor(pol, robot_config(chunk=4, execute=2, rate_hz=30.0, blend_ticks=0, rt_priority=0,
                                         latency_init_s=0.0),
                       obs_fn=dict, sink=sink, initial_target=np.zeros(14))
    with ex:
        assert _wait(lambda: ex.overrun, timeout=20)
        assert _wait(lambda: any(i.reason == "overrun" for i in infos[-5:]), timeout=5)
        pol.delay = 0.0
        assert _wait(lambda: not ex.overrun, timeout=20)
    assert ex.stats()["overrun"] == 0.0 and ex.dropped >= 2
