"""Networks on the tiny preset (real compute) and the libero preset (meta device, shapes)."""
import dataclasses

import pytest
import torch

from vam_model.networks.action_head import ActionHead
from vam_model.networks.config import load_config
from vam_model.networks.model import VideoActionModel
from vam_model.networks.video_solver import rollout

pytestmark = pytest.mark.unit


def _inputs(cfg, batch=1, seed=0):
    g = torch.Generator().manual_seed(seed)
    h, w = cfg.latent_hw
    anchor = torch.randn(batch, 16, 1, h, w, generator=g)
    text = torch.randn(batch, cfg.dit.text_tokens, cfg.dit.text_dim, generator=g)
    noise = torch.randn(batch, 16, cfg.solver.latent_frames, h, w, generator=g)
    state = torch.randn(batch, cfg.robot.proprio_dim, generator=g)
    actions = torch.randn(batch, cfg.robot.chunk, cfg.robot.action_dim, generator=g)
    return anchor, text, noise, state, actions


@torch.no_grad()
def test_tiny_stage_shapes(tiny_model, tiny_cfg):
    cfg = tiny_cfg
    frames = torch.randint(0, 256, (2, 17, 224, 448, 3), dtype=torch.uint8)
    latent = tiny_model.encode_frames(frames)
    assert latent.shape == (2, 16, 5, 28, 56)
    anchor, text, noise, state, actions = _inputs(cfg, batch=2)
    raw = torch.randn(2, cfg.dit.text_tokens, cfg.dit.text_in_dim)
    assert tiny_model.dit.project_text(raw).shape == (2, cfg.dit.text_tokens, cfg.dit.text_dim)
    feats, sigma_v = tiny_model.video_features(anchor, text, noise)
    assert feats.shape == (2, 5, 392, cfg.dit.width)
    assert round(sigma_v, 3) == 0.883
    prefix = tiny_model.head.embed_prefix(feats, tiny_model.cfg.dit_grid, torch.full((feats.shape[0],), sigma_v, device=feats.device), state)
    assert prefix.shape == (2, 5 * 98 + 1, cfg.head.width)
    cache = tiny_model.head.prefix_cache(prefix)
    v, probs = tiny_model.head.denoise_step(cache, actions, torch.full((2,), 0.5), probs_layer=cfg.head.tr_layer)
    assert v.shape == (2, 17, 7)
    assert probs.shape == (2, cfg.head.heads, 17, 491 + 17)


@torch.no_grad()
def test_causal_tokenizer_first_latent_depends_on_first_frame_only(tiny_model):
    frames = torch.randint(0, 256, (1, 17, 224, 448, 3), dtype=torch.uint8)
    a = tiny_model.encode_frames(frames)
    frames2 = frames.clone()
    frames2[:, 1:] = 255 - frames2[:, 1:]
    b = tiny_model.encode_frames(frames2)
    assert torch.equal(a[:, :, 0], b[:, :, 0])
    assert not torch.allclose(a[:, :, 1:], b[:, :, 1:])
    single = tiny_model.encode_frames(frames[:, :1])
    assert single.shape == (1, 16, 1, 28, 56)
    torch.testing.assert_close(single[:, :, 0], a[:, :, 0], rtol=1e-5, atol=1e-5)


def test_libero_shapes_on_meta():
    cfg = load_config("libero")
    with torch.device("meta"):
        model = VideoActionModel(cfg)
        frames = torch.zeros(1, 17, 224, 448, 3, dtype=torch.uint8)
        latent = model.encode_frames(frames)
        assert latent.shape == (1, 16, 5, 28, 56)
        x = torch.zeros(1, 16, 5, 28, 56)
        m = torch.zeros(1, 1, 5, 28, 56)
        s = torch.zeros(1, 5)
        text = torch.zeros(1, cfg.dit.text_tokens, cfg.dit.text_dim)
        assert model.dit.velocity(x, m, s, text).shape == (1, 16, 5, 28, 56)
        feats = model.dit.features(x, m, s, text)
        assert feats.shape == (1, 5, 392, 2048)
        prefix = model.head.embed_prefix(feats, cfg.dit_grid, torch.zeros(1), torch.zeros(1, 8))
        assert prefix.shape == (1, 491, 1024)
        v, _ = model.head.denoise_step(model.head.prefix_cache(prefix), torch.zeros(1, 17, 7), torch.zeros(1))
        assert v.shape == (1, 17, 7)


