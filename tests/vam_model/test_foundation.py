"""Foundation weights in their published formats load through `vam-stack foundation import`.

Small models are written by diffusers' own `save_pretrained` (transformer, VAE), and a native
NVIDIA `.pt` is built from the same weights by the inverse of diffusers' key renames; the
imported checkpoint's extractor must then compute what diffusers' modules compute. The full-size
`real` preset is checked on the meta device against a state dict with the published 2B shapes.
"""
from __future__ import annotations

import json
import re
import types

import pytest
import torch
import yaml

from vam_model.foundation import (FoundationError, dit_variant, import_foundation, match_state, native_name,
                                  native_transformer_state, read_tensor_file)
from vam_model.networks.checkpoint import load_checkpoint, read_metadata, verify_checkpoint
from vam_model.networks.config import load_config
from vam_model.networks.model import VideoActionModel
from vam_model.networks.tokenizer import frames_to_video

# what NVIDIA's files carry beside the weights (TransformerEngine state, counters, RoPE tables)
NATIVE_JUNK = ("blocks.0.self_attn.attn_op._extra_state", "accum_iteration", "accum_video_sample_counter",
               "pos_embedder.seq", "pos_embedder.dim_spatial_range", "pos_embedder.dim_temporal_range")

# a Wan residual block's diffusers names -> native ones
WAN_RES = {"norm1.gamma": "residual.0.gamma", "conv1.": "residual.2.", "norm2.gamma": "residual.3.gamma",
           "conv2.": "residual.6.", "conv_shortcut.": "shortcut."}


def _res(rest):
    for new, old in WAN_RES.items():
        if rest.startswith(new):
            return old + rest[len(new):]
    return rest


def wan_vae_native_key(k: str) -> str:
    """diffusers AutoencoderKLWan key -> the native Wan 2.1 VAE key (inverse of diffusers' converter)."""
    top = {"quant_conv.": "conv1.", "post_quant_conv.": "conv2."}
    for new, old in top.items():
        if k.startswith(new):
            return old + k[len(new):]
    side, rest = k.split(".", 1)
    if rest.startswith("conv_in."):
        return f"{side}.conv1.{rest[len('conv_in.'):]}"
    if rest.startswith("norm_out."):
        return f"{side}.head.0.{rest[len('norm_out.'):]}"
    if rest.startswith("conv_out."):
        return f"{side}.head.2.{rest[len('conv_out.'):]}"
    m = re.match(r"mid_block\.resnets\.(\d)\.(.+)", rest)
    if m:
        return f"{side}.middle.{2 * int(m.group(1))}.{_res(m.group(2))}"
    m = re.match(r"mid_block\.attentions\.0\.(.+)", rest)
    if m:
        return f"{side}.middle.1.{m.group(1)}"
    m = re.match(r"down_blocks\.(\d+)\.(.+)", rest)
    if m:
        return f"{side}.downsamples.{m.group(1)}.{_res(m.group(2))}"
    m = re.match(r"up_blocks\.(\d+)\.resnets\.(\d+)\.(.+)", rest)
    if m:
        b, r, tail = int(m.group(1)), int(m.group(2)), m.group(3)
        if tail.startswith("conv_shortcut."):
            return f"{side}.upsamples.{4 * b + r}.shortcut.{tail[len('conv_shortcut.'):]}"
        return f"{side}.upsamples.{4 * b + r}.{_res(tail)}"
    m = re.match(r"up_blocks\.(\d+)\.upsamplers\.0\.(.+)", rest)
    if m:
        return f"{side}.upsamples.{4 * int(m.group(1)) + 3}.{m.group(2)}"
    raise KeyError(k)


SMALL = {
    "name": "foundation_small",
    "robot": {"cameras": ["top"], "camera_width": 32, "camera_height": 32, "frames": 5, "frame_skip": 1,
              "camera_hz": 30.0, "action_dim": 7, "proprio_dim": 7, "action_type": "absolute_joint",
              "chunk": 4, "execute": 2, "control_hz": 30.0},
    "tokenizer": {"type": "wan", "latent_channels": 16, "base_dim": 8},
    "dit": {"layers": 3, "heads": 2, "head_dim": 24, "mlp_ratio": 2.0, "text_dim": 32, "text_in_dim": 48,
            "text_tokens": 8, "adaln_lora_dim": 16, "patch": [1, 2, 2], "rope_scale": [1.0, 3.0, 3.0],
            "extra_pos_embed": False, "concat_padding_mask": True, "feature_block": 2},
    "solver": {"steps": 3, "feature_index": 1, "latent_frames": 2, "plan_latent_frames": 2},
    "head": {"layers": 2, "width": 64, "heads": 2, "kv_heads": 1, "head_dim": 32, "mlp_dim": 128,
             "internal_dim": 32, "fourier_dim": 16, "tr_layer": 1},
}


