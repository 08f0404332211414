"""Model configuration: one dataclass per network component, loaded from `models/<preset>.yaml`.

Presets:
  real   - bimanual YAM robot: 3 cameras 224x168 stacked to 672x168, 14-dim absolute joint
           targets, chunk 50 at 30 Hz; Cosmos-Predict2.5-2B DiT + Gemma-300M-expert head.
  libero - LIBERO: 2 cameras 224x224 stacked to 448x224, 7-dim end-effector deltas, chunk 17.
  tiny   - LIBERO's token geometry (448x224, 17 frames, 392 DiT / 98 head tokens per latent
           frame) with small widths and depths, so a full replan runs on a laptop CPU.
"""
from __future__ import annotations

import difflib
import math
from dataclasses import dataclass, field
from pathlib import Path

from vam_stack.config import ConfigError, check, from_dict, load_yaml
from vam_stack.paths import models_dir, preset_file
from vam_stack.libero import libero_rate
from vam_stack.robot import load_robot, robot_rate


@dataclass(frozen=True)
class TokenizerConfig:
    type: str = "wan"                 # "wan": diffusers AutoencoderKLWan (Cosmos/Wan2.1 VAE); "causal_patch": small own encoder (tiny)
    latent_channels: int = 16         # VAE latent channels (Cosmos tokenizer: 16)
    temporal_factor: int = 4          # causal temporal compression: frame 0 alone, then groups of 4
    spatial_factor: int = 8           # spatial compression per side
    base_dim: int = 96                # Wan VAE base width (the official VAE uses 96)
    hidden_dim: int = 64              # causal_patch: width of the hidden layer

    def __post_init__(self):
        check(self.type in ("wan", "causal_patch"), f"tokenizer.type must be 'wan' or 'causal_patch', got {self.type!r}")
        check(self.temporal_factor == 4, f"tokenizer.temporal_factor must be 4 (Wan/Cosmos VAE), got {self.temporal_factor!r}")
        check(self.spatial_factor == 8, f"tokenizer.spatial_factor must be 8, got {self.spatial_factor!r}")
        for name in ("latent_channels", "base_dim", "hidden_dim"):
            check(getattr(self, name) > 0, f"tokenizer.{name} must be > 0, got {getattr(self, name)!r}")


@dataclass(frozen=True)
class DiTConfig:
    layers: int = 28                  # transformer blocks (Cosmos-Predict2.5-2B: 28)
    heads: int = 16                   # self-attention heads
    head_dim: int = 128               # per-head width; d = heads * head_dim = 2048
    mlp_ratio: float = 4.0            # MLP 2048 -> 8192 -> 2048
    text_dim: int = 1024              # cross-attention text width after the shared projection
    text_in_dim: int = 100352         # raw text embedding width: all encoder layers concatenated (28 x 3584)
    text_tokens: int = 512            # padded prompt length
    adaln_lora_dim: int = 256         # AdaLN-LoRA bottleneck of the shift/scale/gate projection
    patch: tuple[int, int, int] = (1, 2, 2)   # (t, h, w) patch size
    rope_scale: tuple[float, float, float] = (1.0, 3.0, 3.0)  # RoPE NTK scaling (t, h, w)
    extra_pos_embed: bool = False     # learnable absolute position embedding on top of RoPE
    concat_padding_mask: bool = True  # append a padding-mask channel (the real checkpoints do)
    feature_block: int = 20           # k: features are the output of block k (1-indexed)
    timestep_scale: float = 1.0       # sigma_v -> timestep fed to the time embedding
    anchor_time_sigma: float | None = 1e-4  # near-zero sigma for the anchor frame's time embedding; null = off

    @property
    def width(self) -> int:
        return self.heads * self.head_dim

    def __post_init__(self):
        for name in ("layers", "heads", "head_dim", "text_dim", "text_in_dim", "text_tokens", "adaln_lora_dim"):
            check(getattr(self, name) > 0, f"dit.{name} must be > 0, got {getattr(self, name)!r}")
        check(self.head_dim % 6 == 0 or self.head_dim >= 6, f"dit.head_dim too small for 3D RoPE: {self.head_dim!r}")
        check(self.patch[0] == 1, f"dit.patch must have temporal size 1 (per-frame timesteps), got {self.patch!r}")
        check(1 <= self.feature_block <= self.layers,
              f"dit.feature_block must be in [1, {self.layers}], got {self.feature_block!r}")
        check(self.mlp_ratio > 0, f"dit.mlp_ratio must be > 0, got {self.mlp_ratio!r}")
        if self.anchor_time_sigma is not None:
            check(0.0 <= self.anchor_time_sigma < 0.1,
                  f"dit.anchor_time_sigma must be near zero (or null), got {self.anchor_time_sigma!r}")


