"""Fault campaign (issue 42): the arm stays safe when the hardware lies. Each test is one row of
the issue and fails on the behaviour before the fix.

Rows: a motor that drops torque with no error flag (Damiao state, Dynamixel Torque Enable) and
one that stops following while it says it holds (tracking error); recovery re-enables every motor
and ramps from the measured position; one implausible reading on the tick targets go stale;
a checkpoint whose metadata (statistics, config, text encoder) or dtypes changed after saving;
a Dynamixel port lost mid-run; target stamps from another clock, the future or NaN; camera
stamps that are NaN; the safety filter called in a burst, backwards or with a NaN stamp; an
instruction with no visible character. Lower harm: the clock stepping back, a YAML alias bomb,
a second instruction during a stuck inference, a damaged dataset."""
import dataclasses
import json
import time

import numpy as np
import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

from yam_driver.config import load_config
from yam_driver.driver import YamDriver
from yam_driver.faults import Mode
from yam_driver.emulators import EmulatedRig

pytestmark = pytest.mark.adapter
BUSES = ["dynamixel", "damiao"]


def _cfg(bus: str, **kw):
    return dataclasses.replace(load_config(bus=bus), reply_timeout_ms=20.0, **kw)


class FakeClock:
    def __init__(self):
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def _run(driver, ticks: int, clock=None, period=None):
    reports = []
    for _ in range(ticks):
        if clock is not None:
            clock.t += period
        reports.append(driver.step())
    return reports


def _running(rig, clock=None):
    """A started driver following a target at the present position (mode running)."""
    driver = YamDriver(rig.config, clock=clock or time.monotonic)
    driver.start()
    driver.set_targets(driver._present.copy())
    for _ in range(40):
        if driver.step().mode == Mode.RUNNING:
            return driver
    raise AssertionError(f"driver did not reach running: {driver.mode}")


# ---- row 1: torque loss and tracking error ---------------------------------------------------------
@pytest.mark.parametrize("bus", BUSES)
def test_a_motor_dropping_torque_without_an_error_flag_is_a_named_fault(bus):
    with EmulatedRig(_cfg(bus), tau_s=0.003) as rig:
        driver = _running(rig)
        rig.drop_torque("left_joint2")
        end = time.monotonic() + 1.0          # Dynamixel: Torque Enable is read every torque_check_period_s
        while driver.mode != Mode.FAULT and time.monotonic() < end:
            driver.step()
            time.sleep(0.01)
        assert driver.mode == Mode.FAULT
        assert [f.joint for f in driver.faults] == ["left_joint2"] and "torque off" in driver.faults[0].reason
        report = driver.step()                # every other joint still holds, torque on
        assert np.isfinite(report.written[[i for i in range(14) if i != 1]]).all()
        assert rig.torque_enabled("right_joint2") and rig.torque_enabled("left_joint1")
        driver.shutdown()


def test_a_joint_that_stops_following_while_saying_it_holds_trips_the_tracking_bound():
    clock = FakeClock()
    with EmulatedRig(_cfg("damiao"), tau_s=0.003) as rig:
        driver = _running(rig, clock)
        rig.stick("left_joint1")              # reports enabled, no longer moves
        target = driver._present.copy()
        target[0] += 1.0
        driver.set_targets(target, stamp=clock.t)
        reports = []
        for _ in range(60):
            clock.t += 0.02
            driver.set_targets(target, stamp=clock.t)
            reports.append(driver.step())
            if driver.mode == Mode.FAULT:
                break
        assert driver.mode == Mode.FAULT, "a joint 0.3 rad behind its command must be a fault"
        fault = driver.faults[0]
        assert fault.joint == "left_joint1" and "tracking error" in fault.reason
        lag = abs(reports[-1].position[0] - reports[-1].commanded[0]) if np.isfinite(reports[-1].commanded[0]) else 0
        assert lag < 0.6 and len(driver.faults) == 1
        driver.shutdown()


