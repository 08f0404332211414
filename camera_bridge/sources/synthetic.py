"""Synthetic camera: a moving pattern with the frame counter burnt in, driven by the clock.

Frame k exists from `t0 + k / fps` on, so with an injected clock the output is exactly
reproducible. The counter is written twice: as text for people, and as a row of 16 black or
white blocks (bit 15 first) across the top eighth of the image, which survives resizing and
lossy video codecs and is read back by `decode_counter`. Fault switches (`paused`,
`fail_open`, `shape_override`, `encoding_override`) let tests and demos break the camera.
"""
from __future__ import annotations

import time

import cv2
import numpy as np

from camera_bridge.config import CameraConfig
from camera_bridge.sources.base import CameraDisconnected, Clock, CameraSource, Frame

COUNTER_BITS = 16
STRIP_FRACTION = 8  # counter strip height = image height / 8


def burn_counter(image: np.ndarray, counter: int) -> None:
    """Write `counter` (mod 2**16) into `image` [H, W, C] in place: bit blocks plus text."""
    h, w = image.shape[:2]
    strip = max(h // STRIP_FRACTION, 2)
    edges = np.linspace(0, w, COUNTER_BITS + 1).astype(int)
    value = counter % (1 << COUNTER_BITS)
    for bit in range(COUNTER_BITS):
        on = (value >> (COUNTER_BITS - 1 - bit)) & 1
        image[:strip, edges[bit]:edges[bit + 1]] = 255 if on else 0
    scale = h / 240.0
    org = (max(w // 20, 2), min(h - 4, strip + int(40 * scale)))
    cv2.putText(image, f"{counter:06d}", org, cv2.FONT_HERSHEY_SIMPLEX, scale, (255, 255, 255),
                max(int(2 * scale), 1), cv2.LINE_AA)


def decode_counter(image: np.ndarray) -> int:
    """Read the 16-bit counter back from a (possibly resized or compressed) image [H, W, C]."""
    h, w = image.shape[:2]
    strip = max(h // STRIP_FRACTION, 2)
    edges = np.linspace(0, w, COUNTER_BITS + 1)
    row = image[strip // 2]
    value = 0
    for bit in range(COUNTER_BITS):
        centre = int((edges[bit] + edges[bit + 1]) / 2)
        level = float(np.mean(row[centre]))
        value = (value << 1) | int(level > 127)
    return value


class PatternRenderer:
    """Precomputed colour pattern that slides one step per frame; rendering is one copy."""

    def __init__(self, width: int, height: int, seed: int = 0, step_px: int = 4):
        self.width, self.height, self.step = width, height, step_px
        self.period = 256  # px; horizontal period of the pattern, a multiple of step_px
        rng = np.random.default_rng(seed)
        y, x = np.mgrid[0:height, 0:width + self.period].astype(np.float32)
        phase = rng.uniform(0, 2 * np.pi, size=3)
        wide = np.empty((height, width + self.period, 3), np.uint8)  # [H, W+P, 3]
        for c in range(3):
            wave = np.sin(2 * np.pi * x / self.period + phase[c]) * np.cos(2 * np.pi * y / (height * 1.5))
            wide[..., c] = np.clip(128 + 110 * wave, 0, 255).astype(np.uint8)
        cv2.rectangle(wide, (0, height // 3), (width + self.period - 1, height // 3 + 6), (0, 0, 255), -1)
        self._wide = wide

    def render(self, counter: int) -> np.ndarray:
        off = (counter * self.step) % self.period
        image = np.ascontiguousarray(self._wide[:, off:off + self.width])  # [H, W, 3] copy
        burn_counter(image, counter)
        return image


class SyntheticSource(CameraSource):
    """Clock-driven synthetic camera in the configured size and encoding."""

    def __init__(self, cfg: CameraConfig, clock: Clock = time.monotonic, seed: int = 0):
        super().__init__(cfg, clock)
        self._renderer = PatternRenderer(cfg.width, cfg.height, seed=seed)
        self._t0 = 0.0
        self._last_index = -1
        self.paused = False  # fault switch: stop producing frames (camera hangs)
        self.fail_open = False  # fault switch: opening fails (camera unplugged)
        self.shape_override: tuple[int, int] | None = None  # fault switch: deliver (w, h) instead
        self.encoding_override: str | None = None  # fault switch: "mono8" delivers 1 channel
        self.skip_indices: set[int] = set()  # fault switch: frame indices that never arrive

    def _open(self) -> None:
        if self.fail_open:
            raise CameraDisconnected(self.name, "synthetic camera set to fail on open")
        if self._last_index < 0:
            self._t0 = self.clock()  # the first frame exists from the first open on

    def _release(self) -> None:
        return None  # nothing to release; frames keep their clock-defined schedule

    def frame_index(self, now: float) -> int:
        """Index of the newest frame that exists at host time `now`."""
        return int(np.floor((now - self._t0) * self.cfg.fps + 1e-9))

    def next_frame_due(self) -> float | None:
        """Frame k exists from t0 + k / fps on: the next one after the last read (None until opened)."""
        if not self.is_connected or self.paused:
            return None
        return self._t0 + (self._last_index + 1) / self.cfg.fps

    def _poll(self) -> Frame | None:
        if self.paused:
            return None
        index = self.frame_index(self.clock())
        while index in self.skip_indices and index > self._last_index:
            index -= 1
        if index <= self._last_index:
            return None
        self._last_index = index
        image = self._renderer.render(index)
        encoding = self.cfg.encoding
        if self.cfg.encoding == "rgb8":
            image = image[..., ::-1].copy()
        if self.shape_override is not None:
            image = cv2.resize(image, self.shape_override, interpolation=cv2.INTER_NEAREST)
        if self.encoding_override is not None:
            encoding = self.encoding_override
            if encoding == "mono8":
                image = cv2.cvtColor(image, cv2.COLOR_BGR2GRAY)
        stamp = self._t0 + index / self.cfg.fps + self.cfg.stamp_offset_ms / 1000.0
        return Frame(self.name, image, encoding, stamp, index)
