"""The shipped weights (models/libero64.safetensors: since issue 68 the from-scratch model trained with
`loss.v0_dropout`, whose head reads its imagined future, docs/paper_study.md): they load, replan, follow
the instruction,
and a seeded evaluation of several episodes stays above a floor set well below the measured rate
(no test pins the outcome of one rollout: that breaks on a BLAS or thread-count change)."""
import numpy as np
import pytest

from vam_stack.paths import models_dir

SHIPPED = models_dir() / "libero64.safetensors"


@pytest.fixture(scope="module")
def policy():
    from vam_model.policy import build_policy

    assert SHIPPED.is_file(), f"{SHIPPED} is missing: train it (docs/training.md) and copy model.safetensors there"
    return build_policy(checkpoint=SHIPPED, guidance="none", seed=0)


@pytest.mark.unit
def test_shipped_weights_are_small_carry_their_statistics_and_the_mock_they_learned(policy):
    from vam_sim.libero_mock.config import CONVENTIONS, checkpoint_conventions
    from vam_model.networks.checkpoint import read_metadata

    assert SHIPPED.stat().st_size <= 25e6
    cfg, extra = read_metadata(SHIPPED)
    assert cfg.name == "libero64" and extra["text_encoder"].startswith("pkg:")
    for key in ("action", "proprio"):
        mean, std = policy.stats[key]
        assert np.all(std > 0) and not np.allclose(std, 1.0)               # real statistics, not the defaults
    assert policy.checkpoint == str(SHIPPED)
    assert checkpoint_conventions(SHIPPED) == CONVENTIONS                  # trained on the mock as it is


def _fit(stacked):
    from vam_stack.views import fit_views

    return fit_views(stacked, 2, 64, 64)


@pytest.mark.unit
def test_the_default_is_the_v0_dropout_model_and_the_study_models_are_kept():
    """Issue 68's rule chose the default (docs/paper_study.md, "A head that reads its imagined future"):
    it must be the v0_dropout weights, and the paper study's rows (the LoRA model, the default before,
    and the from-scratch model) must stay where the study reads them."""
    from vam_experiments.paper_study import load_study_config
    from vam_model.networks.checkpoint import verify_checkpoint
    from vam_stack.paths import share_dir

    assert verify_checkpoint(SHIPPED) == verify_checkpoint(models_dir() / "study" / "libero64_v0_dropout.safetensors")
    cfg = load_study_config(share_dir() / "config" / "study" / "paper_study.yaml")
    study = {m.name: share_dir() / m.checkpoint for m in cfg.models}
    for name in ("scratch", "lora", "full"):
        assert study[name].is_file() and verify_checkpoint(study[name]) != verify_checkpoint(SHIPPED), name


@pytest.mark.unit
def test_shipped_weights_run_one_replan(policy):
    from vam_sim.libero_mock import make_env

    env = make_env("goal", 1, 0, 0)
    obs = env.reset()
    policy.reset(env.instruction)
    out = policy.infer({"frame": _fit(obs["stacked"]), "proprio": obs["proprio"]})
    assert out["actions"].shape == (17, 7) and np.isfinite(out["actions"]).all()
    assert np.isfinite(out["tr"]) and out["branches_computed"] == ["cond"]
    # A trained model moves the gripper (a random one outputs noise around the statistics' mean).
    assert np.abs(out["actions"][:5, :3]).max() > 0.05


def first_chunk_errors(policy, seed: int = 5, wrong_per_task: int = 3):
    """Normalised MSE between the policy's first 10 actions and the scripted expert's, on the first
    state of one `goal` episode per task at seed id 5 (neither training nor reporting), with the
    task's own instruction and with `wrong_per_task` other tasks' instructions."""
    import torch

    from vam_sim.libero_mock import make_env
    from vam_sim.libero_mock.expert import expert_action

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
            out = policy.infer({"frame": _fit(starts[task]["stacked"]),
                                "proprio": starts[task]["proprio"]}, noise)
            err = float((((out["actions"][:10] - experts[task]) / std) ** 2).mean())
            (right if j == task else wrong).append(err)
    return float(np.mean(right)), float(np.mean(wrong))


@pytest.mark.sim
@pytest.mark.slow
def test_shipped_model_follows_the_instruction(policy):
    """Open-loop floor: the first chunk is close to the expert's with the right instruction and
    clearly further with a wrong one (a broken model, text route or normalisation fails both)."""
    right, wrong = first_chunk_errors(policy)
    assert right < RIGHT_MAX, f"first-chunk error with the right instruction {right:.3f} >= {RIGHT_MAX} (measured {RIGHT_MEASURED})"
    assert right / wrong < RATIO_MAX, (f"right/wrong instruction error ratio {right / wrong:.3f} >= {RATIO_MAX} "
                                       f"(measured {RATIO_MEASURED}): the instruction no longer steers the policy")


@pytest.mark.sim
@pytest.mark.slow
def test_shipped_model_solves_seeded_goal_episodes_above_a_floor(policy, tmp_path):
    """Ten goal episodes (one per task, seed id 5, unguided): at least FLOOR solved. The floor sits
    far below the measured rate, so it fails on a broken model, not on one unlucky rollout."""
    from vam_sim.libero_mock.runner import SimConfig, SimRunner

    cfg = SimConfig(suite="goal", episodes=10, seed=5, guidance="none", record=False, plots=False)
    policy.generator.manual_seed(5)
    with SimRunner(cfg, tmp_path, policy=policy) as runner:
        solved = sum(runner.run_episode(i)["success"] for i in range(10))
    assert solved >= FLOOR, f"the shipped model solved {solved}/10 seeded goal episodes (floor {FLOOR}, measured {MEASURED})"


# Measured on the shipped model (this file's own computations, 1 thread): right-instruction error
# 0.024 (normalised units), wrong 0.86, ratio 0.028; the seeded ten episodes: 9/10 (the reporting
# seeds: 92/100, 541/600, docs/paper_study.md). The limits sit far from both: a model at 83 % fails
# the floor of 5/10 with probability 0.3 %, a broken one always. (The LoRA default before it measured
# 0.026 / 0.030 and 9/10; the from-scratch weights before that 0.015 / 0.018 and 10/10.)
RIGHT_MEASURED, RATIO_MEASURED = 0.024, 0.028
RIGHT_MAX, RATIO_MAX = 0.1, 0.3
MEASURED, FLOOR = "9/10", 5
