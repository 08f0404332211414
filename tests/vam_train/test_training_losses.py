"""Training losses: noise schedules, the clean anchor, and loss decrease on a fixed batch."""
import numpy as np
import pytest
import torch

from vam_train.losses import (LossConfig, action_loss, joint_losses, noisy_video, sample_sigma_a,
                                             sample_sigma_v)
from vam_stack.config import ConfigError


def _batch(cfg, b=2, seed=0):
    g = torch.Generator().manual_seed(seed)
    r = cfg.robot
    return {"frames": torch.randint(0, 256, (b, r.frames, r.image_height, r.image_width, 3), dtype=torch.uint8, generator=g),
            "text": torch.randn(b, cfg.dit.text_tokens, cfg.dit.text_in_dim, generator=g) * 0.1,
            "state": torch.randn(b, r.proprio_dim, generator=g),
            "actions": torch.randn(b, r.chunk, r.action_dim, generator=g)}


@pytest.mark.unit
def test_sigma_a_follows_beta_1_5_1():
    s = sample_sigma_a(20000, 1.5, torch.Generator().manual_seed(0))
    assert float(s.min()) >= 0.001 and float(s.max()) <= 1.0
    assert abs(float(s.mean()) - (0.6 * 0.999 + 0.001)) < 0.01            # Beta(1.5, 1) mean = 0.6
    assert abs(float((s < 0.5).float().mean()) - 0.5 ** 1.5) < 0.01         # CDF x^1.5: favours high noise


@pytest.mark.unit
def test_sigma_v_mixes_uniform_and_grid(micro_model):
    g = torch.Generator().manual_seed(0)
    u = sample_sigma_v(micro_model, 4000, 0.0, g)
    assert 0.45 < float(u.mean()) < 0.55
    grid = sample_sigma_v(micro_model, 200, 1.0, g)
    from vam_model.networks.video_solver import sigma_grid
    assert set(np.round(grid.numpy(), 5)) <= set(np.round(np.float32(sigma_grid(micro_model.cfg.solver)), 5))


@pytest.mark.unit
def test_noisy_video_holds_the_anchor_clean(micro_model):
    z = torch.randn(3, 16, 5, 8, 16)
    sigma = torch.tensor([1.0, 0.5, 0.9])
    x, mask, sf, target = noisy_video(micro_model, z, sigma, torch.Generator().manual_seed(1), True)
    assert torch.equal(x[:, :, 0], z[:, :, 0]) and torch.all(mask[:, :, 0] == 1) and torch.all(mask[:, :, 1:] == 0)
    assert torch.allclose(sf[:, 0], torch.full((3,), micro_model.cfg.dit.anchor_time_sigma))
    assert torch.allclose(sf[:, 1:], sigma[:, None].expand(-1, 4))
    eps = target + z                                                         # target = eps - x0
    assert torch.allclose(x[1, :, 1:], 0.5 * z[1, :, 1:] + 0.5 * eps[1, :, 1:], atol=1e-6)


@pytest.mark.unit
def test_action_loss_cached_prefix_matches_uncached(micro_model):
    cfg = micro_model.cfg
    feats = torch.randn(2, 5, 32, cfg.dit.width)
    state, a0 = torch.randn(2, 8), torch.randn(2, 17, 7)
    sig_v = torch.tensor([0.9, 0.2])
    got = action_loss(micro_model, feats, sig_v, state, a0, 1, 1.5, torch.Generator().manual_seed(3))
    g = torch.Generator().manual_seed(3)
    eps = torch.randn(a0.shape, generator=g)
    sa = sample_sigma_a(2, 1.5, g)
    prefix = micro_model.head.embed_prefix(feats, cfg.dit_grid, sig_v, state)
    a = (1 - sa.view(-1, 1, 1)) * a0 + sa.view(-1, 1, 1) * eps
    v, _ = micro_model.head.denoise_step_uncached(prefix, a, sa)
    assert torch.allclose(got, ((v - (eps - a0)) ** 2).mean(), atol=1e-5)