def test_recovery_re_enables_every_motor_and_ramps_from_the_measured_position():
    """A CAN bus loss with power-cycled motors: they come back disabled. clear_faults() used to
    re-enable only when the bus flag said torque was off (never, with on_fault: hold)."""
    with EmulatedRig(_cfg("damiao"), tau_s=0.003) as rig:
        driver = _running(rig)
        for j in ("joint1", "joint2", "joint3", "joint4", "joint5", "joint6", "gripper"):
            rig.drop_torque(f"left_{j}")
        driver.step()
        assert driver.mode == Mode.FAULT and len(driver.faults) == 7
        measured = rig.positions()
        driver.clear_faults()
        assert driver.mode == Mode.RAMPING and all(rig.torque_enabled(f"left_{j}") for j in ("joint1", "gripper"))
        np.testing.assert_allclose(driver._command, measured, atol=2e-3)   # no jump to a stale command
        report = driver.step()
        assert report.mode == Mode.RAMPING and not report.new_faults
        driver.shutdown()


def test_the_shipped_driver_files_state_the_new_bounds_and_protection_off_is_refused(tmp_path):
    import yaml

    from vam_stack.config import ConfigError
    from yam_driver.config import default_config_path

    for bus in BUSES:
        cfg = load_config(bus=bus)
        assert 0 < cfg.max_tracking_error <= 0.5 and cfg.tracking_error_ticks >= 1
    data = yaml.safe_load(default_config_path("damiao").read_text())
    for key, value, msg in [("max_tracking_error", 1e9, "max_tracking_error"), ("reading_speed_factor", 1e6,
                            "reading_speed_factor"), ("connect_retries", 1000000000, "connect_retries"),
                            ("torque_check_period_s", 60.0, "torque_check_period_s")]:
        d = json.loads(json.dumps(data))
        d["yam_driver"][key] = value
        (tmp_path / "d.yaml").write_text(yaml.safe_dump(d))
        with pytest.raises(ConfigError, match=msg):
            load_config(tmp_path / "d.yaml")


# ---- row 2: a glitched reading is not a hold target -----------------------------------------------------
@pytest.mark.parametrize("bus", BUSES)
def test_one_implausible_reading_on_the_stale_tick_is_refused_not_held(bus):
    clock = FakeClock()
    with EmulatedRig(_cfg(bus), tau_s=0.003) as rig:
        driver = _running(rig, clock)
        before = rig.positions()
        # targets go stale on the very tick the bus reports +2.0 rad on left_joint1
        clock.t += driver.config.watchdog_s + 0.05
        rig.glitch("left_joint1", 2.0)
        reports = _run(driver, 15, clock, driver.config.period_s)
        assert reports[0].mode == Mode.HOLDING and "implausible reading" in reports[0].errors["left_joint1"]
        assert driver.glitches == 1 and driver.mode == Mode.HOLDING
        after = rig.positions()
        assert abs(after[0] - before[0]) < 0.02, f"left_joint1 moved {after[0] - before[0]:+.3f} rad on a glitch"
        assert abs(driver._hold[0] - before[0]) < 0.02
        driver.shutdown()


def test_a_reading_that_keeps_lying_becomes_a_fault():
    with EmulatedRig(_cfg("damiao"), tau_s=0.003) as rig:
        driver = _running(rig)
        rig.glitch("right_joint3", -1.5, count=10)
        _run(driver, 5)
        assert driver.mode == Mode.FAULT and driver.faults[0].joint == "right_joint3"
        assert "implausible reading" in driver.faults[0].reason
        driver.shutdown()


# ---- row 4: a lost port ----------------------------------------------------------------------------
def test_a_lost_dynamixel_port_faults_that_arm_and_the_other_keeps_holding():
    cfg = _cfg("dynamixel")
    with EmulatedRig(cfg, tau_s=0.003) as rig:
        driver = _running(rig)
        left_port = next(a.port for a in cfg.arms if a.name == "left")
        rig.emulators[left_port].stop()       # the USB adapter is unplugged
        reports = _run(driver, 6)             # no exception out of step()
        assert driver.mode == Mode.FAULT
        faulted = sorted(f.joint for f in driver.faults)
        left = ("joint1", "joint2", "joint3", "joint4", "joint5", "joint6", "gripper")
        assert faulted == sorted(f"left_{j}" for j in left)
        assert "port" in driver.faults[0].reason
        assert np.isfinite(reports[-1].written[7:]).all()                     # the right arm is still written
        assert all(rig.torque_enabled(f"right_{j}") for j in ("joint1", "joint6"))   # and holds, torque on
        stats = driver.run(max_ticks=3, handle_signals=False)                # the loop neither: it ends cleanly
        assert stats.stop_reason == "max_ticks"


# ---- row 5: target stamps --------------------------------------------------------------------------
@pytest.mark.parametrize("stamp, match", [(float("nan"), "finite"), (float("inf"), "finite"),
                                          ("wall", "ahead of the driver clock"), ("future", "ahead of the driver clock")])
