"""Temporal Ratio, sampler, guidance schedules (pure, pinned)."""
import math

import pytest
import torch

from vam_model.guidance import GuidanceConfig, GuidanceSchedule, adaptive_scale, combine_velocities
from vam_model.networks.action_sampler import euler_integrate, sigma_schedule
from vam_model.temporal_ratio import attention_masses, ratio_from_masses, video_attention_map
from vam_stack.config import ConfigError

pytestmark = pytest.mark.unit


def temporal_ratio(probs, tokens_per_frame, video_tokens):
    """TR as the live path computes it (vam_model.networks.head_io): masses, then their ratio."""
    return ratio_from_masses(*attention_masses(probs, tokens_per_frame, video_tokens))


def _probs(rows):
    """[A, L] rows -> [1, 1, A, L]."""
    return torch.tensor(rows, dtype=torch.float32)[None, None]


def test_tr_on_hand_built_attention():
    # 2 tokens per frame, 3 frames (6 video tokens), then state + 2 actions = 9 keys
    p = _probs([
        [0.1, 0.1, 0.2, 0.2, 0.1, 0.1, 0.1, 0.05, 0.05],   # V0 0.2, V+ 0.6
        [0.3, 0.1, 0.1, 0.1, 0.1, 0.1, 0.1, 0.05, 0.05],   # V0 0.4, V+ 0.4
    ])
    m0, mp = attention_masses(p, tokens_per_frame=2, video_tokens=6)
    assert m0.item() == pytest.approx(0.6) and mp.item() == pytest.approx(1.0)
    assert temporal_ratio(p, 2, 6).item() == pytest.approx(1.0 / 0.6, rel=1e-4)


def test_tr_heads_are_averaged_before_the_ratio():
    h1 = [[0.5, 0.0, 0.5, 0.0]]      # V0 0.5, V+ 0.5
    h2 = [[0.0, 0.0, 1.0, 0.0]]      # V0 0.0, V+ 1.0
    p = torch.tensor([h1, h2], dtype=torch.float32)[None]  # [1, 2, 1, 4]
    assert temporal_ratio(p, 1, 3).item() == pytest.approx((0.75 + 1e-6) / (0.25 + 1e-6))


def test_tr_zero_mass_guard():
    only_state = _probs([[0, 0, 0, 0, 1.0]])
    assert temporal_ratio(only_state, 2, 4).item() == pytest.approx(1.0)
    no_v0 = _probs([[0, 0, 0.5, 0.5, 0]])
    tr = temporal_ratio(no_v0, 2, 4).item()
    assert math.isfinite(tr) and tr > 1e5


def test_tr_uniform_attention_is_frame_count_ratio():
    p = torch.full((1, 4, 3, 10), 0.1)
    assert temporal_ratio(p, 2, 10).item() == pytest.approx(4.0, rel=1e-5)


def test_tr_rejects_bad_layout():
    with pytest.raises(ValueError, match="tokens_per_frame"):
        temporal_ratio(torch.ones(1, 1, 1, 4), 4, 4)
    with pytest.raises(ValueError, match=r"\[B, heads"):
        temporal_ratio(torch.ones(1, 4), 1, 2)


def test_video_attention_map_averages_heads():
    p = torch.rand(2, 3, 5, 9)
    m = video_attention_map(p, 6)
    assert m.shape == (2, 5, 6)
    torch.testing.assert_close(m, p[..., :6].mean(1))


def test_euler_integrates_constant_velocity_exactly():
    noise = torch.randn(2, 17, 7)
    target = torch.randn(2, 17, 7)
    v = noise - target                        # constant conditional velocity eps - a0
    out = euler_integrate(lambda x, s, i: v, noise, 10)
    torch.testing.assert_close(out, target, rtol=0, atol=1e-6)


def test_euler_visits_fixed_sigmas():
    seen = []
    euler_integrate(lambda x, s, i: seen.append((i, round(s[0].item(), 6))) or torch.zeros_like(x), torch.zeros(1, 2, 3), 4)
    assert seen == [(0, 1.0), (1, 0.75), (2, 0.5), (3, 0.25)]
    assert sigma_schedule(2).tolist() == [1.0, 0.5, 0.0]
    with pytest.raises(ValueError):
        sigma_schedule(0)


def test_flat_equals_base_weights():
    g = GuidanceSchedule(GuidanceConfig(schedule="flat", w_lang_base=0.1, w_plan_base=0.3))
    for tr in (1.0, 5.0, 0.2):
        assert g.update(tr) == (1.0, 0.1, 0.3)


