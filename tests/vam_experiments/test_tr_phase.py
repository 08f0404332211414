"""TR by phase explained: the rank correlation, the episode bootstrap, and the measurement on the
shipped libero64 weights (its TR is the TR study's; the swaps change the decoded chunk)."""
import numpy as np
import pytest

from vam_experiments.tr_phase import COVARIATES, GAPS, MASSES, spearman, summarise, table


@pytest.mark.unit
def test_spearman_ranks_with_ties():
    assert spearman([1, 2, 3, 4], [1, 3, 2, 4]) == pytest.approx(0.8)
    assert spearman([10, 20, 30], [3, 2, 1]) == pytest.approx(-1.0)
    # a binary covariate: ties get their average rank (0.5, 0.5 | 2.5, 2.5 -> perfectly ordered groups)
    assert spearman([0, 0, 1, 1], [0.1, 0.2, 0.8, 0.9]) == pytest.approx(np.corrcoef([0.5, 0.5, 2.5, 2.5],
                                                                                      [0, 1, 2, 3])[0, 1])
    assert np.isnan(spearman([1, 1, 1], [1, 2, 3]))


def _rows(n_ep=6):
    rows = []
    for e in range(n_ep):
        for t, ph in enumerate(["planning"] * 3 + ["manipulation"] * 3):
            tr = 0.2 + 0.1 * t + 0.01 * e
            rows.append({"episode": e, "phase": ph, "tr": tr, "scene_change": tr / 10, "action_change": -tr,
                         "gripper_event": float(t == 5), "swap_future": 0.1 * t, "swap_current": 0.5,
                         "future_share": 0.1 * t / (0.1 * t + 0.5), "future_gap": 1.0, "current_gap": 0.5,
                         "mass_v0": 0.5, "mass_vplus": 0.5 * tr})
    return rows


@pytest.mark.unit
def test_summary_by_phase_with_episode_bootstrap():
    s = summarise(_rows())
    bp, sp = s["by_phase"], s["spearman_tr"]
    assert bp["planning"]["tr"]["value"] == pytest.approx(np.mean([0.2 + 0.1 * t + 0.01 * e
                                                                    for e in range(6) for t in range(3)]))
    lo, hi = bp["manipulation"]["tr"]["ci95"]
    assert lo <= bp["manipulation"]["tr"]["value"] <= hi and bp["manipulation"]["tr"]["episodes"] == 6
    assert sp["scene_change"]["all"]["value"] == pytest.approx(1.0)
    assert sp["action_change"]["planning"]["value"] == pytest.approx(-1.0)
    assert set(sp) == set(COVARIATES)
    text = table(s)
    assert len(text.splitlines()) == 1 + 1 + len(MASSES) + len(COVARIATES) + len(GAPS) and "+1.00" in text


@pytest.mark.unit
def test_tr_phase_command_checks_arguments_before_loading(tmp_path):
    from vam_cli.main import main

    with pytest.raises(SystemExit, match="--episodes must be >= 2"):
        main(["tr-phase", "--checkpoint", "x.safetensors", "--episodes", "1", "--out", str(tmp_path / "o")])
    with pytest.raises(SystemExit, match="is not a file"):
        main(["tr-phase", "--checkpoint", str(tmp_path / "missing.safetensors"), "--out", str(tmp_path / "o")])
    from vam_stack.paths import models_dir

    with pytest.raises(SystemExit, match="--index 6 outside the solver grid"):
        main(["tr-phase", "--checkpoint", str(models_dir() / "libero64.safetensors"), "--index", "6",
              "--out", str(tmp_path / "o")])


@pytest.mark.unit
def test_measure_on_the_shipped_weights_matches_the_tr_study(tmp_path):
    from vam_experiments import tr_phase, tr_study
    from vam_model.policy import build_policy
    from vam_stack.paths import models_dir

    policy = build_policy(checkpoint=models_dir() / "libero64.safetensors", guidance="none", seed=0)
    states = tr_phase.collect_states("goal", 2, 0, 40, policy.mcfg.robot.chunk)
    assert len({s["episode"] for s in states}) == 2
    rows = tr_phase.measure(policy, states, progress=False)
    idx = policy.mcfg.solver.feature_index
    study = tr_study.measure(policy, states, [idx], progress=False)
    np.testing.assert_allclose([r["tr"] for r in rows], [r["tr"] for r in study], rtol=1e-4)
    for r, s in zip(rows, states):
        assert states[r["donor"]]["episode"] != s["episode"]
        assert r["swap_future"] > 0 and r["swap_current"] > 0 and 0 < r["future_share"] < 1
        assert r["future_gap"] > 0 and r["current_gap"] > 0
        assert r["tr"] == pytest.approx((r["mass_vplus"] + 1e-6) / (r["mass_v0"] + 1e-6), rel=1e-4)
        assert 0 <= r["scene_change"] <= 1 and r["action_change"] >= 0 and r["gripper_event"] in (0.0, 1.0)
    png = tr_phase.plot(rows, summarise(rows), tmp_path / "p.png")
    assert png.stat().st_size > 5000


@pytest.mark.unit
def test_states_read_from_a_collected_dataset_are_the_ones_it_recorded(tmp_path):
    # issue 68 item 5: the swap test on a model trained on real LIBERO reads that dataset's states
    from vam_data.dataset import write_dataset
    from vam_experiments import tr_phase
    from vam_sim.libero_mock import LiberoMockConfig, rollout_expert

    demos = [rollout_expert("goal", i, 0, 0, render=True, cfg=LiberoMockConfig.load()) for i in range(3)]
    write_dataset(tmp_path / "d", demos, {"suites": ["goal"]})
    states = tr_phase.dataset_states(tmp_path / "d", "goal", 2, 25, 17)
    assert {s["episode"] for s in states} == {0, 1}
    first, last = demos[0], demos[2]                  # two of three: spread over the order, both ends
    for s in states:
        demo = first if s["episode"] == 0 else last
        t = s["step"]
        assert t % 25 == 0 and s["instruction"] == demo.instruction and s["task"] == demo.task
        np.testing.assert_array_equal(s["frame"], demo.stacked[t])
        np.testing.assert_array_equal(s["proprio"], demo.proprio[t])
        assert s["phase"] == demo.phases[t]
        np.testing.assert_array_equal(s["future_frames"], demo.stacked[t:t + 17])
        np.testing.assert_allclose(s["future_actions"], demo.actions[t:t + 17], rtol=1e-6)
    with pytest.raises(SystemExit, match="holds only 3 episodes"):
        tr_phase.dataset_states(tmp_path / "d", "goal", 4, 25, 17)