def test_target_stamps_from_another_clock_the_future_or_nan_are_refused(stamp, match):
    with EmulatedRig(_cfg("damiao"), tau_s=0.003) as rig:
        driver = _running(rig)
        target = driver._present.copy()
        value = {"wall": time.time(), "future": time.monotonic() + 3600.0}.get(stamp, stamp)
        with pytest.raises(ValueError, match=match):
            driver.set_targets(target, stamp=value)
        driver.shutdown()


# ---- row 6: camera stamps ---------------------------------------------------------------------------
def test_a_nan_camera_stamp_is_refused_and_a_stopped_camera_goes_stale():
    from camera_bridge.config import CameraConfig
    from camera_bridge.sources.base import ClockMapper, FrameStale, NoFrameYet
    from camera_bridge.sources.push import PushSource

    clock = FakeClock()
    src = PushSource(CameraConfig("top", kind="push", width=32, height=24, fps=30.0, encoding="rgb8",
                                  max_age_ms=100.0), clock=clock)
    src.connect()
    with pytest.raises(ValueError, match="finite"):
        src.push(np.zeros((24, 32, 3), np.uint8), stamp_s=float("nan"))
    src.push(np.zeros((24, 32, 3), np.uint8), stamp_s=clock.t + 10.0)          # a device clock far ahead:
    with pytest.raises(NoFrameYet):                                           # refused by itself (issue 58 row 9)
        src.read_latest()
    assert src.stats.bad_stamps == 1
    src.push(np.zeros((24, 32, 3), np.uint8), stamp_s=clock.t + 0.02)          # ahead, within one frame period
    assert src.read_latest().stamp_s == clock.t + 0.02
    clock.t += 0.9                                                            # the camera stopped
    with pytest.raises(FrameStale):                                          # its arrival time ages it anyway
        src.read_latest()
    mapper = ClockMapper()
    with pytest.raises(ValueError, match="not finite"):
        mapper.map(float("nan"), 1.0)
    assert mapper.map(1000.0, 2.0) == pytest.approx(2.0)                      # the NaN left no trace


# ---- row 7: the safety filter over time -----------------------------------------------------------------
def test_the_filter_bounds_velocity_over_stamps_and_holds_backwards_and_nan_stamps():
    from vam_control.safety import SafetyFilter, load_safety_config

    cfg = load_safety_config()
    lo, hi, step = cfg.bounds()
    home = (lo + hi) / 2
    f = SafetyFilter(cfg, clock=lambda: 100.0)
    f.reset(home)
    target = home.copy()
    target[0] += 2.0
    f.filter(target, stamp=99.99, now=100.0)
    for _ in range(30):                                       # 30 commands at one instant
        sent = f.filter(target, stamp=100.0, now=100.0).sent
    assert abs(sent[0] - home[0]) <= 1.5 * step[0] + 1e-9, f"moved {sent[0] - home[0]:.3f} rad in one instant"
    assert f.filter(target, stamp=99.9, now=100.0).reason == "backwards"
    assert f.filter(target, stamp=float("nan"), now=100.0).reason == "nonfinite"
    moved = f.filter(target, stamp=100.0 + 1.0 / cfg.rate_hz, now=100.0 + 1.0 / cfg.rate_hz).sent
    assert moved[0] - sent[0] == pytest.approx(step[0])      # one tick later: one tick's step


# ---- row 8: an instruction with nothing to read ----------------------------------------------------------
@pytest.mark.parametrize("text", ["\u200b\u200b", "   ", "\u2060\ufeff\n\t", "x" * 100000])
def test_an_instruction_with_no_visible_character_or_a_megabyte_is_refused(text, micro_model):
    from vam_model.networks.text_encoder import TextEncoder
    from vam_model.policy import InputError, PolicyConfig, VamPolicy

    cfg = micro_model.cfg
    policy = VamPolicy(micro_model, PolicyConfig(),
                       TextEncoder(PolicyConfig().text_encoder, cfg.dit.text_tokens, cfg.dit.text_in_dim), {})
    with pytest.raises(InputError, match="no visible character|more than 2000"):
        policy.reset(text)
    policy.reset("put the bowl on the plate")                 # a real one still works


