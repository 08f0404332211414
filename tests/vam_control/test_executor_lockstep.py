"""Chunk executor, deterministic parts: lockstep sequence, schedule, compensation, blending, holds."""
from __future__ import annotations

import logging
from types import SimpleNamespace

import numpy as np
import pytest

from vam_control.executor import ChunkExecutor
from vam_control.schedule import ChunkSchedule, ExecutorConfig, libero_config, robot_config
from vam_stack.config import ConfigError
from vam_stack.robot import load_robot

pytestmark = pytest.mark.unit


class CountingPolicy:
    """Fake policy: action i of call c is 1000*c + i in every dim (decodable from the target)."""

    def __init__(self, chunk: int, dim: int, fail_on: tuple[int, ...] = (), bad_shape_on: tuple[int, ...] = ()):
        self.spec = SimpleNamespace(chunk=chunk, execute=chunk // 2, action_dim=dim, rate_hz=10)
        self.calls = 0
        self.fail_on, self.bad_shape_on = fail_on, bad_shape_on
        self.instruction = None

    def reset(self, instruction: str) -> None:
        self.instruction = instruction

    def infer(self, obs: dict) -> dict:
        c = self.calls
        self.calls += 1
        if c in self.fail_on:
            raise RuntimeError(f"fake failure on call {c}")
        rows = self.spec.chunk + (1 if c in self.bad_shape_on else 0)
        a = (1000.0 * c + np.arange(rows, dtype=np.float32))[:, None].repeat(self.spec.action_dim, 1)
        return {"actions": a, "call": c, "tr": 0.5 + c}


def obs() -> dict:
    return {"frame": np.zeros((8, 8, 3), np.uint8), "proprio": np.zeros(8, np.float32)}


def test_config_validation_quotes_bad_values():
    with pytest.raises(ConfigError, match=r"execute must be in \[1, chunk=17\], got 18"):
        ExecutorConfig(rate_hz=30.0, chunk=17, execute=18, action_dim=14)
    with pytest.raises(ConfigError, match="mode must be one of .* got 'fast'"):
        robot_config(mode="fast")
    with pytest.raises(TypeError, match="rate_hz"):     # no default timing: the spec's, the robot's or LIBERO's
        ExecutorConfig(chunk=17, execute=10, action_dim=7)
    with pytest.raises(ConfigError, match=r"hold_keep_dims must index \[0, 7\), got \(7,\)"):
        libero_config(hold_keep_dims=(7,))
    cfg = ExecutorConfig.from_spec(SimpleNamespace(chunk=17, execute=10, action_dim=7, rate_hz=10), mode="lockstep")
    assert (cfg.chunk, cfg.execute, cfg.action_dim, cfg.rate_hz, cfg.mode) == (17, 10, 7, 10.0, "lockstep")
    r, robot = robot_config(), load_robot()     # the robot's timing: config/yam_robot.yaml
    assert (r.rate_hz, r.chunk, r.execute, r.action_dim, r.blend_ticks) == (30.0, 50, 30, 14, 5)
    assert (r.rate_hz, r.chunk, r.execute, r.action_dim) == (robot.rate_hz, robot.chunk, robot.execute, robot.dim)


def test_executor_rejects_spec_mismatch_and_missing_realtime_callables():
    with pytest.raises(ConfigError, match="chunk=50 does not match the policy's spec.chunk=17"):
        ChunkExecutor(CountingPolicy(17, 7), robot_config(mode="lockstep", action_dim=7))
    with pytest.raises(ValueError, match="realtime mode needs an obs_fn callable"):
        ChunkExecutor(CountingPolicy(50, 14), robot_config())


def run_lockstep(steps: int) -> tuple[list, list, CountingPolicy]:
    pol = CountingPolicy(17, 7)
    ex = ChunkExecutor(pol, libero_config())
    ex.reset("put the bowl on the plate")
    out, infos = [], []
    for _ in range(steps):
        a, info = ex.next_action(obs())
        out.append(a)
        infos.append(info)
    return out, infos, pol


def test_lockstep_sequence_is_deterministic():
    out, infos, pol = run_lockstep(35)
    assert pol.instruction == "put the bowl on the plate"
    assert pol.calls == 4
    for t, (a, info) in enumerate(zip(out, infos)):
        assert (info.tick, info.chunk_id, info.index) == (t, t // 10, t % 10)
        assert info.replanned == (t % 10 == 0)
        assert a.shape == (7,)
        np.testing.assert_array_equal(a, np.full(7, 1000.0 * (t // 10) + t % 10))  # no blending on LIBERO
        if info.replanned:
            assert info.telemetry == {"call": t // 10, "tr": 0.5 + t // 10} and info.latency_s >= 0
        else:
            assert info.telemetry is None
    out2, infos2, _ = run_lockstep(35)
    np.testing.assert_array_equal(np.stack(out), np.stack(out2))


def test_lockstep_rejects_start_and_realtime_rejects_next_action():
    ex = ChunkExecutor(CountingPolicy(17, 7), libero_config())
    with pytest.raises(RuntimeError, match="realtime"):
        ex.start()
    rt = ChunkExecutor(CountingPolicy(50, 14), robot_config(), obs_fn=obs, sink=lambda t: None)
    with pytest.raises(RuntimeError, match="lockstep"):
        rt.next_action(obs())


def test_latency_compensation_skips_elapsed_actions():
    cfg = robot_config(blend_ticks=0)
    s = ChunkSchedule(cfg, initial_target=np.zeros(14))
    s.install(np.arange(50.0)[:, None].repeat(14, 1), origin=0, tick=0)
    for k in range(20):
        s.target(k)
    new = (100.0 + np.arange(50.0))[:, None].repeat(14, 1)
    assert s.install(new, origin=20, tick=27) == 7  # observed at tick 20, ready at 27
    a, info = s.target(27)
    assert a[0] == 107.0 and info.index == 7
    a, info = s.target(28)
    assert a[0] == 108.0
    assert not s.needs_chunk(49) and s.needs_chunk(50)  # N=30 counted from the origin tick
    assert s.replan_due(44, lead_ticks=6) and not s.replan_due(43, lead_ticks=6)
    assert s.install(new, origin=30, tick=80) is None  # all 50 actions already in the past


def seam_steps(blend_ticks: int) -> np.ndarray:
    """Targets around a seam between two ramps (slope 0.01/tick) that disagree by 0.2 rad."""
    cfg = robot_config(blend_ticks=blend_ticks)
    s = ChunkSchedule(cfg, initial_target=np.zeros(14))
    ramp = 0.01 * np.arange(50.0)[:, None].repeat(14, 1)
    s.install(ramp, origin=0, tick=0)
    out = [s.target(k)[0] for k in range(25)]
    s.install(ramp + 0.2, origin=0, tick=25)  # new chunk, skip 25: 0.2 above the old path
    out += [s.target(k)[0] for k in range(25, 40)]
    return np.stack(out)


def test_blend_keeps_seam_within_velocity_limit():
    limit = 2.0 / 30.0  # DM4340 joints in config/yam_safety.yaml: 0.067 rad per tick
    blended = np.abs(np.diff(seam_steps(5), axis=0)).max()
    assert blended <= 0.01 + 0.2 / 6 + 1e-9  # slope + gap / (W + 1)
    assert blended <= limit
    hard = np.abs(np.diff(seam_steps(0), axis=0)).max()
    assert hard > limit  # without the cross-fade the seam would jump 0.21 rad in one tick
    np.testing.assert_allclose(seam_steps(5)[-1], seam_steps(0)[-1])  # after the window: new chunk exactly


def test_blend_weights_reported_and_nested_seams_stay_continuous():
    cfg = robot_config(blend_ticks=4)
    s = ChunkSchedule(cfg, initial_target=np.zeros(14))
    s.install(np.zeros((50, 14)), origin=0, tick=0)
    assert [round(s.target(k)[1].blend_weight, 2) for k in range(5)] == [0.2, 0.4, 0.6, 0.8, 1.0]
    s.install(np.ones((50, 14)), origin=5, tick=5)
    seq = [s.target(5)[0][0], s.target(6)[0][0]]
    s.install(np.full((50, 14), 2.0), origin=7, tick=7)  # arrives inside the previous blend
    seq += [s.target(k)[0][0] for k in range(7, 14)]
    steps = np.diff([0.0] + seq)
    # each step <= old path's own step (0.2) + remaining gap (2.0 - 0.6) / (W + 1); a hard switch jumps 1.6
    assert np.all(steps >= 0) and steps.max() <= 0.2 + 1.4 / 5 + 1e-9
    assert seq[-1] == 2.0


def test_late_chunk_runs_old_chunk_to_its_end_then_holds():
    cfg = robot_config(blend_ticks=0)
    s = ChunkSchedule(cfg)
    chunk = np.arange(50.0)[:, None].repeat(14, 1)
    s.install(chunk, origin=0, tick=0)
    seen = []
    for k in range(70):
        a, info = s.target(k)
        seen.append(a[0])
        assert info.overrun == (k >= 30)
        assert info.reason == ("late" if k >= 30 else None)
        assert info.held == (k >= 50)
    assert seen[:50] == list(range(50))
    assert seen[50:] == [49.0] * 20  # held at the last action, not extrapolated to 50, 51, ...


def test_delta_actions_hold_with_zero_motion_and_kept_gripper():
    s = ChunkSchedule(libero_config())
    chunk = np.tile(np.array([0.1, 0.1, 0.1, 0.0, 0.0, 0.0, -1.0]), (17, 1))
    s.install(chunk, origin=0, tick=0)
    a, info = s.target(17)
    assert info.held
    np.testing.assert_array_equal(a, [0, 0, 0, 0, 0, 0, -1.0])


def test_lockstep_exception_logs_context_and_holds(caplog):
    pol = CountingPolicy(50, 14, fail_on=(1,))
    ex = ChunkExecutor(pol, robot_config(mode="lockstep", blend_ticks=0))
    with caplog.at_level(logging.ERROR, logger="vam_control.executor"):
        out = [ex.next_action(obs()) for _ in range(33)]
    a29 = out[29][0]
    a30, info30 = out[30]
    assert info30.error == "RuntimeError: fake failure on call 1" and info30.held and info30.reason == "error"
    np.testing.assert_array_equal(a30, a29)  # holds immediately, does not continue the old chunk
    assert "inference failed: tick 30, next chunk 1" in caplog.text and "frame:(8, 8, 3)" in caplog.text
    assert "fake failure on call 1" in caplog.text
    a31, info31 = out[31]
    assert info31.replanned and info31.chunk_id == 1 and a31[0] == 2000.0  # retried on the next step
    assert ex.errors == 1 and ex.replans == 2


def test_lockstep_reads_obs_fn_only_when_it_replans_and_holds_while_none_is_available():
    """next_action() without an observation (how PolicyRuntime.step drives a simulator): obs_fn is read
    at replans only; ObservationUnavailable holds the arm as on the realtime tick, the next tick retries."""
    from vam_control.schedule import ObservationUnavailable

    reads, gone = [], {1}            # the second read (tick 30) finds none
    def obs_fn():
        reads.append(len(reads))
        if len(reads) - 1 in gone:
            raise ObservationUnavailable("frame_age", "no fresh frame")
        return obs()
    pol = CountingPolicy(50, 14)
    ex = ChunkExecutor(pol, robot_config(mode="lockstep", blend_ticks=0), obs_fn=obs_fn)
    out = [ex.next_action() for _ in range(32)]
    # tick 0 and tick 30 read it; 30 finds none (the arm holds), tick 31 reads again and replans
    assert len(reads) == 3 and pol.calls == 2
    a30, info30 = out[30]
    assert info30.held and info30.reason == "error" and "no fresh frame" in info30.error
    np.testing.assert_array_equal(a30, out[29][0])
    assert out[31][1].replanned and out[31][0][0] == 1000.0
    with pytest.raises(ValueError, match="needs an observation or an obs_fn"):
        ChunkExecutor(pol, robot_config(mode="lockstep")).next_action()


def test_bad_action_shape_is_an_inference_error():
    pol = CountingPolicy(17, 7, bad_shape_on=(1,))
    ex = ChunkExecutor(pol, libero_config())
    out = [ex.next_action(obs()) for _ in range(11)]
    a, info = out[10]
    assert "actions shape (18, 7) != (17, 7)" in info.error
    np.testing.assert_array_equal(a, [0, 0, 0, 0, 0, 0, 9.0])  # delta hold keeps the gripper dim


def test_first_inference_failure_without_hold_target_raises_for_absolute():
    ex = ChunkExecutor(CountingPolicy(50, 14, fail_on=(0,)), robot_config(mode="lockstep"))
    with pytest.raises(RuntimeError, match="no initial_target"):
        ex.next_action(obs())
    ex = ChunkExecutor(CountingPolicy(50, 14, fail_on=(0,)), robot_config(mode="lockstep"),
                       initial_target=np.full(14, 0.3))
    a, info = ex.next_action(obs())
    assert info.held and info.error and np.all(a == 0.3)


def test_deadline_pacer_counts_missed_ticks_and_stays_on_the_wall_clock():
    from vam_control.pacing import DeadlinePacer

    now = {"t": 0.0}
    pacer = DeadlinePacer(10.0, clock=lambda: now["t"])
    pacer.start()  # tick 0 due at 0.1
    now["t"] = 0.1005
    assert pacer.wait() == (0, 0.1005)
    now["t"] = 0.45  # tick 1 was due at 0.2: 0.25 s late, ticks 1 and 2 are gone
    assert pacer.wait() == (3, 0.45)
    now["t"] = 0.5
    assert pacer.wait() == (4, 0.5)
    pacer.record_overhead(100e-6)
    st = pacer.summary()
    assert st["missed_ticks"] == 2 and st["ticks"] == 3
    assert st["max_jitter_ms"] == pytest.approx(250.0) and st["p50_jitter_ms"] == pytest.approx(0.5)
    assert st["achieved_hz"] == pytest.approx(2 / 0.3995) and st["overhead_us"] == pytest.approx(100.0)


def test_executor_config_loads_from_yaml_with_clear_errors(tmp_path):
    from vam_stack.config import from_yaml

    p = tmp_path / "executor.yaml"
    p.write_text("executor:\n  rate_hz: 20\n  chunk: 17\n  execute: 10\n  action_dim: 7\n  mode: lockstep\n"
                 "  action_kind: delta\n  hold_keep_dims: [6]\n  blend_ticks: 0\n  reanchor: true\n")
    cfg = from_yaml(ExecutorConfig, p, "executor")
    assert cfg == libero_config()
    p.write_text("executor:\n  blend_tick: 3\n")
    with pytest.raises(ConfigError, match="did you mean 'blend_ticks'"):
        from_yaml(ExecutorConfig, p, "executor")
    p.write_text("executor:\n  rate_hz: 20\n  chunk: 17\n  execute: 10\n  action_dim: 7\n  rt_priority: 120\n")
    with pytest.raises(ConfigError, match=r"rt_priority must be in \[0, 99\], got 120"):
        from_yaml(ExecutorConfig, p, "executor")


class ObservingPolicy(CountingPolicy):
    """CountingPolicy that keeps the tick of each observation and each committed request."""

    accepts_committed = True

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.seen, self.requests = [], []

    def infer(self, obs: dict, committed: dict | None = None) -> dict:
        self.seen.append(obs["t"])
        self.requests.append(committed)
        return super().infer(obs)


@pytest.mark.parametrize("rtc", ["off", "guided"])
def test_a_lockstep_delay_observes_early_and_installs_late_with_the_elapsed_actions_skipped(rtc):
    pol = ObservingPolicy(chunk=20, dim=7)
    cfg = libero_config(chunk=20, execute=10, rate_hz=10, lockstep_delay=3, rtc=rtc, reanchor=False)  # the skip alone
    ex = ChunkExecutor(pol, cfg)
    ex.reset(instruction="x")
    out, infos = [], []
    for t in range(35):
        a, info = ex.next_action({"t": t})
        out.append(a[0])
        infos.append(info)
    # the first chunk waits; later ones observe 3 ticks before the executed part (indices < 10 from the observation)
    # ends, so each chunk runs its actions 3..9 and a replan comes every 7 ticks, as in realtime at 3 ticks latency
    assert pol.seen == [0, 7, 14, 21, 28]
    assert [i.tick for i in infos if i.replanned] == [0, 10, 17, 24, 31]
    assert [i.skipped for i in infos if i.replanned] == [0, 3, 3, 3, 3]
    assert out[9] == 9 and out[10] == 1003 and out[16] == 1009 and out[17] == 2003
    if rtc == "off":
        assert pol.requests == [None] * 5
    else:                                                   # the rest of the executing chunk, and the delay
        assert pol.requests[0] is None
        assert pol.requests[1]["delay"] == 3 and list(pol.requests[1]["actions"][:, 0]) == list(range(7, 20))
        assert list(pol.requests[2]["actions"][:, 0]) == [1000.0 + i for i in range(7, 20)]


def test_a_lockstep_delay_must_fit_the_executed_part_and_lockstep():
    with pytest.raises(ConfigError, match=r"lockstep_delay must be an int in \[0, execute=10\), got 10"):
        libero_config(chunk=17, execute=10, lockstep_delay=10)
    with pytest.raises(ConfigError, match="the realtime executor measures it"):
        robot_config(lockstep_delay=2)
