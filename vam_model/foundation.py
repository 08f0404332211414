"""Foundation weights into a vam_stack checkpoint: `vam-stack foundation import`.

The `real` and `libero` presets build the Cosmos-Predict2.5-2B video DiT (diffusers'
`CosmosTransformer3DModel`) and the Wan 2.1 VAE (`AutoencoderKLWan`). This module reads the
published files into them and writes one checkpoint (with its integrity hash) that
`train.init_from` starts from:

  transformer  a diffusers folder (`transformer/`: config.json + safetensors, sharded or not), or
               NVIDIA's native `.pt` (released `<uuid>_ema_bf16.pt` with `net.` keys, or a training
               `iter_*.pt` holding `model` with `net.` and `net_ema.` keys). Native keys are renamed
               by diffusers' own converter; TransformerEngine `_extra_state`, `accum_*` counters and
               RoPE tables are dropped there.
  vae          a diffusers folder (`vae/`), or the native Wan 2.1 file (`tokenizer.pth` /
               `Wan2.1_VAE.pth`), renamed by diffusers' own Wan VAE converter.
  head         freshly initialised (seeded), or from a pi0 checkpoint's Gemma expert (`--pi0`,
               see `vam_model.pi0_head`).

Every part is checked before anything is written: missing, unexpected and mis-shaped keys are
named, and a checkpoint of another variant (e.g. the 14B DiT given to a 2B preset) is named as
that variant. Native `.pt` files are pickles: they are read with `weights_only=True`, and a file
that needs more is refused unless `--trust-pickle` says you trust its source.
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Mapping

import torch

from .networks.action_head import ActionHead
from .networks.checkpoint import HASH_KEY, _read_header, save_checkpoint
from .networks.config import load_config
from .networks.model import VideoActionModel
from .networks.text_encoder import encoder_dims, resolve_encoder_path
from .networks.tokenizer import VideoTokenizer
from .pi0_head import load_pi0_head
from .weight_files import FoundationError, load_safetensors, read_tensor_file

# (layers, width) of the DiT variants a user may hold
DIT_VARIANTS = {(28, 2048): "Cosmos-Predict2.5-2B", (36, 5120): "Cosmos-Predict2.5-14B"}
# diffusers config fields that fix the DiT's tensors and function; compared with the preset's
DIT_CONFIG_FIELDS = ("in_channels", "out_channels", "num_attention_heads", "attention_head_dim", "num_layers",
                     "mlp_ratio", "text_embed_dim", "adaln_lora_dim", "patch_size", "rope_scale",
                     "concat_padding_mask", "extra_pos_embed_type", "use_crossattn_projection",
                     "crossattn_proj_in_channels", "encoder_hidden_states_channels")
VAE_CONFIG_FIELDS = ("base_dim", "z_dim", "dim_mult", "num_res_blocks", "temperal_downsample",
                     "latents_mean", "latents_std")
SHOWN = 5   # keys quoted per kind in an error
# diffusers name -> NVIDIA's native name: the inverse of the Cosmos 2.x renames, applied in order
# (files for tests and benchmarks in the native layout; reading uses diffusers' own converter)
NATIVE_NAMES = (
    ("time_embed.t_embedder", "t_embedder.1"), ("time_embed.norm", "t_embedding_norm"),
    ("transformer_blocks", "blocks"),
    ("norm1.linear_1", "adaln_modulation_self_attn.1"), ("norm1.linear_2", "adaln_modulation_self_attn.2"),
    ("norm2.linear_1", "adaln_modulation_cross_attn.1"), ("norm2.linear_2", "adaln_modulation_cross_attn.2"),
    ("norm3.linear_1", "adaln_modulation_mlp.1"), ("norm3.linear_2", "adaln_modulation_mlp.2"),
    ("attn1", "self_attn"), ("attn2", "cross_attn"), ("to_q", "q_proj"), ("to_k", "k_proj"),
    ("to_v", "v_proj"), ("to_out.0", "output_proj"), ("norm_q", "q_norm"), ("norm_k", "k_norm"),
    ("ff.net.0.proj", "mlp.layer1"), ("ff.net.2", "mlp.layer2"), ("patch_embed.proj", "x_embedder.proj.1"),
    ("norm_out.linear_1", "final_layer.adaln_modulation.1"), ("norm_out.linear_2", "final_layer.adaln_modulation.2"),
    ("proj_out", "final_layer.linear"),
)


def _json_object(path: Path, what: str) -> dict:
    """A JSON file that must hold an object (a list or `null` config.json silently skipped the
    comparison with the preset, or raised)."""
    try:
        obj = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise FoundationError(f"{path}: {what} is not JSON ({e})") from None
    if not isinstance(obj, dict):
        raise FoundationError(f"{path}: {what} holds {json.dumps(obj)[:40]}, not a JSON object")
    return obj


def read_diffusers_folder(folder: str | Path, what: str) -> tuple[dict, dict]:
    """(config.json, state dict) of a diffusers model folder (single or sharded safetensors)."""
    folder = Path(folder)
    cfg_file = folder / "config.json"
    if not cfg_file.is_file():
        raise FileNotFoundError(f"{what} folder {str(folder)!r} has no config.json (expected a diffusers "
                                f"'{what}/' folder written by save_pretrained)")
    config = _json_object(cfg_file, "config.json")
    index = sorted(folder.glob("*.safetensors.index.json"))
    if index:
        weight_map = _json_object(index[0], "the shard index").get("weight_map")
        if not isinstance(weight_map, dict) or not weight_map or \
                not all(isinstance(v, str) for v in weight_map.values()):
            raise FoundationError(f"{index[0]}: 'weight_map' is missing or not a mapping of tensor names to shard "
                                  f"files")
        files = [folder / s for s in sorted(set(weight_map.values()))]
    else:
        files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"{what} folder {str(folder)!r} has no .safetensors weights")
    state: dict = {}
    for f in files:
        if not f.is_file():
            raise FileNotFoundError(f"{what} folder {str(folder)!r}: shard {f.name!r} named by the index is missing")
        state.update(load_safetensors(f))
    return config, state


def _unwrap(raw: Mapping) -> Mapping:
    for key in ("model", "state_dict", "module"):
        if key in raw and isinstance(raw[key], Mapping):
            raw = raw[key]
    return raw


# ---- transformer ------------------------------------------------------------------------------
def native_transformer_state(raw: Mapping, weights: str = "ema") -> dict:
    """NVIDIA's native DiT state dict -> diffusers key names (diffusers' Cosmos converter).

    `weights`: "ema" takes the `net_ema.` copy of a training checkpoint when it has one (released
    `_ema_bf16.pt` files hold the EMA weights under `net.`), "net" takes the raw `net.` weights."""
    # diffusers (~2 s to import) only for NVIDIA's native files: a diffusers folder loads without it
    from diffusers.loaders.single_file_utils import convert_cosmos_transformer_checkpoint_to_diffusers

    if weights not in ("ema", "net"):
        raise ValueError(f"weights must be 'ema' or 'net', got {weights!r}")
    raw = _unwrap(raw)
    tensors = {k: v for k, v in raw.items() if isinstance(v, torch.Tensor)}
    has_ema = any(k.startswith("net_ema.") for k in tensors)
    if weights == "ema" and has_ema:
        picked = {"net." + k[len("net_ema."):]: v for k, v in tensors.items() if k.startswith("net_ema.")}
    else:
        picked = {k: v for k, v in tensors.items() if not k.startswith("net_ema.")}
    return convert_cosmos_transformer_checkpoint_to_diffusers(picked)


def native_name(key: str) -> str:
    """A diffusers DiT key as NVIDIA's native files name it (`net.` prefix)."""
    for new, old in NATIVE_NAMES:
        key = key.replace(new, old)
    return "net." + key