@torch.no_grad()
def test_anchor_frame_is_bit_exact_after_every_solver_step(tiny_model, tiny_cfg):
    anchor, text, noise, _, _ = _inputs(tiny_cfg)
    is_anchor = torch.tensor([True, False, False, False, False])
    seen = []

    def velocity(x, mask, sigma):
        # the DiT must see the clean anchor at every call
        assert torch.equal(x[:, :, 0], anchor[:, :, 0])
        return tiny_model.dit.velocity(x, mask, tiny_model.dit.frame_sigmas(sigma, is_anchor), text)

    def on_step(i, x):
        seen.append(i)
        assert torch.equal(x[:, :, 0], anchor[:, :, 0])
        assert not torch.equal(x[:, :, 1], noise[:, :, 1])

    x, _ = rollout(anchor, noise, velocity, tiny_cfg.solver, on_step=on_step)
    assert seen == list(range(6))
    assert torch.isfinite(x).all()


@torch.no_grad()
def test_anchor_time_sigma_applied(tiny_model):
    s = tiny_model.dit.frame_sigmas(torch.tensor([0.9, 0.5]), torch.tensor([True, False, False]))
    torch.testing.assert_close(s, torch.tensor([[1e-4, 0.9, 0.9], [1e-4, 0.5, 0.5]]))


@torch.no_grad()
def test_block_k_exit_equals_block_output_of_full_forward(tiny_model, tiny_cfg):
    anchor, text, noise, _, _ = _inputs(tiny_cfg)
    x = torch.cat([anchor, noise[:, :, 1:]], dim=2)
    mask = torch.zeros(1, 1, 5, 28, 56)
    mask[:, :, 0] = 1
    sig = tiny_model.dit.frame_sigmas(torch.tensor([0.883]), mask[0, 0, :, 0, 0].bool())
    captured = {}
    k = tiny_cfg.dit.feature_block
    handle = tiny_model.dit.model.transformer_blocks[k - 1].register_forward_hook(
        lambda mod, inp, out: captured.setdefault("out", out))
    calls = []
    later = tiny_model.dit.model.transformer_blocks[k].register_forward_hook(lambda *a: calls.append(1))
    try:
        tiny_model.dit.velocity(x, mask, sig, text)
        assert len(calls) == 1
        full = captured.pop("out")
        calls.clear()
        feats = tiny_model.dit.features(x, mask, sig, text)
        assert calls == [], "blocks after k must not run"
    finally:
        handle.remove()
        later.remove()
    torch.testing.assert_close(feats.flatten(1, 2), full, rtol=0, atol=0)
    v, f2 = tiny_model.dit.velocity_and_features(x, mask, sig, text, block=k)
    torch.testing.assert_close(f2, feats, rtol=0, atol=0)
    torch.testing.assert_close(v, tiny_model.dit.velocity(x, mask, sig, text), rtol=0, atol=0)


@torch.no_grad()
def test_cached_and_uncached_velocity_agree(tiny_model, tiny_cfg):
    anchor, text, noise, state, actions = _inputs(tiny_cfg, batch=2)
    feats, sv = tiny_model.video_features(anchor, text, noise)
    prefix = tiny_model.head.embed_prefix(feats, tiny_model.cfg.dit_grid, torch.full((feats.shape[0],), sv, device=feats.device), state)
    cache = tiny_model.head.prefix_cache(prefix)
    L = tiny_cfg.head.tr_layer
    for sigma in (1.0, 0.55, 0.1):
        s = torch.full((2,), sigma)
        v1, p1 = tiny_model.head.denoise_step(cache, actions, s, probs_layer=L)
        v2, p2 = tiny_model.head.denoise_step_uncached(prefix, actions, s, probs_layer=L)
        torch.testing.assert_close(v1, v2, rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(p1, p2, rtol=1e-4, atol=1e-6)


def test_time_conditioned_prefix_refuses_cache(tiny_cfg):
    cfg = dataclasses.replace(tiny_cfg.head, prefix_time_conditioned=True)
    head = ActionHead(cfg, tiny_cfg.dit.width, 7, 8)
    with pytest.raises(RuntimeError, match="cannot be cached"):
        head.prefix_cache(torch.zeros(1, 5, cfg.width))


@torch.no_grad()
def test_attention_rows_sum_to_one_and_mask(tiny_model, tiny_cfg):
    anchor, text, noise, state, actions = _inputs(tiny_cfg)
    feats, sv = tiny_model.video_features(anchor, text, noise)
    prefix = tiny_model.head.embed_prefix(feats, tiny_model.cfg.dit_grid, torch.full((feats.shape[0],), sv, device=feats.device), state)
    _, probs = tiny_model.head.denoise_step_uncached(prefix, actions, torch.tensor([0.3]), probs_layer=2)
    torch.testing.assert_close(probs.sum(-1), torch.ones_like(probs.sum(-1)))
    mask = ActionHead.attention_mask(3, 2)
    # video rows see only video; the state row sees video + state; actions see all
    assert mask.tolist() == [
        [True, True, True, False, False, False],
        [True, True, True, False, False, False],
        [True, True, True, False, False, False],
        [True, True, True, True, False, False],
        [True, True, True, True, True, True],
        [True, True, True, True, True, True],
    ]
