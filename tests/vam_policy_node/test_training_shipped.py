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
def test_shipped_model_solves_the_measured_goal_episode(policy, tmp_path):
    """The episode the measured evaluation solved, under the same noise stream, must still succeed.

    `vam-stack eval` seeds the policy's generator once per suite run; tasks 0-5 before task 6 all
    ran to the 150-step cap (15 replans each), so task 6 starts after 90 replans' noise draws.
    """
    from libero_bridge.runner import SimConfig, SimRunner

    cfg = SimConfig(suite="goal", episodes=1, seed=0, guidance="none", record=False, plots=False,
                    first_task=FLOOR_TASK, max_steps=150)
    policy.generator.manual_seed(0)
    for _ in range(NOISE_REPLANS_BEFORE):
        policy._noise(None)                       # advance the stream exactly as the evaluation did
    with SimRunner(cfg, tmp_path, policy=policy) as runner:
        ep = runner.run_episode(0)
    assert ep["success"], f"the shipped model no longer solves goal task {FLOOR_TASK} at seed 0 ({ep['termination']})"


# Measured (vam-stack eval --suites goal,goal_ood --episodes-per-task 1 --seeds 0 --max-steps 150): the shipped
# model solves 1/10 goal tasks, task 6 ("put the black bowl on the plate", 42 steps). Its success depends on the
# sampling noise (3 other noise seeds: 0/3), so the floor is this one measured episode, replayed exactly.
FLOOR_TASK = 6
NOISE_REPLANS_BEFORE = 6 * 15