def read_transformer(path: str | Path, weights: str = "ema", trust_pickle: bool = False) -> tuple[dict | None, dict]:
    """(diffusers config or None, state dict with diffusers names) from a folder or a native file."""
    path = Path(path)
    if path.is_dir():
        sub = path / "transformer" if (path / "transformer" / "config.json").is_file() else path
        return read_diffusers_folder(sub, "transformer")
    return None, native_transformer_state(read_tensor_file(path, trust_pickle), weights)


def dit_variant(state: Mapping[str, torch.Tensor]) -> str:
    """'<name> (<layers> blocks, width <d>)' inferred from the tensors."""
    blocks = {int(k.split(".")[1]) for k in state if k.startswith("transformer_blocks.")}
    w = state.get("patch_embed.proj.weight")
    layers, width = (max(blocks) + 1 if blocks else 0), (int(w.shape[0]) if w is not None else 0)
    name = DIT_VARIANTS.get((layers, width), "an unknown variant")
    return f"{name} ({layers} blocks, width {width})"


def compare_config(got: Mapping, want: Mapping, fields, source: str, what: str) -> None:
    """Refuse a config.json whose fields differ from the preset's model (both values named)."""
    def norm(v):
        return list(v) if isinstance(v, (list, tuple)) else v

    diffs = [f"{f} {norm(got[f])!r} (file) vs {norm(want[f])!r} (preset)"
             for f in fields if f in got and f in want and norm(got[f]) != norm(want[f])]
    if diffs:
        raise FoundationError(f"{source}: the {what} config does not match the preset: {'; '.join(diffs)}")


