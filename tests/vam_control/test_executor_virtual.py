"""The realtime executor on a virtual clock: deterministic, and with an exact latency the same
schedule as the delayed lockstep (the two paths the issue-47 experiments compare)."""
from __future__ import annotations

import numpy as np
import pytest

from vam_control.executor import ChunkExecutor
from vam_control.schedule import robot_config

from executor_policies import CHUNK, DIM, EXECUTE, RATE, ContinuingPolicy, SlowPolicy  # tests/support

pytestmark = pytest.mark.unit

D = 3                      # ticks of latency
LATENCY = 0.025            # s: 2.5 ticks at 100 Hz, so the answer is visible D ticks after the request


class Echo(ContinuingPolicy):
    """Action i of call c is 1000*c + i + the observation's tick / 1e3 (what it saw); keeps requests."""

    def infer(self, obs, committed=None):
        out = super().infer(obs, committed)
        out["actions"] = out["actions"] + obs["proprio"][0] / 1e3
        return out


def _run(mode: str, rtc: str, ticks: int = 60):
    world = {"tick": 0}
    policy = Echo(delay=0.0)
    cfg = robot_config(rate_hz=RATE, chunk=CHUNK, execute=EXECUTE, blend_ticks=0, rtc=rtc, mode=mode,
                       latency_margin_s=0.0, **({"lockstep_delay": D} if mode == "lockstep" else {}))
    obs = lambda: {"proprio": np.full(DIM, world["tick"], np.float32)}   # noqa: E731
    ex = ChunkExecutor(policy, cfg, obs_fn=obs if mode == "realtime" else None, initial_target=np.full(DIM, -1.0))
    out = []
    for _ in range(ticks):
        target, info = ex.virtual_step(LATENCY) if mode == "realtime" else ex.next_action(obs())
        out.append((float(target[0]), info.index, info.chunk_id))
        world["tick"] += 1
    return ex, policy, out


@pytest.mark.parametrize("rtc", ["off", "guided"])
def test_virtual_realtime_with_an_exact_latency_runs_the_delayed_lockstep_schedule(rtc):
    ex, pol, virtual = _run("realtime", rtc)
    _, lpol, lock = _run("lockstep", rtc)
    assert all(v == -1.0 for v, _, _ in virtual[:D])           # holds until the first answer, D ticks on
    assert virtual[D:] == lock[D:]                             # then tick for tick the delayed lockstep
    assert ex.stats()["replans"] >= 5 and ex.late == 0
    for t, (v, idx, _) in enumerate(virtual[D:], start=D):      # action idx of a chunk seen at its origin tick
        call, i = divmod(int(v), 1000)
        assert i == idx and round((v - int(v)) * 1e3) == t - idx
    if rtc == "guided":                                         # the same committed rows and delay d = D
        assert pol.requests[0] is None and lpol.requests[0] is None
        pairs = list(zip(pol.requests[1:], lpol.requests[1:]))
        assert len(pairs) >= 4
        for a, b in pairs:
            assert a["delay"] == b["delay"] == D and np.array_equal(a["actions"], b["actions"])


def test_virtual_step_is_deterministic_and_only_for_a_stopped_realtime_executor():
    a = _run("realtime", "guided")[2]
    assert a == _run("realtime", "guided")[2]
    ex = ChunkExecutor(SlowPolicy(0.0), robot_config(rate_hz=RATE, chunk=CHUNK, execute=EXECUTE, mode="lockstep"))
    with pytest.raises(RuntimeError, match="runs the realtime executor"):
        ex.virtual_step(LATENCY)
    rt = ChunkExecutor(SlowPolicy(0.0), robot_config(rate_hz=RATE, chunk=CHUNK, execute=EXECUTE),
                       obs_fn=lambda: {"proprio": np.zeros(DIM, np.float32)}, initial_target=np.zeros(DIM))
    with pytest.raises(ValueError, match="latency_s must be finite"):
        rt.virtual_step(float("nan"))
    with pytest.raises(ValueError, match="needs a sink"):
        rt.start()
