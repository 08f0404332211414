"""The shipped weights (models/tiny.safetensors): they load, replan, and still solve seeded episodes."""
import numpy as np
import pytest

from vam_stack.paths import models_dir

SHIPPED = models_dir() / "tiny.safetensors"


def _trained_on_current_mock() -> bool:
    from libero_bridge.config import CONVENTIONS, checkpoint_conventions

    return SHIPPED.is_file() and checkpoint_conventions(SHIPPED) == CONVENTIONS


# The behaviour floors below hold for weights trained on the mock as it is. The shipped weights
# predate the mock's move to LIBERO's conventions (frames, 20 Hz ticks, task lists); until they are
# retrained (issue "A model that acts"), those floors are skipped with this reason, and come back
# by themselves once the shipped checkpoint records the current conventions.
needs_current_mock = pytest.mark.skipif(
    not _trained_on_current_mock(),
    reason="models/tiny.safetensors was trained on the mock before it followed LIBERO's conventions; "
           "retraining it is the open issue 'A model that acts'")


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


def first_chunk_errors(policy, seed: int = 7, wrong_per_task: int = 3):
    """Normalised MSE between the policy's first 10 actions and the scripted expert's, on the first
    state of one held-out `goal` episode per task (seed id 7: neither training nor evaluation),
    with the task's own instruction and with `wrong_per_task` other tasks' instructions."""
    import torch

    from libero_bridge import make_env
    from libero_bridge.expert import expert_action

    std = np.asarray(policy.stats["action"][1])
    starts, experts, instr = [], [], []
    for task in range(10):
        env = make_env("goal", task, 0, seed)
        obs = env.reset()
        starts.append(obs)
        instr.append(env.instruction)
        acts = []
        for _ in range(10):
            acts.append(np.clip(expert_action(env), -1, 1))
            env.step(acts[-1])
        experts.append(np.stack(acts))
    right, wrong = [], []
    for task in range(10):
        for j in [task] + [(task + k) % 10 for k in range(1, wrong_per_task + 1)]:
            policy.reset(instr[j])
            g = torch.Generator().manual_seed(task)
            noise = {"video": policy.model.video_noise(1, 5, g), "action": torch.randn(1, 17, 7, generator=g)}
            out = policy.infer({"frames": np.repeat(starts[task]["stacked"][None], 17, axis=0),
                                "proprio": starts[task]["proprio"]}, noise)
            err = float((((out["actions"][:10] - experts[task]) / std) ** 2).mean())
            (right if j == task else wrong).append(err)
    return float(np.mean(right)), float(np.mean(wrong))


@needs_current_mock
@pytest.mark.sim
@pytest.mark.slow
def test_shipped_model_follows_the_instruction_on_held_out_states(policy):
    """Open-loop floor: the first chunk is close to the expert's with the right instruction and
    clearly further with a wrong one (a broken model, text route or normalisation fails both)."""
    right, wrong = first_chunk_errors(policy)
    assert right < RIGHT_MAX, f"first-chunk error with the right instruction {right:.3f} >= {RIGHT_MAX} (measured {RIGHT_MEASURED})"
    assert right / wrong < RATIO_MAX, (f"right/wrong instruction error ratio {right / wrong:.3f} >= {RATIO_MAX} "
                                       f"(measured {RATIO_MEASURED}): the instruction no longer steers the policy")


# Measured on the shipped model (this test's own computation, 2 threads): right-instruction error
# RIGHT_MEASURED (normalised units; an unconditioned average policy is ~0.45) and right/wrong ratio
# RATIO_MEASURED (1.0 = the instruction is ignored). The limits sit well above both.
RIGHT_MEASURED, RATIO_MEASURED = 0.111, 0.217
RIGHT_MAX, RATIO_MAX = 0.25, 0.6


@needs_current_mock
@pytest.mark.sim
@pytest.mark.slow
def test_shipped_model_solves_the_measured_goal_episode(policy, tmp_path):
    """The first episode of the measured evaluation (goal task FLOOR_TASK, seed 0, unguided, fresh
    noise stream, 150-step cap) was solved; under the same noise it must still be."""
    from libero_bridge.runner import SimConfig, SimRunner

    cfg = SimConfig(suite="goal", episodes=1, seed=0, guidance="none", record=False, plots=False,
                    first_task=FLOOR_TASK, max_steps=150)
    policy.generator.manual_seed(0)                 # as `vam-stack eval` seeds the first suite run
    with SimRunner(cfg, tmp_path, policy=policy) as runner:
        ep = runner.run_episode(0)
    assert ep["success"], f"the shipped model no longer solves goal task {FLOOR_TASK} at seed 0 ({ep['termination']})"


# Measured (vam-stack eval --suites goal,goal_ood --seeds 0 --guidance none --max-steps 150, models/tiny.md):
# the first episode, goal task 0 "put the black bowl in the top drawer of the cabinet", succeeds.
FLOOR_TASK = 0