def match_state(state: Mapping[str, torch.Tensor], expected: Mapping[str, torch.Tensor], source: str,
                what: str, variant: str = "") -> None:
    """Refuse missing, unexpected and mis-shaped keys, quoting up to SHOWN of each."""
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    shaped = [f"{k} {list(state[k].shape)} (file) vs {list(expected[k].shape)} (preset)"
              for k in sorted(set(state) & set(expected)) if tuple(state[k].shape) != tuple(expected[k].shape)]
    problems = []
    for label, items in (("missing", missing), ("unexpected", unexpected), ("mis-shaped", shaped)):
        if items:
            more = f" and {len(items) - SHOWN} more" if len(items) > SHOWN else ""
            problems.append(f"{len(items)} {label}: {', '.join(items[:SHOWN])}{more}")
    if problems:
        hint = f"; the file looks like {variant}" if variant else ""
        raise FoundationError(f"{source}: the {what} does not fit the preset: {'; '.join(problems)}{hint}")
    for k, t in state.items():
        if t.is_floating_point() and not t.is_meta and not torch.isfinite(t).all():
            raise FoundationError(f"{source}: {what} tensor {k!r} contains NaN or inf")


# ---- VAE --------------------------------------------------------------------------------------
def read_vae(path: str | Path, trust_pickle: bool = False) -> tuple[dict | None, dict]:
    """(diffusers config or None, state dict with diffusers names) of the Wan 2.1 VAE."""
    path = Path(path)
    if path.is_dir():
        sub = path / "vae" if (path / "vae" / "config.json").is_file() else path
        return read_diffusers_folder(sub, "vae")
    # diffusers (~2 s to import) only for the native Wan file
    from diffusers.loaders.single_file_utils import convert_wan_vae_to_diffusers

    raw = _unwrap(read_tensor_file(path, trust_pickle))
    if "decoder.middle.0.residual.0.gamma" not in raw:
        raise FoundationError(f"{path}: not a native Wan 2.1 VAE file (no 'decoder.middle.0.residual.0.gamma' key); "
                              f"give the VAE's diffusers folder or its .pth")
    return None, convert_wan_vae_to_diffusers(dict(raw))