@dataclass(frozen=True)
class SolverConfig:
    steps: int = 6                    # FlowUniPC steps of the video rollout
    shift: float = 5.0                # schedule shift: concentrates steps near sigma_v = 1
    num_train_timesteps: int = 1000   # sets the schedule floor, as in the diffusers/Cosmos flow schedulers
    order: int = 2                    # UniPC multistep order
    feature_index: int = 2            # grid index whose features are exposed (2 -> sigma_v = 0.883)
    latent_frames: int = 5            # T: latent frames rolled out and given to the head
    plan_latent_frames: int = 24      # T': plan-guidance rollout horizon (truncated to T for the head)

    def __post_init__(self):
        check(self.steps >= 1, f"solver.steps must be >= 1, got {self.steps!r}")
        check(self.shift > 0, f"solver.shift must be > 0, got {self.shift!r}")
        check(0 <= self.feature_index < self.steps,
              f"solver.feature_index must be in [0, {self.steps - 1}], got {self.feature_index!r}")
        check(self.order in (1, 2, 3), f"solver.order must be 1, 2 or 3, got {self.order!r}")
        check(self.latent_frames >= 2, f"solver.latent_frames must be >= 2 (anchor + future), got {self.latent_frames!r}")
        check(self.plan_latent_frames >= self.latent_frames,
              f"solver.plan_latent_frames must be >= latent_frames ({self.latent_frames}), got {self.plan_latent_frames!r}")


@dataclass(frozen=True)
class HeadConfig:
    layers: int = 18                  # Gemma-300M-expert depth
    width: int = 1024                 # hidden size
    heads: int = 8                    # query heads
    kv_heads: int = 1                 # multi-query: one shared key/value head
    head_dim: int = 256               # per-head width
    mlp_dim: int = 4096               # GeGLU inner width
    internal_dim: int = 32            # state and action vectors zero-padded to this width
    video_group: tuple[int, int] = (2, 2)  # DiT tokens grouped (h, w) into one head token (8192 -> 1024)
    fourier_dim: int = 256            # Fourier features of sigma_v / sigma_a
    tr_layer: int = 15                # layer whose attention defines the Temporal Ratio (1-indexed, like the paper's k)
    prefix_time_conditioned: bool = False  # prefix norms conditioned on sigma_a (then no prefix KV cache)
    rope_theta: float = 10000.0       # 1D RoPE base over the token sequence

    def __post_init__(self):
        for name in ("layers", "width", "heads", "kv_heads", "head_dim", "mlp_dim", "internal_dim", "fourier_dim"):
            check(getattr(self, name) > 0, f"head.{name} must be > 0, got {getattr(self, name)!r}")
        check(self.heads % self.kv_heads == 0, f"head.heads ({self.heads}) must be a multiple of kv_heads, got {self.kv_heads!r}")
        check(1 <= self.tr_layer <= self.layers, f"head.tr_layer must be in [1, {self.layers}], got {self.tr_layer!r}")
        check(all(g >= 1 for g in self.video_group), f"head.video_group must be >= 1, got {self.video_group!r}")
        check(self.fourier_dim % 2 == 0, f"head.fourier_dim must be even, got {self.fourier_dim!r}")
        check(self.head_dim % 2 == 0, f"head.head_dim must be even (RoPE), got {self.head_dim!r}")


@dataclass(frozen=True)
class RobotConfig:
    cameras: tuple[str, ...] = ("top", "left_wrist", "right_wrist")  # views stacked left to right
    camera_width: int = 224           # per view
    camera_height: int = 168
    frames: int = 17                  # video frames per replan
    frame_skip: int = 3               # source frames between policy frames
    camera_hz: float | None = None    # source frame rate [Hz]; None: absolute_joint 30.0 (the YAM's cameras),
    #                                   eef_delta the control rate (LIBERO renders one frame per controller tick)
    action_dim: int = 14              # 2 x (6 joints + gripper)
    proprio_dim: int = 14             # absolute joint angles
    action_type: str = "absolute_joint"  # or "eef_delta" (LIBERO)
    chunk: int | None = None          # A_H actions per replan; absolute_joint: None = the robot's (config/yam_robot.yaml
    #                                   chunk, a model may state its own); eef_delta: required (LIBERO presets: 17)
    execute: int | None = None        # actions executed before the next chunk takes over; None as chunk (the robot's
    #                                   execute; LIBERO presets: 10)
    control_hz: float | None = None   # executor rate [Hz]; None = the world's: absolute_joint (the YAM) the robot's
    #                                   (config/yam_robot.yaml rate_hz), eef_delta LIBERO's controller rate
    #                                   (vam_stack.libero.CONTROL_HZ); each its one source, a stated one must agree

    @property
    def image_width(self) -> int:
        return self.camera_width * len(self.cameras)

    @property
    def image_height(self) -> int:
        return self.camera_height

    def __post_init__(self):
        check(len(self.cameras) >= 1, f"robot.cameras must name at least one view, got {self.cameras!r}")
        check(self.camera_width % 8 == 0 and self.camera_height % 8 == 0,
              f"camera size must be a multiple of 8, got {self.camera_width}x{self.camera_height}")
        check(self.frames >= 5 and (self.frames - 1) % 4 == 0,
              f"robot.frames must be 4n+1 (causal 4x tokenizer), got {self.frames!r}")
        check(self.action_type in ("absolute_joint", "eef_delta"),
              f"robot.action_type must be 'absolute_joint' or 'eef_delta', got {self.action_type!r}")
        joint = self.action_type == "absolute_joint"
        for name in ("chunk", "execute"):
            if getattr(self, name) is None:
                check(joint, f"robot.{name} must be given for eef_delta actions (a LIBERO preset's: chunk 17, execute 10)")
                object.__setattr__(self, name, getattr(load_robot(), name))
        check(1 <= self.execute <= self.chunk, f"robot.execute must be in [1, chunk={self.chunk}], got {self.execute!r}")
        for name in ("frame_skip", "action_dim", "proprio_dim", "chunk"):
            check(getattr(self, name) >= 1, f"robot.{name} must be >= 1, got {getattr(self, name)!r}")
        check(self.control_hz is None or self.control_hz > 0, f"robot.control_hz must be > 0, got {self.control_hz!r}")
        rate = robot_rate if joint else libero_rate
        object.__setattr__(self, "control_hz", rate("robot.", self.control_hz, name="control_hz"))
        if self.camera_hz is None:   # the YAM's cameras run at 30 fps (config/cameras.yaml source_fps)
            object.__setattr__(self, "camera_hz", 30.0 if joint else self.control_hz)
        check(self.control_hz > 0 and self.camera_hz > 0, f"rates must be > 0, got {self.control_hz!r}, {self.camera_hz!r}")