def test_the_runtime_refuses_it_without_touching_the_running_episode():
    from vam_stack.instruction import check_instruction

    with pytest.raises(ValueError, match=r"no visible character.*\\u200b"):
        check_instruction("\u200b\u200b")
    assert check_instruction("pick up the cup") == "pick up the cup"
    assert check_instruction("把杯子放在盘子上") == "把杯子放在盘子上"            # other scripts are visible


# ---- row 3: the checkpoint hash covers the metadata, dtypes are the model's -------------------------------
@pytest.fixture
def ckpt(tmp_path, micro_model, micro_cfg):
    from vam_model.networks.checkpoint import save_checkpoint

    stats = {"action": [[0.0] * micro_cfg.robot.action_dim, [1.0] * micro_cfg.robot.action_dim]}
    return save_checkpoint(tmp_path / "m.safetensors", micro_model, micro_cfg, extra={"stats": stats})


def _rewrite(path, mutate_tensors=None, mutate_meta=None, rehash_tensors=False):
    from vam_model.networks.checkpoint import FULL_HASH_KEY, HASH_KEY, checkpoint_digest, tensor_digest

    state = load_file(str(path))
    with safe_open(str(path), framework="pt") as f:
        meta = dict(f.metadata())
    if mutate_tensors:
        state = mutate_tensors(state)
    if mutate_meta:
        mutate_meta(meta)
    if rehash_tensors:                                         # a forger who knows both hashes' recipes
        meta[HASH_KEY] = tensor_digest(state)
        meta[FULL_HASH_KEY] = checkpoint_digest(meta[HASH_KEY], meta)
    save_file(state, str(path), metadata=meta)


@pytest.mark.parametrize("field", ["extra", "config"])
def test_edited_statistics_or_config_are_refused_by_verify_and_load(ckpt, micro_cfg, field):
    from vam_model.networks.checkpoint import CheckpointError, load_checkpoint, verify_checkpoint
    from vam_model.networks.model import VideoActionModel

    def edit(meta):
        d = json.loads(meta[field])
        if field == "extra":
            d["stats"]["action"][0][0] += 1.0                  # left_joint1 targets would shift by +1 rad
            meta[field] = json.dumps(d)
        else:                                                  # the same values, written another way, and
            meta[field] = json.dumps(d, indent=1)              # a field nobody reads yet: still not the saved file
            meta["note"] = "edited"
    _rewrite(ckpt, mutate_meta=edit)
    with pytest.raises(CheckpointError, match="metadata does not match"):
        verify_checkpoint(ckpt)
    with pytest.raises(CheckpointError, match="metadata does not match"):
        load_checkpoint(ckpt, VideoActionModel(micro_cfg))


def test_weights_cast_to_another_dtype_and_re_hashed_are_refused(ckpt, micro_cfg):
    from vam_model.networks.checkpoint import CheckpointError, load_checkpoint
    from vam_model.networks.model import VideoActionModel

    _rewrite(ckpt, mutate_tensors=lambda s: {k: (v.to(torch.int8) if v.is_floating_point() else v) for k, v in s.items()},
             rehash_tensors=True)
    with pytest.raises(CheckpointError, match="is torch.int8, the model's is torch.float32"):
        load_checkpoint(ckpt, VideoActionModel(micro_cfg))


# ---- lower harm: the clock steps back ----------------------------------------------------------------
def test_a_clock_stepped_back_does_not_hold_the_arm_until_it_catches_up():
    from yam_driver.command_gate import SOURCE, CommandGate

    gate = CommandGate(max_age_s=0.2)
    assert gate.check(1000.0, SOURCE, 1000.001, 1) is None
    assert gate.check(1000.033, SOURCE, 1000.034, 1) is None
    # the system clock is set back 30 s: the next fresh targets are stamped ~970 s
    assert gate.check(970.0, SOURCE, 970.001, 1) is None and gate.clock_steps_back == 1
    assert gate.check(970.033, SOURCE, 970.034, 1) is None
    assert gate.check(970.0, SOURCE, 970.05, 1) is not None          # a replay within the new order is refused
    assert gate.check(1000.033, SOURCE, 970.06, 1) is not None        # and a target from before the step is future


# ---- lower harm: a YAML alias bomb --------------------------------------------------------------------
def test_a_yaml_alias_bomb_is_refused_at_once_with_a_short_message(tmp_path):
    from vam_model.networks.config import load_config as load_model
    from vam_stack.config import ConfigError

    levels = ["a0: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"]
    levels += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 9)]   # 10^9 values
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("\n".join(levels) + "\nmodel:\n  name: bomb\n  dit:\n    layers: *a8\n")
    t0 = time.monotonic()
    with pytest.raises(ConfigError, match="expands to more than") as e:
        load_model(bomb)
    assert time.monotonic() - t0 < 2.0 and len(str(e.value)) < 500