def to_native(state: dict) -> dict:
    """diffusers names -> native ones; diffusers' own converter must map them back (checked by the imports)."""
    return {native_name(k): v for k, v in state.items()}


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    """A small preset plus its DiT and VAE saved by diffusers, and the same DiT in native form."""
    from diffusers import AutoencoderKLWan

    root = tmp_path_factory.mktemp("foundation")
    preset = root / "foundation_small.yaml"
    preset.write_text(yaml.safe_dump(SMALL))
    cfg = load_config(preset)
    torch.manual_seed(1)
    dit = VideoActionModel(cfg).dit.model                                # diffusers' class, the preset's config
    with torch.no_grad():
        for p in dit.parameters():                                       # non-trivial everywhere (zero-inits too)
            p.add_(0.02 * torch.randn_like(p))
    dit.save_pretrained(root / "pipeline" / "transformer")
    vae = AutoencoderKLWan(base_dim=8, z_dim=16)
    vae.save_pretrained(root / "pipeline" / "vae")
    state = {k: v.clone() for k, v in dit.state_dict().items()}
    native = to_native(state)
    junk = {k: torch.zeros(3) for k in NATIVE_JUNK}
    raw = {**{k: v + 1.0 for k, v in native.items()}, **{"net." + k: t for k, t in junk.items()},
           **{k.replace("net.", "net_ema.", 1): v for k, v in native.items()}}
    torch.save({"model": raw, "iteration": 1000}, root / "iter_000001000.pt")   # a training checkpoint
    return types.SimpleNamespace(root=root, preset=str(preset), cfg=cfg, dit_state=state)


def diffusers_forward(model, x, mask, sigma_frames, text, block: int):
    """diffusers' own forward (per-frame timesteps), with block `block`'s output captured."""
    import torch.nn.functional as F
    from diffusers.models.transformers import transformer_cosmos

    seen = {}
    hook = model.transformer_blocks[block - 1].register_forward_hook(lambda m, i, o: seen.setdefault("f", o))
    # torchvision does not install beside the CPU torch wheel; the forward only resizes the padding mask
    # (same size here) with it, so a nearest resize stands in
    shim = types.SimpleNamespace(
        functional=types.SimpleNamespace(resize=lambda t, size, interpolation=None: F.interpolate(t, size=size)),
        InterpolationMode=types.SimpleNamespace(NEAREST="nearest"))
    old = getattr(transformer_cosmos, "transforms", None)
    transformer_cosmos.transforms = shim
    try:
        b, _, t, h, w = x.shape
        out = model(x, sigma_frames.view(b, 1, t, 1, 1), text, condition_mask=mask,
                    padding_mask=torch.zeros(1, 1, h, w), return_dict=False)[0]
    finally:
        hook.remove()
        if old is None:
            del transformer_cosmos.transforms
        else:
            transformer_cosmos.transforms = old
    return out, seen["f"]


