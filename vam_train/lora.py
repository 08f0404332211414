"""LoRA adapters (peft) on the DiT's attention and MLP projections, and merging them back."""
from __future__ import annotations

import copy

from vam_model.networks.model import VideoActionModel

from .train_config import TrainConfig


def apply_lora(model: VideoActionModel, cfg: TrainConfig) -> None:
    """Wrap the DiT's attention/MLP projections with LoRA adapters; freeze the rest of the DiT."""
    from peft import LoraConfig, inject_adapter_in_model   # heavy (~2 s to import, transformers with it): LoRA runs only

    lcfg = LoraConfig(r=cfg.lora_rank, lora_alpha=cfg.lora_alpha or cfg.lora_rank,
                      target_modules=list(cfg.lora_targets), lora_dropout=0.0)
    for p in model.dit.parameters():
        p.requires_grad_(False)
    for p in model.tokenizer.parameters():
        p.requires_grad_(False)
    inject_adapter_in_model(lcfg, model.dit.model)         # adapter weights are trainable


def merge_lora(model: VideoActionModel) -> VideoActionModel:
    """A copy of `model` with LoRA adapters merged into plain Linear layers (preset state-dict layout)."""
    from peft.tuners.lora import LoraLayer                 # heavy: only a LoRA run merges

    out = copy.deepcopy(model)
    for name, mod in list(out.dit.model.named_modules()):
        if isinstance(mod, LoraLayer):
            mod.merge()
            parent = out.dit.model.get_submodule(name.rpartition(".")[0]) if "." in name else out.dit.model
            setattr(parent, name.rpartition(".")[2], mod.get_base_layer())
    return out
