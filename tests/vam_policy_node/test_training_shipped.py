"""The shipped weights (models/tiny.safetensors): they load, replan, and still solve seeded episodes."""
import numpy as np
import pytest

from vam_stack.paths import models_dir

SHIPPED = models_dir() / "tiny.safetensors"


@pytest.fixture(scope="module")
def policy():
    from vam_policy_node.policy import build_policy

    assert SHIPPED.is_file(), f"{SHIPPED} is missing: train and ship it (see vam-stack train --ship)"
    return build_policy(checkpoint=SHIPPED, guidance="none", seed=0)


@pytest.mark.unit
def test_shipped_weights_are_small_and_carry_their_statistics(policy):
    from vam_policy_node.networks.checkpoint import read_metadata

    assert SHIPPED.stat().st_size <= 25e6
    cfg, extra = read_metadata(SHIPPED)
    assert cfg.name == "tiny" and extra["text_encoder"].startswith("pkg:")
    for key in ("action", "proprio"):
        mean, std = policy.stats[key]
        assert np.all(std > 0) and not np.allclose(std, 1.0)               # real statistics, not the defaults
    assert policy.weights == str(SHIPPED)


@pytest.mark.unit
def test_shipped_weights_run_one_replan(policy):
    from libero_bridge import make_env

    env = make_env("goal", 1, 0, 0)
    obs = env.reset()
    policy.reset(env.instruction)
    out = policy.infer({"frames": np.repeat(obs["stacked"][None], 17, axis=0), "proprio": obs["proprio"]})
    assert out["actions"].shape == (17, 7) and np.isfinite(out["actions"]).all()
    assert np.isfinite(out["tr"]) and out["branches_computed"] == ["cond"]
    # A trained model moves the gripper (a random one outputs noise around the statistics' mean).
    assert np.abs(out["actions"][:5, :3]).max() > 0.05


@pytest.mark.sim
@pytest.mark.slow
def test_shipped_model_solves_seeded_goal_episodes(policy, tmp_path):
    from dataclasses import replace

    from libero_bridge.runner import SimConfig, SimRunner

    cfg = SimConfig(suite="goal", episodes=1, seed=0, guidance="none", record=False, plots=False, max_steps=150)
    wins = 0
    with SimRunner(cfg, tmp_path, policy=policy) as runner:
        for task in FLOOR_TASKS:
            runner.cfg = replace(cfg, first_task=task)
            policy.generator.manual_seed(0)
            wins += runner.run_episode(0)["success"]
    assert wins >= FLOOR, f"the shipped model solved {wins}/{len(FLOOR_TASKS)} seeded goal episodes (floor {FLOOR})"


FLOOR_TASKS = (1, 6, 8)      # goal tasks the shipped model solves at seed 0 in the measured evaluation
FLOOR = 1                    # well below the measured rate: a broken model fails, noise does not