def test_none_is_zero():
    g = GuidanceSchedule(GuidanceConfig(schedule="none"))
    assert g.update(9.0) == (0.0, 0.0, 0.0)


def test_tr_adaptive_follows_clip_formula_and_holds_tr0():
    g = GuidanceSchedule(GuidanceConfig(schedule="tr_adaptive", s_max=2.0))
    script = [2.0, 2.0, 3.0, 4.0, 7.0, 1.0, 2.5]
    expected_s = [0.0, 0.0, 0.5, 1.0, 2.0, 0.0, 0.25]
    for tr, s in zip(script, expected_s):
        got = g.update(tr)
        assert got[0] == pytest.approx(s)
        assert got[1] == pytest.approx(0.1 * s) and got[2] == pytest.approx(0.3 * s)
        assert g.tr0 == 2.0
    g.reset()
    assert g.tr0 is None
    assert g.update(5.0)[0] == 0.0 and g.tr0 == 5.0


def test_running_min_baseline_is_a_labelled_ablation_of_the_papers_first_tr0():
    from vam_model.guidance import guidance_label, parse_guidance_label

    g = GuidanceSchedule(GuidanceConfig(schedule="tr_adaptive", tr_baseline="running_min", s_max=2.0))
    script = [2.0, 3.0, 1.0, 1.5, float("nan"), 4.0]
    expected = [(0.0, 2.0), (0.5, 2.0), (0.0, 1.0), (0.5, 1.0), (0.0, 1.0), (2.0, 1.0)]
    for tr, (s, tr0) in zip(script, expected):
        assert g.update(tr)[0] == pytest.approx(s) and g.tr0 == tr0
    paper = GuidanceSchedule(GuidanceConfig(schedule="tr_adaptive"))
    assert [paper.update(tr)[0] for tr in script[:4]] == [0.0, 0.5, 0.0, 0.0]   # TR_0 stays the first reading
    assert guidance_label(GuidanceConfig()) == "tr_adaptive"
    assert guidance_label(GuidanceConfig(tr_baseline="running_min")) == "tr_adaptive+running_min"
    assert guidance_label(GuidanceConfig(schedule="flat", tr_baseline="running_min")) == "flat"
    assert parse_guidance_label("tr_adaptive+running_min") == ("tr_adaptive", "running_min")
    assert parse_guidance_label("none") == ("none", "first")
    for bad in ("flat+running_min", "tr_adaptive+", "tr_adaptive+median"):
        with pytest.raises(ValueError, match="unknown guidance"):
            parse_guidance_label(bad)
    with pytest.raises(ConfigError, match="'median'"):
        GuidanceConfig(tr_baseline="median")


def test_adaptive_scale_guards():
    assert adaptive_scale(3.0, 0.0, 2.0) == 0.0
    assert adaptive_scale(float("nan"), 1.0, 2.0) == 0.0
    assert adaptive_scale(100.0, 1.0, 2.0) == 2.0


def test_guidance_config_errors():
    with pytest.raises(ConfigError, match="'cfg'"):
        GuidanceConfig(schedule="cfg")
    with pytest.raises(ConfigError, match="-0.1"):
        GuidanceConfig(w_lang_base=-0.1)


def test_guidance_combination_pins_each_sign_and_zero_weights_return_v_cond():
    v_cond, v_null, v_plan = torch.tensor([1.0, 2.0]), torch.tensor([0.5, 3.0]), torch.tensor([4.0, 0.0])
    assert combine_velocities(v_cond) is v_cond                       # no guidance: v_cond itself
    assert combine_velocities(v_cond, None, None, 0.0, 0.0) is v_cond
    # language: away from the null-text prediction (v_cond - v_null), scaled by w_lang
    torch.testing.assert_close(combine_velocities(v_cond, v_null, None, 2.0, 0.0), torch.tensor([2.0, 0.0]))
    # plan: toward the long-rollout prediction (v_plan - v_cond), scaled by w_plan
    torch.testing.assert_close(combine_velocities(v_cond, None, v_plan, 0.0, 0.5), torch.tensor([2.5, 1.0]))
    both = combine_velocities(v_cond, v_null, v_plan, 2.0, 0.5)
    torch.testing.assert_close(both, v_cond + 2.0 * (v_cond - v_null) + 0.5 * (v_plan - v_cond))