# ---- lower harm: a second instruction during a long inference --------------------------------------------
def test_a_second_instruction_during_a_stuck_inference_is_refused_in_the_operators_words():
    import threading
    from types import SimpleNamespace

    from vam_control.schedule import robot_config
    from vam_control.runtime import PolicyRuntime, RuntimeConfig
    from vam_control.safety import SafetyFilter, load_safety_config

    release = threading.Event()

    class Stuck:
        spec = SimpleNamespace(chunk=10, execute=5, action_dim=14, proprio_dim=14, height=8, width=16,
                               rate_hz=30.0, action_type="absolute_joint")

        def reset(self, instruction):
            pass

        def infer(self, obs):
            release.wait(30)
            return {"actions": np.tile(obs["proprio"].astype(np.float64), (10, 1))}

    safety = SafetyFilter(load_safety_config())
    lo, hi, _ = safety.cfg.bounds()
    names = load_config().joint_names
    rt = PolicyRuntime(Stuck(), robot_config(chunk=10, execute=5, action_dim=14), RuntimeConfig(),
                       names, send=lambda t: None, on_telemetry=lambda t: None, safety=safety)
    stop = rt.executor.stop
    rt.executor.stop = lambda timeout=5.0, abandon=False: stop(timeout=0.2, abandon=abandon)
    try:
        for _ in range(3):
            rt.add_frame(np.zeros((8, 16, 3), np.uint8))
        rt.set_state(names, (lo + hi) / 2)
        assert rt.request_start("wipe the table", wait=True)[0]
        time.sleep(0.3)                                    # the first inference is now stuck
        ok, message = rt.request_start("fold the towel", wait=True)
        assert not ok and "still running" in message and "RuntimeError" not in message
    finally:
        release.set()
        rt.close()


# ---- lower harm: a damaged dataset is named up front ------------------------------------------------------
@pytest.fixture(scope="module")
def dataset_dir(tmp_path_factory):
    from vam_sim.libero_mock import LiberoMockConfig, rollout_expert
    from vam_sim.collect import bridge_info
    from vam_data.dataset import write_dataset

    root = tmp_path_factory.mktemp("ds") / "demos"
    return write_dataset(root, [rollout_expert("goal", 1, 0, 6), rollout_expert("goal", 6, 0, 6)],
                         bridge_info(LiberoMockConfig()))


def _damaged_copy(src, dst, damage):
    import shutil

    shutil.copytree(src, dst)
    damage(dst)
    return dst


def _truncate(root):
    f = sorted((root / "data").rglob("*.npz"))[1]
    f.write_bytes(f.read_bytes()[:200])


def _corrupt_png(root):
    f = sorted((root / "data").rglob("*.npz"))[0]
    with np.load(f) as z:
        arrays = dict(z)
    off = int(arrays["frame_offsets"][3])
    arrays["frames_png"][off:off + 8] = 0                    # frame 3 is no longer a PNG
    np.savez(f, **arrays)


def _nan_std(root):
    p = root / "meta" / "stats.json"
    s = json.loads(p.read_text())
    s["proprio_std"][2] = 0.0
    p.write_text(json.dumps(s))


def _numeric_instruction(root):
    p = root / "meta" / "episodes.jsonl"
    lines = [json.loads(line) for line in p.read_text().splitlines()]
    lines[1]["instruction"] = 42
    p.write_text("\n".join(json.dumps(m) for m in lines) + "\n")


@pytest.mark.parametrize("damage, match", [(_truncate, r"episode_000001\.npz: unreadable episode file"),
                                           (_corrupt_png, r"episode_000000\.npz: frame 3 is not a PNG"),
                                           (_nan_std, r"proprio_std\[2\] = 0\.0"),
                                           (_numeric_instruction, r"episode 1 .*instruction must be a string")])
def test_a_damaged_dataset_is_refused_when_it_loads_naming_the_file(dataset_dir, tmp_path, damage, match):
    from vam_data.dataset import Dataset, DatasetError

    root = _damaged_copy(dataset_dir, tmp_path / "copy", damage)
    with pytest.raises(DatasetError, match=match):
        Dataset(root)
