"""The scripted expert solves every suite (ID and OOD) and labels phases."""
import numpy as np
import pytest

from vam_sim.libero_mock import PHASES, SUITES, expert_action, expert_phase, make_env

pytestmark = pytest.mark.unit


def _run(env):
    env.reset()
    phases, done, info = [], False, {}
    while not done:
        phases.append(expert_phase(env))
        a = expert_action(env)
        assert a.shape == (7,) and a.dtype == np.float32 and np.all(np.abs(a) <= 1.0)
        _, _, done, info = env.step(a)
    return info, phases


@pytest.mark.parametrize("suite", SUITES)
def test_expert_solves_suite(suite):
    results = []
    for task in range(10):
        for episode in range(2):
            info, phases = _run(make_env(suite, task, episode, seed=0, render=False))
            results.append(info["success"])
            assert set(phases) <= set(PHASES)
            assert phases[0] == "planning" and "manipulation" in phases
    assert np.mean(results) >= 0.95, f"{suite}: expert success {np.mean(results):.2f}"


def test_expert_recovers_from_a_perturbed_state():
    env = make_env("long", 8, 0, 0, render=False)  # both moka pots on the stove
    env.reset()
    rng = np.random.default_rng(0)
    for _ in range(15):  # a random policy first
        env.step(rng.uniform(-1, 1, 7).astype(np.float32))
    done = env.done
    while not done:
        _, _, done, info = env.step(expert_action(env))
    assert info["success"]


def test_noisy_expert_still_succeeds_and_is_reproducible():
    def run(seed):
        env = make_env("spatial", 4, 0, 0, render=False)
        env.reset()
        rng, done, path = np.random.default_rng(seed), False, []
        while not done:
            _, _, done, info = env.step(expert_action(env, noise=0.3, rng=rng))
            path.append(env.world.gripper.pos.copy())
        return info["success"], np.array(path)

    ok_a, a = run(1)
    ok_b, b = run(1)
    ok_c, c = run(2)
    assert ok_a and ok_c
    np.testing.assert_array_equal(a, b)
    assert len(a) != len(c) or not np.array_equal(a, c)
    with pytest.raises(ValueError, match="rng"):
        env = make_env("spatial", 0, 0, 0, render=False)
        env.reset()
        expert_action(env, noise=0.1)


def test_rollout_expert_records_aligned_arrays():
    from vam_sim.libero_mock import rollout_expert

    demo = rollout_expert("object", 2, 0, 0, render=True)
    t = len(demo)
    assert demo.success and demo.termination == "success"
    assert demo.stacked.shape == (t, 224, 448, 3) and demo.stacked.dtype == np.uint8
    assert demo.proprio.shape == (t, 8) and demo.actions.shape == (t, 7) and len(demo.phases) == t
    blind = rollout_expert("object", 2, 0, 0, render=False)
    assert blind.stacked is None
    np.testing.assert_array_equal(blind.actions, demo.actions)  # rendering does not change the run
    noisy_a = rollout_expert("object", 2, 0, 0, render=False, noise=0.2)
    noisy_b = rollout_expert("object", 2, 0, 0, render=False, noise=0.2)
    np.testing.assert_array_equal(noisy_a.actions, noisy_b.actions)
    assert noisy_a.success and not np.array_equal(noisy_a.actions[:5], blind.actions[:5])
