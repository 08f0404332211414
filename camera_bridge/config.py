"""Typed configuration of the camera bridge: one `CameraConfig` per view, one `BridgeConfig`.

The defaults are the real-robot numbers of the paper (three 30 Hz cameras, views of 224x168
stacked to 672x168, 17 frames with frame-skip 3 from a 51-frame ring). The LIBERO geometry
(two 224x224 views -> 448x224) is `config/cameras_libero.yaml`. Load with
`load_bridge_config(path)`; every error names the field and quotes the bad value.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from vam_stack.config import ConfigError, check, from_yaml
from vam_stack.paths import config_dir

SOURCE_KINDS = ("realsense", "opencv", "synthetic", "push")
ENCODINGS = ("bgr8", "rgb8")  # 8-bit, three channel; anything else is rejected per frame
INTERPOLATIONS = ("pyramid", "area", "linear", "cubic", "nearest")
# the frame ring is allocated whole at start-up (uint8 [buffer_frames, H, W * cameras, 3]): a ring
# larger than this is a typo (100000000 frames of 672x168 would be 34 TB), refused at load time
# instead of a MemoryError when the bridge is built. 1 GiB holds ~3200 stacked 672x168 frames (107 s at 30 Hz).
MAX_BUFFER_BYTES = 1 << 30


@dataclass(frozen=True)
class CameraConfig:
    """One camera (one view of the stacked image)."""

    name: str  # view name used in every report, e.g. "top", "left_wrist"
    kind: str = "synthetic"  # one of SOURCE_KINDS: driver behind the view
    serial: str = ""  # RealSense serial number (kind=realsense); must match the device label
    device: str = ""  # OpenCV: index ("0"), path (/dev/video2) or video file; RealSense: recording to play
    record_to: str = ""  # RealSense: record the stream to this SDK file (.db3 in SDK 2.59, .bag before)
    width: int = 640  # px; native width the source must deliver (checked on every frame)
    height: int = 480  # px; native height (640x480 is 4:3 like 224x168, so no distortion)
    fps: float = 30.0  # Hz; requested stream rate (RealSense colour runs at 30 Hz)
    encoding: str = "bgr8"  # pixel layout the source delivers: "bgr8" (OpenCV, RealSense) or "rgb8"
    max_age_ms: float = 100.0  # ms; a frame older than this is stale (3 periods at 30 Hz)
    reconnect_after_ms: float = 1000.0  # ms without a new frame before the source is reopened
    reconnect_interval_s: float = 1.0  # s between reopen attempts of a lost camera
    realtime: bool = True  # file replay at its recorded rate (false: OpenCV one frame per read, SDK as fast as read)
    loop: bool = False  # file replay: start again at the end instead of reporting end-of-file
    stamp_offset_ms: float = 0.0  # synthetic: timestamp offset, to test the synchroniser

    def __post_init__(self) -> None:
        check(bool(self.name) and self.name.isidentifier(),
              f"camera name must be an identifier like 'top', got {self.name!r}")
        check(self.kind in SOURCE_KINDS, f"camera {self.name!r}: kind must be one of {SOURCE_KINDS}, got {self.kind!r}")
        if self.kind == "realsense":
            check(self.serial.strip() != "", f"camera {self.name!r}: kind 'realsense' needs a serial, got {self.serial!r}")
        check(not (self.kind == "realsense" and self.device and not self.realtime),
              f"camera {self.name!r}: RealSense recordings play at their recorded rate; realtime must be true, got {self.realtime!r}")
        check(self.record_to == "" or self.kind == "realsense",
              f"camera {self.name!r}: record_to works with kind 'realsense' only, got kind {self.kind!r}")
        if self.kind == "opencv":
            check(self.device.strip() != "", f"camera {self.name!r}: kind 'opencv' needs a device (index, path or file), got {self.device!r}")
        check(16 <= self.width <= 8192, f"camera {self.name!r}: width must be in [16, 8192] px, got {self.width!r}")
        check(16 <= self.height <= 8192, f"camera {self.name!r}: height must be in [16, 8192] px, got {self.height!r}")
        check(0.5 <= self.fps <= 240.0, f"camera {self.name!r}: fps must be in [0.5, 240], got {self.fps!r}")
        check(self.encoding in ENCODINGS, f"camera {self.name!r}: encoding must be one of {ENCODINGS}, got {self.encoding!r}")
        check(self.max_age_ms > 0, f"camera {self.name!r}: max_age_ms must be > 0, got {self.max_age_ms!r}")
        check(self.reconnect_after_ms > self.max_age_ms,
              f"camera {self.name!r}: reconnect_after_ms ({self.reconnect_after_ms!r}) must exceed max_age_ms ({self.max_age_ms!r})")
        check(self.reconnect_interval_s > 0, f"camera {self.name!r}: reconnect_interval_s must be > 0, got {self.reconnect_interval_s!r}")
        check(abs(self.stamp_offset_ms) < 10_000, f"camera {self.name!r}: stamp_offset_ms must be within 10 s, got {self.stamp_offset_ms!r}")

    @property
    def is_file(self) -> bool:
        """True when `device` names a recording or video file (replay) rather than a live camera."""
        if self.kind == "realsense":
            return self.device != ""
        live = self.device.isdigit() or self.device.startswith("/dev/") or "://" in self.device  # index, node, URL
        return self.kind == "opencv" and not live


def _default_cameras() -> tuple[CameraConfig, ...]:
    return (CameraConfig("top"), CameraConfig("left_wrist"), CameraConfig("right_wrist"))


@dataclass(frozen=True)
class BridgeConfig:
    """Synchronisation, geometry and window of the stacked multi-view clip."""

    cameras: tuple[CameraConfig, ...] = field(default_factory=_default_cameras)  # stack order, left to right
    view_width: int = 224  # px; each view after resizing (paper: 224x168 real, 224x224 LIBERO)
    view_height: int = 168  # px
    interpolation: str = "pyramid"  # resize filter: pyrDown halvings + bilinear, anti-aliased (preprocess.py)
    sync_tolerance_ms: float = 10.0  # ms; views further apart than this are not one instant (1/3 period)
    sync_history: int = 4  # frames kept per camera to find the best match (4 = 133 ms at 30 Hz)
    source_fps: float = 30.0  # Hz; rate of the stacked stream (the cameras' common rate)
    window_frames: int = 17  # frames of a window() clip for recordings and benches (17 -> T=5 latents); the policy takes the newest frame only
    frame_skip: int = 3  # a window() clip takes every 3rd source frame: 30 Hz -> 10 Hz clip
    buffer_frames: int = 51  # ring length in source frames (17 x 3 = 1.7 s at 30 Hz)
    max_window_age_ms: float = 100.0  # ms; newest stacked frame older than this -> window not ready
    max_gap_ms: float = 50.0  # ms; a gap between consecutive stacked frames above this (1.5 periods) breaks the clip
    tick_hz: float = 60.0  # Hz; bridge loop rate (2x the cameras so no frame waits a whole period)

    def __post_init__(self) -> None:
        check(len(self.cameras) >= 1, f"cameras must list at least one camera, got {self.cameras!r}")
        names = [c.name for c in self.cameras]
        check(len(set(names)) == len(names), f"camera names must be unique, got {names!r}")
        check(8 <= self.view_width <= 4096, f"view_width must be in [8, 4096] px, got {self.view_width!r}")
        check(8 <= self.view_height <= 4096, f"view_height must be in [8, 4096] px, got {self.view_height!r}")
        check(self.interpolation in INTERPOLATIONS, f"interpolation must be one of {INTERPOLATIONS}, got {self.interpolation!r}")
        check(self.sync_tolerance_ms >= 0, f"sync_tolerance_ms must be >= 0, got {self.sync_tolerance_ms!r}")
        check(1 <= self.sync_history <= 64, f"sync_history must be in [1, 64], got {self.sync_history!r}")
        check(0.5 <= self.source_fps <= 240, f"source_fps must be in [0.5, 240] Hz, got {self.source_fps!r}")
        check(self.window_frames >= 1 and (self.window_frames - 1) % 4 == 0,
              f"window_frames must be 1 + 4k (the causal tokenizer keeps the first frame and compresses "
              f"each later group of 4 into one latent: 17 -> 5 latents), got {self.window_frames!r}")
        check(self.frame_skip >= 1, f"frame_skip must be >= 1, got {self.frame_skip!r}")
        check(self.buffer_frames >= self.span_frames,
              f"buffer_frames ({self.buffer_frames!r}) must hold the window span "
              f"(window_frames-1)*frame_skip+1 = {self.span_frames}")
        h, w, c = self.stacked_shape
        ring_bytes = self.buffer_frames * h * w * c
        check(ring_bytes <= MAX_BUFFER_BYTES,
              f"buffer_frames {self.buffer_frames!r} would allocate {ring_bytes / 2**30:.3g} GiB for {w}x{h} stacked "
              f"frames, more than {MAX_BUFFER_BYTES / 2**30:.0f} GiB: at most {MAX_BUFFER_BYTES // (h * w * c)} "
              f"frames of this size (the window spans {self.span_frames})")
        check(self.max_window_age_ms > 0, f"max_window_age_ms must be > 0, got {self.max_window_age_ms!r}")
        check(self.max_gap_ms > 1000.0 / self.source_fps,
              f"max_gap_ms ({self.max_gap_ms!r}) must exceed one source period ({1000.0 / self.source_fps:.1f} ms)")
        check(self.tick_hz >= self.source_fps, f"tick_hz ({self.tick_hz!r}) must be >= source_fps ({self.source_fps!r})")
        for cam in self.cameras:
            check(abs(cam.fps - self.source_fps) < 1e-6,
                  f"camera {cam.name!r}: fps {cam.fps!r} differs from source_fps {self.source_fps!r}; "
                  "frame-skip assumes one common rate")

    @property
    def span_frames(self) -> int:
        """Source frames covered by one window: the newest plus (n-1) skips back."""
        return (self.window_frames - 1) * self.frame_skip + 1

    @property
    def stacked_shape(self) -> tuple[int, int, int]:
        """[H, W, 3] of one stacked RGB frame, e.g. (168, 672, 3)."""
        return (self.view_height, self.view_width * len(self.cameras), 3)


def load_bridge_config(path: str | Path | None = None, section: str = "camera_bridge") -> BridgeConfig:
    """Read `BridgeConfig` from YAML (default `config/cameras.yaml`, section `camera_bridge`)."""
    p = Path(path) if path is not None else config_dir() / "cameras.yaml"
    return from_yaml(BridgeConfig, p, section)


__all__ = ["BridgeConfig", "CameraConfig", "ConfigError", "load_bridge_config", "ENCODINGS", "SOURCE_KINDS"]
