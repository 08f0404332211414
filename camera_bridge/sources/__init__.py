"""Camera sources behind one interface (connect / read_latest(max_age_ms) / close)."""
from __future__ import annotations

import time

from camera_bridge.config import CameraConfig
from camera_bridge.sources.base import (CameraDisconnected, CameraError, CameraSource, Clock, ClockMapper,
                                        EndOfStream, Frame, FrameStale, NoFrameYet, SourceStats)
from camera_bridge.sources.opencv_source import OpenCVSource
from camera_bridge.sources.push import PushSource
from camera_bridge.sources.synthetic import SyntheticSource, decode_counter


def make_source(cfg: CameraConfig, clock: Clock = time.monotonic, seed: int = 0) -> CameraSource:
    """Build the source `cfg.kind` names. RealSense is imported only when asked for."""
    if cfg.kind == "synthetic":
        return SyntheticSource(cfg, clock, seed=seed)
    if cfg.kind == "opencv":
        return OpenCVSource(cfg, clock)
    if cfg.kind == "push":
        return PushSource(cfg, clock)
    if cfg.kind == "realsense":
        from camera_bridge.sources.realsense import RealSenseSource  # needs pyrealsense2 + libusb
        return RealSenseSource(cfg, clock)
    raise CameraError(cfg.name, f"unknown source kind {cfg.kind!r}")


__all__ = ["CameraDisconnected", "CameraError", "CameraSource", "ClockMapper", "EndOfStream", "Frame",
           "FrameStale", "NoFrameYet", "OpenCVSource", "PushSource", "SourceStats", "SyntheticSource",
           "decode_counter", "make_source"]