@pytest.mark.unit
def test_joint_loss_decreases_on_a_fixed_batch(micro_cfg):
    from vam_model.networks.model import VideoActionModel

    torch.manual_seed(0)
    model = VideoActionModel(micro_cfg).train()
    batch = _batch(micro_cfg)
    cfg = LossConfig(text_dropout=0.0, action_samples=2)
    opt = torch.optim.Adam(model.parameters(), lr=2e-3)

    def losses(step):
        return joint_losses(model, batch, cfg, torch.Generator().manual_seed(100 + step % 2))

    with torch.no_grad():
        first = {k: float(v) for k, v in losses(0).items()}
    for step in range(30):
        out = losses(step)
        opt.zero_grad()
        out["total"].backward()
        opt.step()
    with torch.no_grad():
        last = {k: float(v) for k, v in losses(0).items()}
    assert last["action"] < 0.7 * first["action"], (first, last)
    assert last["video"] < first["video"], (first, last)


@pytest.mark.unit
def test_loss_config_validates():
    with pytest.raises(ConfigError, match="1.5"):
        LossConfig(text_dropout=1.5)
    with pytest.raises(ConfigError, match="0"):
        LossConfig(action_samples=0)


@pytest.mark.unit
def test_sigma_v_feature_prob_picks_the_inference_level(micro_model):
    from vam_model.networks.video_solver import sigma_grid
    level = np.float32(sigma_grid(micro_model.cfg.solver)[micro_model.cfg.solver.feature_index])
    g = torch.Generator().manual_seed(0)
    assert np.allclose(sample_sigma_v(micro_model, 50, 0.0, g, feature_prob=1.0).numpy(), level)
    mixed = sample_sigma_v(micro_model, 6000, 0.5, g, feature_prob=0.3).numpy()
    share = float(np.isclose(mixed, level).mean())          # 0.3 direct + 0.5 / grid size via the grid draw
    assert abs(share - (0.3 + 0.5 / len(sigma_grid(micro_model.cfg.solver)))) < 0.03
    with pytest.raises(ConfigError, match="sigma_v_grid_prob \\+ sigma_v_feature_prob"):
        LossConfig(sigma_v_grid_prob=0.8, sigma_v_feature_prob=0.3)


@pytest.mark.unit
def test_the_committed_prefix_objective_gives_clean_prefixes_and_scores_the_free_actions(micro_model):
    """prefix_prob = 1: each draw's first d actions (d in 1..max) reach the head clean at sigma 0,
    and only the free actions are scored (the prefix rows' velocity has no gradient). prob 0 draws
    nothing extra, so the old noise stream (and loss) is unchanged."""
    from vam_train.losses import prefix_delays

    g = torch.Generator().manual_seed(0)
    d = prefix_delays(4000, 0.5, 6, g)
    assert set(d.tolist()) == set(range(7)) and abs(float((d == 0).float().mean()) - 0.5) < 0.03
    g0 = torch.Generator().manual_seed(5)
    assert prefix_delays(8, 0.0, 6, g0).tolist() == [0] * 8 and torch.equal(g0.get_state(),
                                                                           torch.Generator().manual_seed(5).get_state())
    cfg = micro_model.cfg
    feats = torch.randn(2, 5, 32, cfg.dit.width)
    state, a0 = torch.randn(2, 8), torch.randn(2, 17, 7)
    sig_v = torch.tensor([0.9, 0.2])
    plain = action_loss(micro_model, feats, sig_v, state, a0, 2, 1.5, torch.Generator().manual_seed(3))
    again = action_loss(micro_model, feats, sig_v, state, a0, 2, 1.5, torch.Generator().manual_seed(3), (0.0, 0))
    assert torch.equal(plain, again)

    seen = {}
    real = micro_model.head.denoise_step

    def spy(cache, a, sig, **kw):
        v, p = real(cache, a, sig, **kw)
        v.retain_grad()
        seen.update(a=a, sig=sig, v=v)
        return v, p

    micro_model.head.denoise_step = spy
    try:
        loss = action_loss(micro_model, feats, sig_v, state, a0, 2, 1.5, torch.Generator().manual_seed(3), (1.0, 5))
        loss.backward()
    finally:
        del micro_model.head.denoise_step
    micro_model.zero_grad()
    sig, a, grad = seen["sig"], seen["a"], seen["v"].grad                 # [4, 17], [4, 17, 7], [4, 17, 7]
    clean = sig == 0
    delays = clean.sum(1)
    assert sig.shape == (4, 17) and torch.all((delays >= 1) & (delays <= 5))
    assert torch.all(clean == (torch.arange(17)[None] < delays[:, None]))   # a prefix, not scattered tokens
    a_rep = a0.repeat_interleave(2, 0)
    assert torch.equal(a[clean], a_rep[clean])                             # clean: the demonstration's actions
    assert torch.all(grad[clean] == 0) and torch.all(grad[~clean].abs().sum(-1) > 0)
    with pytest.raises(ValueError, match=r"prefix_max must be in \[1, 16\].*got 17"):
        action_loss(micro_model, feats, sig_v, state, a0, 1, 1.5, torch.Generator(), (0.5, 17))