def test_diffusers_folders_import_and_compute_what_diffusers_computes(published, tmp_path):
    from diffusers import AutoencoderKLWan, CosmosTransformer3DModel

    out = tmp_path / "small.safetensors"
    summary = import_foundation(published.preset, published.root / "pipeline", published.root / "pipeline",
                                out, log=lambda m: None)
    assert verify_checkpoint(out) == summary["tensor_sha256"]
    stored, extra = read_metadata(out)
    assert stored.name == "foundation_small" and extra["foundation"]["head"] == "random"
    model = VideoActionModel(published.cfg).eval()
    load_checkpoint(out, model)
    ref = CosmosTransformer3DModel.from_pretrained(published.root / "pipeline" / "transformer").eval()
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 16, 2, 4, 4, generator=g)                         # latent [B, C, T, h, w]
    mask = torch.zeros(2, 1, 2, 4, 4)
    mask[:, :, 0] = 1.0                                                  # frame 0 is the anchor
    sigma = model.dit.frame_sigmas(torch.tensor([0.9, 0.4]), torch.tensor([True, False]))  # [B, T]
    raw_text = torch.randn(2, 8, 48, generator=g)
    with torch.no_grad():
        want_v, want_f = diffusers_forward(ref, x, mask, sigma, raw_text, block=2)
        text = model.dit.project_text(raw_text)
        got_v = model.dit.velocity(x, mask, sigma, text)
        got_f = model.dit.features(x, mask, sigma, text, block=2)        # [B, T, N, D]
    assert want_v.abs().max() > 1e-3                                     # not a vacuous comparison
    torch.testing.assert_close(got_v, want_v, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(got_f.flatten(1, 2), want_f, atol=1e-5, rtol=1e-4)

    vae = AutoencoderKLWan.from_pretrained(published.root / "pipeline" / "vae").eval()
    frames = torch.randint(0, 256, (1, 5, 32, 32, 3), generator=g, dtype=torch.uint8)
    video = frames_to_video(frames)
    with torch.no_grad():
        z = vae.encode(video).latent_dist.mode()
        mean = torch.tensor(vae.config.latents_mean).view(1, -1, 1, 1, 1)
        std = torch.tensor(vae.config.latents_std).view(1, -1, 1, 1, 1)
        torch.testing.assert_close(model.encode_frames(frames), (z - mean) / std, atol=1e-5, rtol=1e-4)


def test_native_training_checkpoint_imports_its_ema_weights(published, tmp_path):
    raw = read_tensor_file(published.root / "iter_000001000.pt")
    ema = native_transformer_state(raw, "ema")
    assert set(ema) == set(published.dit_state)                          # junk dropped, every key renamed
    for k, v in published.dit_state.items():
        assert torch.equal(ema[k], v), k
    net = native_transformer_state(raw, "net")
    key = "proj_out.weight"
    assert torch.equal(net[key], published.dit_state[key] + 1.0)          # the raw copy, on request
    out = tmp_path / "native.safetensors"
    import_foundation(published.preset, published.root / "iter_000001000.pt", published.root / "pipeline" / "vae",
                      out, log=lambda m: None)
    model = VideoActionModel(published.cfg)
    load_checkpoint(out, model)
    for k, v in published.dit_state.items():
        assert torch.equal(model.dit.model.state_dict()[k], v), k


def test_native_wan_vae_file_imports_through_diffusers_converter(published, tmp_path):
    from diffusers import AutoencoderKLWan

    vae = AutoencoderKLWan.from_pretrained(published.root / "pipeline" / "vae")
    native = {wan_vae_native_key(k): v for k, v in vae.state_dict().items()}
    assert "decoder.middle.0.residual.0.gamma" in native and "encoder.downsamples.0.residual.2.weight" in native
    torch.save(native, tmp_path / "Wan2.1_VAE.pth")
    out = tmp_path / "native_vae.safetensors"
    import_foundation(published.preset, published.root / "iter_000001000.pt", tmp_path / "Wan2.1_VAE.pth", out,
                      log=lambda m: None)
    model = VideoActionModel(published.cfg)
    load_checkpoint(out, model)
    got = model.tokenizer.vae.state_dict()
    for k, v in vae.state_dict().items():
        assert torch.equal(got[k], v), k
    torch.save({"encoder.conv1.weight": torch.zeros(1)}, tmp_path / "other.pth")
    with pytest.raises(FoundationError, match="not a native Wan 2.1 VAE file"):
        import_foundation(published.preset, published.root / "iter_000001000.pt", tmp_path / "other.pth",
                          tmp_path / "o.safetensors", log=lambda m: None)


def test_a_wrong_file_is_named_before_anything_is_written(published, tmp_path):
    base = published.dit_state
    native = to_native(base)
    out = tmp_path / "x.safetensors"

    def attempt(state, name):
        f = tmp_path / name
        torch.save(state, f)
        with pytest.raises(FoundationError) as e:
            import_foundation(published.preset, f, published.root / "pipeline", out, log=lambda m: None)
        assert not out.exists()
        return str(e.value)

    gone = dict(native)
    del gone["net.blocks.1.cross_attn.k_proj.weight"]
    assert "1 missing: transformer_blocks.1.attn2.to_k.weight" in attempt(gone, "missing.pt")
    extra_block = {**native, **{k.replace("blocks.2.", "blocks.3."): v for k, v in native.items() if ".blocks.2." in k}}
    msg = attempt(extra_block, "deeper.pt")
    assert "unexpected: transformer_blocks.3." in msg and "4 blocks, width 48" in msg
    wide = dict(native)
    wide["net.crossattn_proj.0.weight"] = torch.zeros(32, 64)
    assert "crossattn_proj.0.weight [32, 64] (file) vs [32, 48] (preset)" in attempt(wide, "wide.pt")
    nan = dict(native)
    nan["net.final_layer.linear.weight"] = torch.full_like(nan["net.final_layer.linear.weight"], float("nan"))
    assert "NaN" in attempt(nan, "nan.pt")


def test_a_folder_of_another_config_is_refused_by_field(published, tmp_path):
    import shutil

    folder = tmp_path / "transformer"
    shutil.copytree(published.root / "pipeline" / "transformer", folder)
    cfg = json.loads((folder / "config.json").read_text())
    cfg["rope_scale"] = [2.0, 1.0, 1.0]
    (folder / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(FoundationError, match=r"rope_scale \[2.0, 1.0, 1.0\] \(file\) vs \[1.0, 3.0, 3.0\]"):
        import_foundation(published.preset, folder, published.root / "pipeline", tmp_path / "y.safetensors",
                          log=lambda m: None)
    (folder / "config.json").write_text("{not json")
    with pytest.raises(FoundationError, match="config.json is not JSON"):
        import_foundation(published.preset, folder, published.root / "pipeline", tmp_path / "y.safetensors",
                          log=lambda m: None)


def test_pickles_beyond_tensors_need_trust_and_outputs_are_never_replaced(published, tmp_path):
    f = tmp_path / "odd.pt"
    torch.save({"model": to_native(published.dit_state), "cfg": types.SimpleNamespace(lr=1)}, f)
    with pytest.raises(FoundationError, match="--trust-pickle"):
        read_tensor_file(f)
    assert "model" in read_tensor_file(f, trust_pickle=True)
    out = tmp_path / "taken.safetensors"
    out.write_bytes(b"earlier run")
    with pytest.raises(FileExistsError, match="never replaces"):
        import_foundation(published.preset, published.root / "pipeline", published.root / "pipeline", out)
    assert out.read_bytes() == b"earlier run"
    with pytest.raises(FoundationError, match="--vae"):
        import_foundation(published.preset, published.root / "pipeline", None, tmp_path / "z.safetensors",
                          log=lambda m: None)


# ---- full size, on the meta device ------------------------------------------------------------
COSMOS_2B = dict(in_channels=17, out_channels=16, num_attention_heads=16, attention_head_dim=128, num_layers=28,
                 mlp_ratio=4.0, text_embed_dim=1024, adaln_lora_dim=256, max_size=(128, 240, 240),
                 patch_size=(1, 2, 2), rope_scale=(1.0, 3.0, 3.0), concat_padding_mask=True,
                 extra_pos_embed_type=None, use_crossattn_projection=True, crossattn_proj_in_channels=100352,
                 encoder_hidden_states_channels=1024)   # diffusers' Cosmos-2.5-Predict-Base-2B


def meta_state(**config) -> dict:
    from diffusers import CosmosTransformer3DModel

    with torch.device("meta"):
        return CosmosTransformer3DModel(**config).state_dict()


def test_the_real_preset_consumes_every_key_of_the_published_2b_dit():
    published = meta_state(**COSMOS_2B)
    native = {**to_native(published), **{"net." + k: torch.empty(1, device="meta") for k in NATIVE_JUNK}}
    state = native_transformer_state(native)
    with torch.device("meta"):
        model = VideoActionModel(load_config("real"))
    expected = model.dit.model.state_dict()
    assert set(state) == set(expected)                                   # none missing, none left over
    match_state(state, expected, "published 2B", "transformer")          # every shape too
    assert dit_variant(state) == "Cosmos-Predict2.5-2B (28 blocks, width 2048)"
    n = sum(t.numel() for t in state.values())
    assert 1.9e9 < n < 2.1e9


def test_a_14b_dit_given_to_the_2b_preset_is_named_as_such():
    big = meta_state(**{**COSMOS_2B, "num_attention_heads": 40, "num_layers": 36})
    with torch.device("meta"):
        expected = VideoActionModel(load_config("real")).dit.model.state_dict()
    with pytest.raises(FoundationError, match=r"looks like Cosmos-Predict2.5-14B \(36 blocks, width 5120\)"):
        match_state(big, expected, "14b.pt", "transformer", dit_variant(big))


def test_the_import_command_prints_one_line_per_mistake(published, tmp_path, capsys):
    from vam_cli.main import entry

    rc = entry(["foundation", "import", "--preset", published.preset, "--transformer", str(tmp_path / "nope.pt"),
                "--out", str(tmp_path / "o.safetensors")])
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith("vam-stack foundation: error: weights file not found")
    rc = entry(["foundation", "inspect", str(published.root / "pipeline")])
    assert rc == 0 and "unknown variant (3 blocks, width 48)" in capsys.readouterr().out
