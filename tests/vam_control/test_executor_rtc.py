"""Real-time chunking in the executor: what a request carries, and the seam metric."""
from __future__ import annotations

import math

import numpy as np
import pytest

from vam_control.executor import ChunkExecutor
from vam_control.schedule import robot_config
from vam_control.schedule import SeamMeter, StepInfo

from executor_policies import CHUNK, DIM, EXECUTE, RATE, ContinuingPolicy, SlowPolicy, run  # tests/support

pytestmark = pytest.mark.unit


def _wait_calls(policy, n):
    return lambda ex: policy.calls >= n


def test_each_request_carries_the_rest_of_the_executing_chunk_and_the_expected_delay():
    policy = ContinuingPolicy(delay=0.03)
    ex, log = run(policy, _wait_calls(policy, 4), blend_ticks=0, rtc="guided")
    assert policy.requests[0] is None                              # nothing executes before the first chunk
    for req in policy.requests[1:4]:
        a = req["actions"]
        assert a.shape[1] == DIM and 1 <= len(a) <= CHUNK
        # the committed rows are the current chunk's remaining actions: consecutive indices ending at CHUNK - 1
        idx = a[:, 0] % 1000
        assert idx[-1] == CHUNK - 1 and np.all(np.diff(idx) == 1)
        assert 0 <= req["delay"] <= len(a)
    lat = ex.latency_estimate_s
    assert policy.requests[-1]["delay"] <= math.ceil((lat + 0.05) * RATE) + 1   # the estimate, in ticks


def test_a_trained_request_names_its_method_and_a_policy_without_it_is_refused_up_front():
    from vam_stack.config import ConfigError

    class TrainedPolicy(ContinuingPolicy):
        rtc_methods = ("guided", "trained")

    policy = TrainedPolicy(delay=0.03)
    run(policy, _wait_calls(policy, 3), blend_ticks=0, rtc="trained")
    assert [r["method"] for r in policy.requests[1:3]] == ["trained", "trained"]
    guided = ContinuingPolicy(delay=0.03)
    run(guided, _wait_calls(guided, 2), blend_ticks=0, rtc="guided")
    assert guided.requests[1]["method"] == "guided"
    with pytest.raises(ConfigError, match="rtc 'trained': this policy continues a committed chunk only by \\('guided',\\)"):
        ChunkExecutor(ContinuingPolicy(delay=0.0), robot_config(mode="realtime", chunk=CHUNK, execute=EXECUTE,
                                                                action_dim=DIM, rate_hz=RATE, rtc="trained"),
                      obs_fn=dict)


@pytest.mark.parametrize("kind", ["off", "plain_policy"])
def test_no_committed_chunk_when_off_or_the_policy_does_not_take_one(kind):
    policy = ContinuingPolicy(delay=0.02) if kind == "off" else SlowPolicy(delay=0.02)
    cfg = {"rtc": "off"} if kind == "off" else {"rtc": "guided"}
    ex, _ = run(policy, _wait_calls(policy, 3), **cfg)
    if kind == "off":
        assert policy.requests and all(r is None for r in policy.requests)
    assert ex.replans >= 2


def test_rtc_is_off_unless_asked_for():
    assert robot_config().rtc == "off"


def test_rtc_must_be_a_known_mode():
    from vam_stack.config import ConfigError
    with pytest.raises(ConfigError, match="rtc must be one of"):
        robot_config(rtc="on")


def test_lockstep_never_sends_a_committed_chunk():
    policy = ContinuingPolicy(delay=0.0)
    ex = ChunkExecutor(policy, robot_config(rate_hz=RATE, chunk=CHUNK, execute=EXECUTE, mode="lockstep", blend_ticks=0),
                       initial_target=np.zeros(DIM))
    for _ in range(3 * EXECUTE):
        ex.next_action({})
    assert policy.requests == [None, None, None]
    s = ex.stats()
    assert s["seams"] == 2.0 and s["within_chunk_max_step"] == 1.0 and s["seam_max_step"] == 1000.0 - EXECUTE + 1


def test_seam_meter_separates_switch_steps_from_within_chunk_steps_and_skips_holds():
    m = SeamMeter()
    info = lambda replanned=False, held=False: StepInfo(tick=0, chunk_id=0, index=0, replanned=replanned, held=held)
    m.update(np.array([0.0, 0.0]), info())
    m.update(np.array([0.1, 0.0]), info())
    m.update(np.array([0.5, 0.0]), info(held=True))               # a hold jump is not a chunk step
    m.update(np.array([0.7, 0.2]), info(replanned=True))
    assert m.summary() == {"seam_max_step": pytest.approx(0.2), "within_chunk_max_step": pytest.approx(0.1), "seams": 1.0}



def test_a_guided_chunk_is_installed_at_the_tick_its_frozen_prefix_ends():
    """An early chunk waits for origin + d, so its first action run is action d (the first decoded free);
    a late one installs on arrival (counted in `late`). Holds however the threads are scheduled."""
    policy = ContinuingPolicy(delay=0.002)            # arrives within a tick or two; the lead is >= 6 ticks
    ex, log = run(policy, _wait_calls(policy, 6), blend_ticks=0, rtc="guided", latency_margin_s=0.05)
    first = {}                                         # call -> index of the first action that ran
    for value, info in log:
        c, i = divmod(int(round(value)), 1000)
        if value >= 0 and c not in first:
            first[c] = i
    checked = [c for c in range(1, 6) if c in first and policy.requests[c] is not None]
    assert len(checked) >= 3, (first, policy.requests)
    for c in checked:
        assert first[c] >= policy.requests[c]["delay"] >= 5, (c, first[c], policy.requests[c]["delay"])
    on_time = sum(first[c] == policy.requests[c]["delay"] for c in checked)
    assert on_time >= len(checked) - ex.late and on_time >= 1, (first, ex.late)
