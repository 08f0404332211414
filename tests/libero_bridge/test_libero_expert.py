"""The scripted expert solves every suite (ID and OOD) and labels phases."""
import numpy as np
import pytest

from libero_bridge import PHASES, SUITES, expert_action, expert_phase, make_env

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
