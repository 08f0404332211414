"""The trainer: model set-up, stages, optimiser steps, EMA, checkpoints and export
(`vam_train.train` documents the modes, budgets and resume; recovery rounds: recovery.py;
data parallel: data_parallel.py, distributed.py)."""
from __future__ import annotations

import contextlib
import copy
import json
import math
import os
import pickle
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

from vam_stack.config import ConfigError, to_dict
from vam_stack.progress import progress_bar

from vam_model.networks.checkpoint import load_checkpoint, save_checkpoint
from vam_model.networks.config import load_config
from vam_model.networks.model import VideoActionModel
from vam_model.networks.text_encoder import TextEncoder, load_text_embeddings
from vam_data.dataset import Dataset
from .batches import CALIBRATION_STEP, Batches, check_dataset_fits, load_train_data
from .data_parallel import DataParallel
from .lora import apply_lora, merge_lora
from .losses import action_loss, encode_clip, frozen_features, joint_losses, text_path_features
from .recovery import RecoveryRounds, Rollouts
from .train_config import TrainConfig


@torch.no_grad()
def calibrate_tokenizer(model: VideoActionModel, frames: torch.Tensor) -> float:
    """Scale the causal-patch tokenizer's output so its latents have unit std on real frames."""
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




def describe_result(result: dict) -> str:
    """A finished run's result in words (it was printed as a JSON dict with 17-digit floats)."""
    losses = ", ".join(f"{k} {v:.4f}" for k, v in result.items()
                       if k not in ("step", "elapsed_min", "ranks", "backend", "interrupted", "kept")
                       and isinstance(v, float))
    ranks = f" on {result['ranks']} ranks ({result['backend']})" if result.get("ranks") else ""
    return (f"trained to step {result['step']} in {result['elapsed_min']:.1f} min{ranks}"
            + (f"; last step's losses: {losses}" if losses else ""))


