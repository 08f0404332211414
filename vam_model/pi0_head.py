"""The action head initialised from pi0's Gemma expert (openpi's PyTorch / lerobot `pi0` weights).

pi0's action expert is Gemma "300m": width 1024, 18 layers, 8 query heads sharing one
key/value head of width 256, GeGLU MLP 4096, Gemma RMSNorm (weight applied as 1 + w), RoPE
base 10000 over rotate-half pairs, attention scaled by 1/sqrt(256). The head's default shape is
that one, so its layers take the expert's weights one for one:

  gemma_expert.model.layers.N.self_attn.{q,k,v,o}_proj   -> head.layers.N.{q,k,v,o}
  gemma_expert.model.layers.N.mlp.{gate,up}_proj         -> head.layers.N.gate_up (gate rows, then up)
  gemma_expert.model.layers.N.mlp.down_proj              -> head.layers.N.down
  gemma_expert.model.layers.N.input_layernorm            -> head.layers.N.attn_norm.weight
  gemma_expert.model.layers.N.post_attention_layernorm   -> head.layers.N.mlp_norm.weight
  gemma_expert.model.norm                                -> head.final_norm.weight
  state_proj / action_in_proj / action_out_proj          -> head.state_proj / action_in / action_out

(keys as openpi's converted `model.safetensors` has them; lerobot's carry a `model.` prefix).
What does not carry over, and stays freshly initialised:
  - pi0 joins the flow time to each action token by concatenation (`action_time_mlp_in`
    2048 -> 1024, `action_time_mlp_out`, sinusoidal time with periods 4e-3..4); this head
    conditions on sigma_a through adaptive RMSNorm (`*.dense`, `action_time`). The dense layers
    are zero-initialised, so at import every layer computes exactly pi0's expert layer.
  - pi0's prefix (images, language) runs through PaliGemma's own 2B weights; here the prefix
    is DiT video features (`video_proj`, `video_time`), processed by the expert's weights.
  - pi0.5 checkpoints (adaRMS: `input_layernorm.dense.*`) are refused: their modulation's chunk
    order is not the head's.
"""
from __future__ import annotations

import re
from pathlib import Path

import torch

from .weight_files import FoundationError, read_tensor_file

EXPERT = "paligemma_with_expert.gemma_expert.model."
LAYER_MAP = {"self_attn.q_proj.weight": "q.weight", "self_attn.k_proj.weight": "k.weight",
             "self_attn.v_proj.weight": "v.weight", "self_attn.o_proj.weight": "o.weight",
             "mlp.down_proj.weight": "down.weight", "input_layernorm.weight": "attn_norm.weight",
             "post_attention_layernorm.weight": "mlp_norm.weight"}
TOP_MAP = {"state_proj": "state_proj", "action_in_proj": "action_in", "action_out_proj": "action_out"}
NOT_MAPPED = ("action_time_mlp_in", "action_time_mlp_out", "time_mlp_in", "time_mlp_out")


def pi0_head_state(raw: dict, head: torch.nn.Module, source: str = "pi0") -> tuple[dict, dict]:
    """(head state dict to load, report) from a pi0 state dict; every head key it fills is checked."""
    raw = {k[len("model."):] if k.startswith("model.") else k: v for k, v in raw.items()}
    if any(".dense." in k for k in raw if k.startswith(EXPERT)):
        raise FoundationError(f"{source}: a pi0.5 checkpoint (adaRMS '*.dense' norms in the expert); only pi0's "
                              f"plain-RMSNorm expert maps onto the head")
    expected = head.state_dict()
    out: dict[str, torch.Tensor] = {}
    layer_re = re.compile(re.escape(EXPERT) + r"layers\.(\d+)\.(.+)$")
    gate_up: dict[int, dict[str, torch.Tensor]] = {}
    for key, t in raw.items():
        m = layer_re.match(key)
        if m:
            i, rest = int(m.group(1)), m.group(2)
            if rest in LAYER_MAP:
                out[f"layers.{i}.{LAYER_MAP[rest]}"] = t
            elif rest in ("mlp.gate_proj.weight", "mlp.up_proj.weight"):
                gate_up.setdefault(i, {})[rest.split(".")[1]] = t
        elif key == EXPERT + "norm.weight":
            out["final_norm.weight"] = t
        else:
            name, _, param = key.partition(".")
            if name in TOP_MAP and param in ("weight", "bias"):
                out[f"{TOP_MAP[name]}.{param}"] = t
    for i, parts in gate_up.items():
        if set(parts) != {"gate_proj", "up_proj"}:
            raise FoundationError(f"{source}: expert layer {i} has {sorted(parts)} but not both gate_proj and up_proj")
        out[f"layers.{i}.gate_up.weight"] = torch.cat([parts["gate_proj"], parts["up_proj"]], dim=0)  # [2*mlp, W]
    if not out:
        raise FoundationError(f"{source}: no pi0 action-expert keys (expected '{EXPERT}layers.N...' with or without "
                              f"a 'model.' prefix)")
    unexpected = sorted(set(out) - set(expected))
    if unexpected:
        raise FoundationError(f"{source}: the expert has {len(unexpected)} tensors the head has not "
                              f"(e.g. head.{unexpected[0]}): it has more layers than head.layers")
    shaped = [f"head.{k} {list(v.shape)} (pi0) vs {list(expected[k].shape)} (head)"
              for k, v in out.items() if tuple(v.shape) != tuple(expected[k].shape)]
    if shaped:
        raise FoundationError(f"{source}: pi0 expert shapes do not fit the head ({len(shaped)}): "
                              f"{'; '.join(shaped[:3])}")
    layer_weights = re.compile(r"layers\.\d+\.(q|k|v|o|gate_up|down|attn_norm|mlp_norm)\.weight$|final_norm\.weight$")
    needed = {k for k in expected if layer_weights.match(k)}
    missing = sorted(needed - set(out))
    if missing:
        raise FoundationError(f"{source}: {len(missing)} head tensors have no pi0 counterpart, e.g. head.{missing[0]} "
                              f"(the expert has fewer layers than head.layers?)")
    for k, v in out.items():
        if not torch.isfinite(v).all():
            raise FoundationError(f"{source}: pi0 tensor for head.{k} contains NaN or inf")
    fresh = sorted(k for k in expected if k not in out)
    skipped = sorted(k for k in raw if k.split(".")[0] in NOT_MAPPED)
    used = len(out) + len(gate_up)                                       # a gate/up pair: 2 keys, 1 tensor
    report = {"mapped": len(out), "fresh": len(fresh), "pi0_not_used": len(raw) - used,
              "pi0_time_mlp_dropped": skipped}
    return {k: v.to(expected[k].dtype) for k, v in out.items()}, report


def load_pi0_head(path: str | Path, head: torch.nn.Module) -> dict:
    """Load pi0's expert into `head` (in place); returns the report."""
    state, report = pi0_head_state(read_tensor_file(path), head, str(path))
    head.load_state_dict(state, strict=False)
    return report