# ---- the import -------------------------------------------------------------------------------
def import_foundation(preset: str, transformer: str | Path, vae: str | Path | None, out: str | Path,
                      pi0: str | Path | None = None, text_encoder: str | None = None, weights: str = "ema",
                      trust_pickle: bool = False, seed: int = 0, log=print) -> dict:
    """Build `preset` with the foundation weights and write it to `out`; returns a summary dict."""
    out = Path(out)
    if out.suffix != ".safetensors":
        raise ValueError(f"--out must be a .safetensors file, got {str(out)!r}")
    if out.exists():
        raise FileExistsError(f"--out {str(out)!r} exists: an import never replaces a file; choose another path")
    cfg = load_config(preset)
    t0 = time.monotonic()
    with torch.device("meta"):                       # the shapes, without allocating 2 B parameters twice
        model = VideoActionModel(cfg)
    expected_dit = model.dit.model.state_dict()
    log(f"reading the transformer from {transformer} ...")
    config, dit_state = read_transformer(transformer, weights, trust_pickle)
    if config is not None:
        compare_config(config, dict(model.dit.model.config), DIT_CONFIG_FIELDS, str(transformer), "transformer")
    match_state(dit_state, expected_dit, str(transformer), "transformer", dit_variant(dit_state))
    dtype = next(iter(expected_dit.values())).dtype
    model.dit.model.load_state_dict({k: v.to(dtype) for k, v in dit_state.items()}, strict=True, assign=True)
    sources = {"transformer": str(transformer)}
    del dit_state

    torch.manual_seed(seed)
    model.tokenizer = VideoTokenizer(cfg.tokenizer)  # on the CPU, with its latent statistics
    if cfg.tokenizer.type == "wan":
        if vae is None:
            raise FoundationError(f"preset {preset!r} encodes frames with the Wan 2.1 VAE: give its weights with --vae")
        log(f"reading the VAE from {vae} ...")
        vconfig, vstate = read_vae(vae, trust_pickle)
        if vconfig is not None:
            compare_config(vconfig, dict(model.tokenizer.vae.config), VAE_CONFIG_FIELDS, str(vae), "VAE")
        expected = model.tokenizer.vae.state_dict()
        match_state(vstate, expected, str(vae), "VAE")
        model.tokenizer.vae.load_state_dict({k: v.to(expected[k].dtype) for k, v in vstate.items()}, strict=True)
        sources["vae"] = str(vae)
    elif vae is not None:
        raise FoundationError(f"preset {preset!r} uses its own {cfg.tokenizer.type!r} frame encoder, not the Wan VAE: "
                              f"leave --vae out")
    model.head = ActionHead(cfg.head, cfg.dit.width, cfg.robot.action_dim, cfg.robot.proprio_dim)
    head_report = None
    if pi0 is not None:
        head_report = load_pi0_head(pi0, model.head)
        sources["head"] = str(pi0)
    left = [n for n, t in [*model.named_parameters(), *model.named_buffers()] if t.is_meta]
    if left:
        raise FoundationError(f"internal: {len(left)} tensors were not filled, e.g. {left[:3]}")
    if text_encoder is not None:
        check_text_encoder_dims(text_encoder, cfg.dit.text_in_dim)
    extra = {"foundation": {"sources": sources, "weights": weights, "seed": seed,
                            "head": "pi0 expert" if pi0 is not None else "random"}}
    if text_encoder is not None:
        extra["text_encoder"] = text_encoder
    log(f"writing {out} ...")
    tmp = out.with_name(f".{out.name}.partial.safetensors")
    try:                                             # a crash leaves no half-written checkpoint under `out`
        save_checkpoint(tmp, model, cfg, extra)
        tmp.replace(out)
    finally:
        tmp.unlink(missing_ok=True)
    n = sum(t.numel() for t in model.state_dict().values())
    return {"out": str(out), "preset": cfg.name, "parameters": n, "bytes": out.stat().st_size,
            "seconds": round(time.monotonic() - t0, 1), "sources": sources, "head": head_report,
            "tensor_sha256": _read_header(out)[HASH_KEY]}


def check_text_encoder_dims(spec: str, text_in_dim: int) -> None:
    """The encoder's layers x hidden width must be the preset's raw text width (config.json only)."""
    from transformers import AutoConfig      # heavy (~0.6 s): only when a text encoder is named

    config = AutoConfig.from_pretrained(resolve_encoder_path(spec), local_files_only=True)
    layers, hidden = encoder_dims(config)
    if layers * hidden != text_in_dim:
        raise FoundationError(f"text encoder {spec!r} gives {layers} layers x {hidden} = {layers * hidden} features "
                              f"per token, the preset's dit.text_in_dim is {text_in_dim}")