class Trainer(RecoveryRounds, DataParallel):
    def __init__(self, cfg: TrainConfig, out: str | Path, data: Dataset | None = None, model_cfg=None,
                 rank: int = 0, device: torch.device | None = None, rollouts: Rollouts | None = None):
        """`data` and `model_cfg` override the config's dataset and preset (tests use small ones).
        `rollouts` runs the recovery rounds' rollouts in a simulator (vam_sim/collect_recovery.py; needed
        when cfg.recovery.at is set).
        With cfg.ranks > 1 this is process `rank` of a torch.distributed group that the caller has
        initialised (`distributed.run_rank`); rank 0 alone writes the log, checkpoints and exports. `device`
        overrides cfg.device (a torchrun rank's own GPU)."""
        self.cfg, self.out = cfg, Path(out)
        self.rank, self.ranks = rank, cfg.ranks
        if cfg.recovery.at and rollouts is None:
            raise ConfigError(f"train.recovery.at {cfg.recovery.at!r}: recovery rounds roll the policy out in a "
                              f"simulator; give the Trainer rollouts=vam_sim.collect_recovery (vam-stack train does)")
        self.rollouts = rollouts
        if self.ranks > 1:
            if not dist.is_initialized() or dist.get_world_size() != self.ranks or dist.get_rank() != rank:
                raise RuntimeError(f"train.ranks={self.ranks}: Trainer rank {rank} needs an initialised process "
                                   f"group of that size (use torchrun or fit_data_parallel)")
        self.device = device if device is not None else resolve_device(cfg.device)
        self.out.mkdir(parents=True, exist_ok=True)
        torch.set_num_threads(cfg.threads)
        torch.manual_seed(cfg.seed)
        if self.device.type == "cuda":
            torch.backends.cuda.matmul.allow_tf32 = True
            torch.backends.cudnn.allow_tf32 = True
        self.mcfg = model_cfg or load_config(cfg.preset)
        if cfg.feature_block and cfg.feature_block != self.mcfg.dit.feature_block:   # validated by DiTConfig
            self.mcfg = replace(self.mcfg, dit=replace(self.mcfg.dit, feature_block=cfg.feature_block))
        if cfg.loss.prefix_max >= self.mcfg.robot.chunk:
            raise ConfigError(f"loss.prefix_max {cfg.loss.prefix_max!r} must be below the chunk of "
                              f"{self.mcfg.robot.chunk} actions (preset {self.mcfg.name!r}): a draw needs a free action")
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
            head0 = copy.deepcopy(self.model.head.state_dict()) if cfg.head_from_init else None
            load_checkpoint(cfg.init_from, self.model)
            if head0 is not None:                                        # a new head on the pretrained DiT
                self.model.head.load_state_dict(head0)
        self.model.to(self.device)
        if not cfg.init_from:
            frames = self.batches.make(CALIBRATION_STEP, whole=True)["frames"].to(self.device)
            self.calibration = calibrate_tokenizer(self.model, frames)
        if not cfg.train_tokenizer:
            self.model.tokenizer.requires_grad_(False)
        if cfg.lora_rank:
            apply_lora(self.model, cfg)
        self.model.dit.activation_checkpointing = cfg.activation_checkpointing
        if self.ranks > 1:                                               # every rank starts from rank 0's weights
            for t in self.model.state_dict().values():
                dist.broadcast(t, 0)
        # EMA shadows of the weights that train (at `real` size a frozen 2 B DiT is not copied): name -> tensor
        self.ema = ({n: p.detach().clone() for n, p in self.model.named_parameters() if p.requires_grad}
                    if cfg.ema > 0 else None)
        self.stage = None
        self._set_stage(self._stage_of(0))
        self.stop = None            # a stopping.StopRequest: SIGINT/SIGTERM end the run at a step boundary
        self.interrupted: str | None = None

    def _make_batches(self) -> Batches:
        r = self.mcfg.robot
        batches = Batches(self.data, self.cfg, self.texts, r.chunk, r.frames, (r.image_height, r.image_width),
                          len(r.cameras), r.frame_skip)
        batches.pin = self.device.type == "cuda"
        batches.shard = (self.rank, self.ranks)
        return batches

    def _cache_frames(self) -> None:
        todo = sum(len(e) for e in self.data.episodes if e.decoded is None)
        with progress_bar(total=todo, unit="frame", desc="decode frames", file=sys.stdout, leave=False,
                  disable=todo < 1000) as bar:
            r = self.mcfg.robot                                          # held at the model's view size
            held = self.data.cache_frames(max(self.cfg.threads, self.cfg.loader_threads), progress=bar.update,
                                          fit=(len(r.cameras), r.camera_width, r.camera_height))
        print(f"frames decoded into memory: {held / 2**30:.2f} GiB"
              + (f" (rank {self.rank} of {self.ranks})" if self.ranks > 1 else ""), flush=True)

    def _embed_texts(self) -> dict[str, torch.Tensor]:
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
                 "ema": dict(self.ema) if self.ema is not None else None,
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
            self._load_ema(state["ema"])
        self.step, self.elapsed, self.calibration = state["step"], state["elapsed"], state["calibration"]
        for r in range(state.get("recovery_rounds", 0)):                 # the rounds this run already collected
            self._merge_recovery(r)
        self._set_stage(state["stage"])
        try:
            self.opt.load_state_dict(state["opt"])
        except ValueError as e:                 # the trainable set changed (e.g. head_text_path switched on)
            print(f"optimiser state not restored ({e}); continuing with fresh moments", flush=True)

    def _load_ema(self, saved: dict) -> None:
        """The shadows from a train_state.pt; a file with every weight (written before shadows were kept
        for trained weights only) adds a shadow only where it differs from the live weight."""
        live = dict(self.model.named_parameters())
        unknown = sorted(set(self.ema) - set(saved))
        if unknown:
            raise ValueError(f"--resume: the saved EMA lacks {unknown[:3]}{'...' if len(unknown) > 3 else ''}")
        for name, value in saved.items():
            if name in self.ema:
                self.ema[name].copy_(value)
            elif name in live and not torch.equal(value, live[name].detach()):
                self.ema[name] = value.clone()

    @contextlib.contextmanager
    def _ema_weights(self):
        """The model with the EMA shadows in place of the trained weights, put back on exit."""
        if self.ema is None:
            yield self.model
            return
        live = dict(self.model.named_parameters())
        kept = {n: live[n].detach().clone() for n in self.ema}
        try:
            with torch.no_grad():
                for n, v in self.ema.items():
                    live[n].copy_(v)
            yield self.model
        finally:
            with torch.no_grad():
                for n, v in kept.items():
                    live[n].copy_(v)

    def export(self, path: Path) -> Path:
        with self._ema_weights() as model:
            return self._export(model, path)

    def _export(self, model, path: Path) -> Path:
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
                              "head_from_init": self.cfg.head_from_init,
                              "feature_block": self.mcfg.dit.feature_block,
                              "rtc_prefix_max": self.cfg.loss.prefix_max,   # > 0: the head takes a committed prefix
                              "dit_lr_scale": self.cfg.dit_lr_scale,
                              "mock_conventions": self.data.info.get("mock_conventions"),
                              "libero_render": self.data.info.get("libero_render"),   # real LIBERO: render as trained
                              "mock": self.data.info.get("mock")}}
        return save_checkpoint(path, model, self.mcfg, extra)

    # ---- recovery rounds (recovery.py) --------------------------------------------------------
    # ---- steps ------------------------------------------------------------------------------
    def _update_ema(self) -> None:
        if self.ema is None:
            return
        d = min(self.cfg.ema, (1 + self.step) / (10 + self.step))
        live = dict(self.model.named_parameters())
        with torch.no_grad():
            for n, p in live.items():       # a weight that starts training later gets its shadow from now on
                if p.requires_grad and n not in self.ema:
                    self.ema[n] = p.detach().clone()
            for n, e in self.ema.items():
                e.lerp_(live[n], 1 - d)

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
                                       cfg.loss.action_samples, cfg.loss.beta_a, gen,
                                       (cfg.loss.prefix_prob, cfg.loss.prefix_max), cfg.loss.v0_dropout)
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

    def _stop_agreed(self) -> bool:
        """Whether the run stops here: this rank's `stop` holds a signal, or (data parallel) any rank's
        does (one all-reduce, so every rank leaves the loop at the same step)."""
        flag = self.stop is not None and self.stop.requested is not None
        if self.ranks > 1:
            t = torch.tensor([1.0 if flag else 0.0], device=self.device)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            flag = bool(t[0] > 0)
        if flag and self.interrupted is None:
            self.interrupted = (self.stop.requested if self.stop is not None and self.stop.requested else
                                "a signal to another rank")
        return flag

    def fit(self, progress: bool = True, stop_after: int | None = None) -> dict:
        """Train to the end (or to step `stop_after`, which simulates an interruption); returns the last
        losses. A stop request (`self.stop`: SIGINT/SIGTERM) ends it after the step in progress with
        a checkpoint at that step, or none when no step ran: the result then says `interrupted` and
        `kept` (the checkpoint's step, or None)."""
        cfg = self.cfg
        start_step = self.step
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
                if not finished and self._stop_agreed():
                    break
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
            if self.interrupted is not None and self.step > start_step:     # a checkpoint of this step follows
                log.write(json.dumps({"step": self.step, "interrupted": self.interrupted,
                                      "elapsed_s": round(self.elapsed, 1)}) + "\n")
        finally:
            bar.close()
            log.close()
        result = {"step": self.step, "elapsed_min": round(self.elapsed / 60, 2), **self._last}
        if self.interrupted is not None and self.step == start_step:
            kept = self.step if self.state_path.is_file() else None     # no step ran: nothing new to keep
            return result | {"interrupted": self.interrupted, "kept": kept}
        self.save_state()
        return result | ({"interrupted": self.interrupted, "kept": self.step} if self.interrupted else {})

    def _fit_until_round(self, log, bar, budget: float, stop_after: int | None, t_last: float) -> bool:
        """Train from self.step; True when the run ends, False when a recovery round is due first."""
        cfg = self.cfg
        t_ready = time.perf_counter()
        for step, batch in self.batches.iterate(self.step, cfg.total_steps):
            data_s = time.perf_counter() - t_ready                         # waiting for the loader (0 = it keeps up)
            if self._stop_agreed():                                        # SIGINT/SIGTERM: stop at this boundary
                return True
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


