"""Re-anchoring (ExecutorConfig.reanchor): a displacement chunk installed d ticks after its
observation gets back what it skipped but the arm did not run, so the arm is on the chunk's planned
path d ticks after the install; absolute targets and undelayed installs are untouched."""
from __future__ import annotations

import numpy as np
import pytest

from vam_control.executor import ChunkExecutor
from vam_control.schedule import ChunkSchedule, libero_config, robot_config
from vam_stack.config import ConfigError

pytestmark = pytest.mark.unit

CHUNK, EXECUTE, DIM, RATE = 12, 6, 3, 10.0   # dim 2 plays the gripper (an absolute command, kept on hold)


def _cfg(**kw):
    return libero_config(chunk=CHUNK, execute=EXECUTE, action_dim=DIM, rate_hz=RATE, hold_keep_dims=(2,), **kw)


class PlanningPolicy:
    """Chunks of random displacements (a fresh draw per call, seeded): what each replan planned, kept."""

    def __init__(self, seed: int = 0):
        self.spec = type("Spec", (), dict(chunk=CHUNK, execute=EXECUTE, action_dim=DIM, rate_hz=RATE))()
        self.rng = np.random.default_rng(seed)
        self.plans: list[tuple[np.ndarray, np.ndarray]] = []   # (position observed, chunk)

    def reset(self, instruction: str) -> None:
        pass

    def infer(self, obs: dict) -> dict:
        a = self.rng.uniform(-1, 1, (CHUNK, DIM)).astype(np.float32)
        self.plans.append((obs["pos"].copy(), a.astype(np.float64)))
        return {"actions": a}


def _drive(cfg, ticks: int = 80, latency_s: float | None = None):
    """A world that integrates the displacement dims of every target; returns positions per tick
    (before that tick's target), the installs (tick, skip, reanchored) and the policy."""
    policy, world = PlanningPolicy(), {"pos": np.zeros(DIM - 1)}
    obs = lambda: {"pos": world["pos"]}  # noqa: E731
    realtime = latency_s is not None
    ex = ChunkExecutor(policy, cfg, obs_fn=obs if realtime else None,
                       initial_target=np.array([0.0, 0.0, -1.0]) if realtime else None)
    ex.reset(instruction="x", initial_target=np.array([0.0, 0.0, -1.0]) if realtime else None)
    positions, installs = [], []
    for _ in range(ticks):
        positions.append(world["pos"].copy())
        target, info = ex.virtual_step(latency_s) if realtime else ex.next_action(obs())
        if info.replanned:
            installs.append((info.tick, info.skipped, info.reanchored))
        world["pos"] = world["pos"] + target[:DIM - 1]
    return positions, installs, policy


@pytest.mark.parametrize("latency_s", [None, 0.25])
def test_a_reanchored_chunk_puts_the_arm_on_its_planned_path_d_ticks_after_the_install(latency_s):
    kw = dict(lockstep_delay=3) if latency_s is None else dict(mode="realtime", latency_margin_s=0.0)
    positions, installs, policy = _drive(_cfg(reanchor=True, **kw), latency_s=latency_s)
    assert len(installs) >= 8 and all(skip == 3 for _, skip, _ in installs[1:])   # (lockstep: the first waits)
    for (tick, d, moved), (seen, plan) in zip(installs, policy.plans):
        if tick + d >= len(positions):
            break
        planned = seen + plan[:2 * d, :DIM - 1].sum(axis=0)       # the path the chunk planned, 2d actions on
        np.testing.assert_allclose(positions[tick + d], planned, atol=1e-9)
    assert max(m for _, _, m in installs) > 0.1                  # there was something to add back


def test_without_reanchoring_the_arm_runs_off_the_planned_path():
    positions, installs, policy = _drive(_cfg(lockstep_delay=3, reanchor=False))
    tick, d, moved = installs[2]
    seen, plan = policy.plans[2]
    assert moved == 0.0
    assert np.max(np.abs(positions[tick + d] - (seen + plan[:2 * d, :DIM - 1].sum(axis=0)))) > 0.1


def test_the_correction_is_spread_over_the_d_actions_after_the_skip_and_leaves_the_gripper_alone():
    s = ChunkSchedule(_cfg(reanchor=True))
    old = np.arange(CHUNK * DIM, dtype=np.float64).reshape(CHUNK, DIM) / 100
    s.install(old, origin=0, tick=0)
    sent = [s.target(k)[0] for k in range(4)]                     # ticks 0..3 run the old chunk
    new = np.ones((CHUNK, DIM))
    assert s.install(new, origin=2, tick=4) == 2
    e = (new[:2] - np.stack(sent[2:4])).sum(axis=0)
    assert s.last_reanchor == pytest.approx(np.max(np.abs(e[:2])))
    got = np.stack([s.target(k)[0] for k in range(4, 8)])         # actions 2..5 of the new chunk
    np.testing.assert_allclose(got[:2, :2], np.tile(1.0 + e[:2] / 2, (2, 1)))   # e split over actions 2 and 3
    np.testing.assert_allclose(got[2:, :2], 1.0)                 # then the chunk as planned
    np.testing.assert_allclose(got[:, 2], 1.0)                   # the gripper command as decoded


def test_an_undelayed_install_and_an_unchanged_plan_add_nothing():
    s = ChunkSchedule(_cfg(reanchor=True))
    chunk = np.full((CHUNK, DIM), 0.5)
    s.install(chunk, origin=0, tick=0)
    for k in range(3):
        s.target(k)
    s.install(chunk[1:].tolist() + [chunk[0].tolist()], origin=1, tick=3)   # continues the plan exactly
    assert s.last_reanchor == 0.0
    s.install(np.zeros((CHUNK, DIM)), origin=3, tick=3)                     # d = 0: nothing skipped
    assert s.last_reanchor == 0.0 and np.array_equal(s.chunk, np.zeros((CHUNK, DIM)))


def test_plain_lockstep_is_unchanged_by_reanchoring():
    a, _, _ = _drive(_cfg(reanchor=False), ticks=40)
    b, installs, _ = _drive(_cfg(reanchor=True), ticks=40)
    assert np.array_equal(np.stack(a), np.stack(b)) and all(m == 0.0 for _, _, m in installs)


def test_libero_re_anchors_by_default_and_the_robot_does_not():
    assert libero_config().reanchor and not robot_config().reanchor


def test_reanchoring_is_refused_for_absolute_targets_and_non_booleans():
    with pytest.raises(ConfigError, match="reanchor corrects displacement actions.*'absolute'"):
        robot_config(reanchor=True)
    with pytest.raises(ConfigError, match="reanchor must be true or false, got 'yes'"):
        _cfg(reanchor="yes")