@pytest.mark.unit
def test_the_prefix_objective_needs_both_settings_and_a_free_action(micro_cfg, tmp_path):
    with pytest.raises(ConfigError, match="prefix_prob 0.5 and loss.prefix_max 0"):
        LossConfig(prefix_prob=0.5)
    with pytest.raises(ConfigError, match="prefix_max must be an integer >= 0, got 2.5"):
        LossConfig(prefix_prob=0.5, prefix_max=2.5)
    with pytest.raises(ConfigError, match="prefix_prob must be in"):
        LossConfig(prefix_prob=1.5, prefix_max=2)


def test_v0_dropout_zeroes_the_current_frame_features_the_head_sees(micro_model):
    # issue 68 design "limit what V0 carries": with v0_dropout the head sometimes sees no current frame
    cfg = micro_model.cfg
    feats = torch.randn(6, 5, 32, cfg.dit.width, requires_grad=True)
    state, a0 = torch.randn(6, 8), torch.randn(6, 17, 7)
    sig_v = torch.rand(6)
    off = action_loss(micro_model, feats, sig_v, state, a0, 1, 1.5, torch.Generator().manual_seed(3))
    again = action_loss(micro_model, feats, sig_v, state, a0, 1, 1.5, torch.Generator().manual_seed(3), (0.0, 0), 0.0)
    assert torch.equal(off, again)                       # 0: no extra draw, the same loss as before

    seen = {}
    real = micro_model.head.embed_prefix

    def spy(f, grid, sigma, st):
        seen["feats"] = f
        return real(f, grid, sigma, st)
    micro_model.head.embed_prefix = spy
    try:
        loss = action_loss(micro_model, feats, sig_v, state, a0, 1, 1.5, torch.Generator().manual_seed(1), (0.0, 0),
                           0.5)
        loss.backward()
    finally:
        del micro_model.head.embed_prefix
    micro_model.zero_grad()
    f = seen["feats"]
    dropped = (f[:, 0] == 0).flatten(1).all(1)           # [B] V0 zeroed
    assert dropped.tolist() == [False, True, True, False, True, False]   # seed 1's first draw, < 0.5
    t = cfg.solver.latent_frames
    torch.testing.assert_close(f[~dropped], feats[~dropped, :t])              # kept as they were
    torch.testing.assert_close(f[dropped, 1:], feats[dropped, 1:t])           # V+ untouched
    assert torch.all(feats.grad[dropped, 0] == 0) and torch.all(feats.grad[~dropped, 0].abs().sum((-1, -2)) > 0)
    with pytest.raises(ConfigError, match="v0_dropout must be in"):
        LossConfig(v0_dropout=1.0)
