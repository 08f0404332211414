"""PolicyRuntime without ROS: inputs in, episodes started in its control thread, targets out
through the safety filter; missing inputs hold; e-stop latches."""
from __future__ import annotations

import time
from types import SimpleNamespace

import numpy as np
import pytest

from vam_stack.views import fit_views
from vam_control.executor import robot_config
from vam_control.runtime import PolicyRuntime, RuntimeConfig
from vam_control.safety import SafetyFilter, load_safety_config
from vam_stack.config import ConfigError

pytestmark = pytest.mark.unit

NAMES = [f"j{i}" for i in range(14)]
LO, HI, STEP = load_safety_config().bounds()


class Policy:
    spec = SimpleNamespace(chunk=10, execute=5, action_dim=14, proprio_dim=14, height=4, width=6, rate_hz=30.0,
                           action_type="absolute_joint")

    def reset(self, instruction):
        self.instruction = instruction

    def infer(self, obs):
        return {"actions": np.tile(HI, (10, 1)), "tr": 1.0}


def wait(cond, timeout=10.0, every=None):
    end = time.monotonic() + timeout
    while not cond() and time.monotonic() < end:
        if every is not None:
            every()
        time.sleep(0.02)
    return cond()


@pytest.fixture
def runtime():
    sent, telemetry = [], []
    rt = PolicyRuntime(Policy(), robot_config(chunk=10, execute=5, rate_hz=30.0), RuntimeConfig(), NAMES,
                       sent.append, telemetry.append, safety=SafetyFilter(load_safety_config()))
    rt.sent, rt.telemetry = sent, telemetry
    yield rt
    rt.close()


def feed(rt, position):
    rt.add_frame(np.zeros((4, 6, 3), np.uint8))
    rt.set_state(NAMES[::-1], position[::-1])  # matched by name


def test_start_waits_for_inputs_then_sends_rate_limited_targets(runtime):
    home = (LO + HI) / 2
    assert runtime.request_start("wave", wait=True)[0] is False  # no joint state yet: armed, not started
    assert wait(lambda: runtime.executor.running and len(runtime.sent) > 10 and runtime.telemetry,
                every=lambda: feed(runtime, home))  # the armed episode starts once inputs are fresh
    steps = np.abs(np.diff(np.vstack([home, *runtime.sent[:10]]), axis=0))
    assert np.all(steps <= STEP + 1e-9)
    assert isinstance(runtime.telemetry[0]["step"], int) and runtime.telemetry[0]["tr"] == 1.0


def test_estop_latches_and_blocks_a_restart(runtime):
    home = (LO + HI) / 2
    feed(runtime, home)
    feed(runtime, home)
    assert runtime.request_start("wave", wait=True)[0]
    runtime.estop(True)
    assert wait(lambda: not runtime.executor.running, every=lambda: feed(runtime, home))
    ok, message = runtime.request_start(None, wait=True)
    assert not ok and "e-stop" in message
    runtime.estop(False)
    ok, message = runtime.request_start("  ", wait=True)
    assert not ok and "no visible character" in message
    feed(runtime, home)
    assert runtime.request_start(None, wait=True)[0]


def test_inputs_and_config_are_validated():
    with pytest.raises(ConfigError, match="max_frame_age_s"):
        RuntimeConfig(max_frame_age_s=0.0)
    with pytest.raises(ValueError, match="safety filter"):
        PolicyRuntime(Policy(), robot_config(chunk=10, execute=5), RuntimeConfig(), NAMES, print, print)
    rt = PolicyRuntime(Policy(), robot_config(chunk=10, execute=5), RuntimeConfig(), NAMES, print, print,
                       safety=SafetyFilter(load_safety_config()), fit_views=fit_views)
    try:
        with pytest.raises(RuntimeError, match="no camera frame received yet"):
            rt.observation()
        with pytest.raises(ValueError, match="needs uint8"):
            rt.add_frame(np.zeros((5, 6, 3), np.uint8))
        with pytest.raises(ValueError, match="needs uint8"):
            rt.add_frame(np.zeros((4, 6, 3), np.float32))
        # the same views at twice the size are fitted to the policy's (the camera path's rule)
        rt.add_frame(np.full((8, 12, 3), 7, np.uint8))
        assert rt._frame.shape == (4, 6, 3) and (rt._frame == 7).all()
        with pytest.raises(ValueError, match="lacks joints"):
            rt.set_state(NAMES[:-1], np.zeros(13))
        with pytest.raises(ValueError, match="non-finite"):
            rt.set_state(NAMES, np.full(14, np.nan))
        with pytest.raises(RuntimeError, match="no joint state"):   # the frame alone is not an observation
            rt.observation()
    finally:
        rt.close()