@dataclass(frozen=True)
class ModelConfig:
    name: str = "custom"              # preset name
    robot: RobotConfig = field(default_factory=RobotConfig)
    tokenizer: TokenizerConfig = field(default_factory=TokenizerConfig)
    dit: DiTConfig = field(default_factory=DiTConfig)
    solver: SolverConfig = field(default_factory=SolverConfig)
    head: HeadConfig = field(default_factory=HeadConfig)

    # a model file states every section: a missing `robot:` must not silently become the real geometry
    YAML_REQUIRED = ("name", "robot", "tokenizer", "dit", "solver", "head")

    def __post_init__(self):
        check(self.robot.action_dim <= self.head.internal_dim,
              f"robot.action_dim {self.robot.action_dim} exceeds head.internal_dim {self.head.internal_dim}")
        check(self.robot.proprio_dim <= self.head.internal_dim,
              f"robot.proprio_dim {self.robot.proprio_dim} exceeds head.internal_dim {self.head.internal_dim}")
        t = (self.robot.frames - 1) // 4 + 1
        check(t == self.solver.latent_frames,
              f"{self.robot.frames} frames give {t} latent frames but solver.latent_frames is {self.solver.latent_frames}")

    # ---- token geometry -------------------------------------------------------------------
    @property
    def latent_hw(self) -> tuple[int, int]:
        """Latent grid (h, w) of one frame."""
        return self.robot.image_height // 8, self.robot.image_width // 8

    @property
    def dit_grid(self) -> tuple[int, int]:
        """DiT token grid per latent frame, after padding the latent to a multiple of the patch."""
        h, w = self.latent_hw
        return math.ceil(h / self.dit.patch[1]), math.ceil(w / self.dit.patch[2])

    @property
    def dit_tokens_per_frame(self) -> int:
        gh, gw = self.dit_grid
        return gh * gw

    @property
    def head_grid(self) -> tuple[int, int]:
        """Head video-token grid per latent frame (DiT grid grouped by head.video_group, padded)."""
        gh, gw = self.dit_grid
        return math.ceil(gh / self.head.video_group[0]), math.ceil(gw / self.head.video_group[1])

    @property
    def head_tokens_per_frame(self) -> int:
        hh, hw = self.head_grid
        return hh * hw

    @property
    def head_video_tokens(self) -> int:
        return self.head_tokens_per_frame * self.solver.latent_frames


PRESETS = ("real", "libero", "tiny", "tiny_real", "libero64")


def known_presets() -> tuple[str, ...]:
    """Every preset name `load_config` accepts: the models/<name>.yaml files, PRESETS' order first
    (read from the directory, so the unknown-preset message never misses a shipped preset)."""
    try:
        shipped = {p.stem for p in models_dir().glob("*.yaml")}
    except FileNotFoundError:          # no share directory: only the built-in names are known
        return PRESETS
    return tuple(n for n in PRESETS if n in shipped) + tuple(sorted(shipped - set(PRESETS)))


def load_config(preset_or_path: str | Path) -> ModelConfig:
    """Load a preset by name (`models/<name>.yaml`) or a YAML file path."""
    path = preset_file(str(preset_or_path))
    if Path(preset_or_path).suffix not in (".yaml", ".yml"):
        if not path.is_file():
            known = known_presets()
            close = difflib.get_close_matches(str(preset_or_path), known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ConfigError(f"unknown preset {str(preset_or_path)!r}{hint}; known presets: {', '.join(known)} "
                              f"(models/<name>.yaml), or the path of a model YAML file")
    return from_dict(ModelConfig, load_yaml(path), str(path))
