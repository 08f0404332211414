"""The shipped robot-path weights (models/yam64.safetensors): they load with the real robot's
action, proprio and chunk geometry, and a seeded handover evaluation stays above a floor set
well below the measured rate (no test pins the outcome of one rollout)."""
import numpy as np
import pytest

from vam_stack.paths import models_dir

SHIPPED = models_dir() / "yam64.safetensors"


@pytest.fixture(scope="module")
def policy():
    from vam_model.policy import build_policy

    assert SHIPPED.is_file(), f"{SHIPPED} is missing: train it (docs/robot_path.md) and copy model.safetensors there"
    return build_policy(checkpoint=SHIPPED, guidance="none", seed=0)


@pytest.mark.unit
def test_shipped_robot_weights_are_small_and_carry_the_robot_geometry(policy):
    from vam_model.networks.checkpoint import read_metadata

    assert SHIPPED.stat().st_size <= 25e6
    cfg, extra = read_metadata(SHIPPED)
    r = cfg.robot
    assert cfg.name == "yam64" and extra["text_encoder"].startswith("pkg:")
    assert (r.action_dim, r.proprio_dim, r.chunk, r.execute, r.control_hz, r.action_type) == \
        (14, 14, 50, 30, 30.0, "absolute_joint")
    assert (len(r.cameras), r.frames, r.frame_skip) == (3, 17, 3)
    for key in ("action", "proprio"):
        mean, std = policy.stats[key]
        assert np.all(std > 0) and not np.allclose(std, 1.0)               # real statistics, not the defaults


@pytest.mark.sim
@pytest.mark.slow
def test_shipped_model_reaches_for_the_block_in_seeded_handover_episodes(policy, tmp_path, mujoco_renders):
    """EPISODES handover episodes (seed id 5, unguided, lockstep, capped at MAX_STEPS ticks): in at
    least FLOOR of them the left gripper closes in on the block, to within REACH of its starting
    distance. The shipped model solves 80 % of the reporting handovers (docs/robot_path.md), [58-92]:
    too uncertain for a success floor that only a broken model fails, so the floor is on the approach it
    makes in every episode; untrained or mis-normalised weights do not approach the block."""
    from vam_sim.yam_mujoco.runner import YamRunConfig, YamSimRunner

    cfg = YamRunConfig(task="handover", episodes=EPISODES, seed=5, guidance="none", record=False, plots=False,
                       max_steps=MAX_STEPS)
    policy.generator.manual_seed(5)
    ratios: list[float] = []
    with YamSimRunner(cfg, tmp_path, policy=policy) as runner:
        sim = runner.robot.sim
        for i in range(EPISODES):
            dist: list[float] = []
            runner.capture = lambda *a: dist.append(float(np.linalg.norm(sim.site_pos("left_grasp")
                                                                        - sim.body_pos("block"))))
            runner.run_episode(i)
            ratios.append(min(dist) / dist[0])
    reached = sum(r < REACH for r in ratios)
    assert reached >= FLOOR, (f"the shipped model closed in on the block in {reached}/{EPISODES} seeded handover "
                              f"episodes (closest / starting distance {[round(r, 3) for r in ratios]}; floor "
                              f"{FLOOR} below {REACH}, measured {MEASURED})")


# Measured on the shipped model (these episodes, 2 threads, per-episode policy noise): closest /
# starting distance 0.114, 0.112, 0.108 (the ninth run's weights; the eighth's: 0.150, 0.124, 0.190,
# the sixth's: 0.156, 0.123, 0.235); random yam64 weights on the same episodes: 0.677, 0.536. REACH
# sits between them.
EPISODES, MAX_STEPS, REACH = 3, 300, 0.3
MEASURED, FLOOR = "0.114, 0.112, 0.108", 2
