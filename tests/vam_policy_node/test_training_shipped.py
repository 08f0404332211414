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
    from libero_bridge.runner import SimConfig, SimRunner

    cfg = SimConfig(suite="goal", episodes=1, seed=0, guidance="none", record=False, plots=False,
                    first_task=FLOOR_TASK, max_steps=150)
    wins = 0
    with SimRunner(cfg, tmp_path, policy=policy) as runner:
        for rep in range(FLOOR_EPISODES):
            policy.generator.manual_seed(rep)
            wins += runner.run_episode(10 * rep)["success"]          # episode index 10*rep: task FLOOR_TASK, rep
    assert wins >= FLOOR, f"the shipped model solved {wins}/{FLOOR_EPISODES} seeded episodes of goal task {FLOOR_TASK}"


# Goal task 6 ("put the black bowl on the plate") is the task the shipped model solves in the measured
# evaluation (1/10 goal tasks at seed 0); measured here: see the report. The floor sits below that.
FLOOR_TASK = 6
FLOOR_EPISODES = 3
FLOOR = 1
