"""PolicyRuntime without ROS: inputs in, episodes started in its control thread, targets out
through the safety filter; missing inputs hold; e-stop latches."""
from __future__ import annotations

import time
from types import SimpleNamespace

import numpy as np
import pytest

from vam_stack.views import fit_views
from vam_control.schedule import robot_config
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


class SimClock:
    """Simulated time: a stepped runtime, its executor and its filter read only this."""

    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def stepped(mode="lockstep", **kw):
    clock, sent = SimClock(), []
    rt = PolicyRuntime(Policy(), robot_config(chunk=10, execute=5, rate_hz=30.0, mode=mode), RuntimeConfig(), NAMES,
                       sent.append, lambda tel: None, safety=SafetyFilter(load_safety_config(), clock=clock),
                       clock=clock, stepped=True, **kw)
    rt.sent, rt.sim_clock = sent, clock
    return rt


def test_a_stepped_runtime_sends_each_tick_through_its_filter_on_the_callers_clock():
    """How the simulators drive the robot's runtime: one `step()` per simulated tick, targets stamped
    with simulated time; the e-stop and the filter's stale branch hold the arm as on the tick thread."""
    rt = stepped()
    try:
        home = (LO + HI) / 2
        feed(rt, home)
        assert rt.step() == (None, None) and not rt.sent           # no episode: nothing sent, the driver holds
        assert rt.request_start("wave", wait=True) == (True, "episode started: 'wave'")
        assert rt.running and rt.executor.running is False         # no tick thread
        for _ in range(3):
            target, info = rt.step()
            rt.sim_clock.t += 1 / 30
            feed(rt, rt.sent[-1])
        np.testing.assert_array_equal(target, HI)                  # the policy's target, before the filter
        assert np.abs(np.diff(np.stack([home] + rt.sent), axis=0)).max() <= STEP.max() + 1e-12   # rate-limited
        assert rt.safety.counts["sent"] == 3 and info.time == pytest.approx(2 / 30)   # stamped on the sim clock
        # a target that reaches the filter later than stale_after_s (a stalled tick) is held
        late = rt.sim_clock
        rt.clock = lambda: late.t + 10.0
        rt.step()
        rt.clock = late
        assert rt.safety.counts["stale"] == 1
        np.testing.assert_array_equal(rt.sent[-1], rt.sent[-2])
        held, n = rt.sent[-1].copy(), len(rt.sent)
        rt.estop(True)                       # the filter latches at once; the control thread stops the episode
        rt.step()
        assert len(rt.sent) == n or (rt.safety.counts["estop"] == 1 and (rt.sent[-1] == held).all())
        assert wait(lambda: not rt.running)
        assert rt.step() == (None, None) and len(rt.sent) <= n + 1
        assert rt.request_start("wave", wait=True)[0] is False     # latched: refused, as on the robot
    finally:
        rt.close()


def test_a_lockstep_executor_is_only_run_stepped():
    with pytest.raises(ValueError, match="stepped=True"):
        PolicyRuntime(Policy(), robot_config(chunk=10, execute=5, rate_hz=30.0, mode="lockstep"), RuntimeConfig(),
                      NAMES, lambda t: None, lambda tel: None, safety=SafetyFilter(load_safety_config()))
    rt = stepped(mode="realtime")                                   # the realtime executor on a virtual clock
    try:
        feed(rt, (LO + HI) / 2)
        assert rt.request_start("wave", wait=True)[0]
        target, info = rt.step(latency_s=0.1)
        assert info.held and info.reason == "no_chunk" and len(rt.sent) == 1   # the first chunk is 3 ticks away
    finally:
        rt.close()
