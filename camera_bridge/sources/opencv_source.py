"""OpenCV `VideoCapture` source: USB cameras by index or path, and video files for replay.

Live cameras: `VideoCapture.read()` blocks until the next frame, so a reader thread keeps
only the newest frame and `read_latest` never waits; frames are stamped with the host clock
when `read()` returns (V4L2 gives no usable hardware clock through OpenCV).

Video files: no thread. With `realtime: true` frame k is due at `t0 + k / fps_file` on the
injected clock, and each read decodes forward to the frame due now (replay at the recorded
rate, deterministic under a fake clock); with `realtime: false` every read returns the next
frame (offline evaluation that must see every frame). Stamps are `t0 + k / fps_file`.
"""
from __future__ import annotations

import os
import threading
import time

import cv2
import numpy as np

from camera_bridge.config import CameraConfig
from camera_bridge.sources.base import (CameraDisconnected, CameraError, CameraSource, Clock, EndOfStream,
                                        Frame)


class OpenCVSource(CameraSource):
    """`VideoCapture` behind the camera interface (BGR frames, encoding "bgr8")."""

    def __init__(self, cfg: CameraConfig, clock: Clock = time.monotonic):
        super().__init__(cfg, clock)
        if cfg.encoding != "bgr8":
            raise CameraError(cfg.name, f"OpenCV delivers bgr8; config says encoding {cfg.encoding!r}")
        self._cap: cv2.VideoCapture | None = None
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._pending: Frame | None = None  # live: newest frame not yet returned by _poll
        self._thread_error = ""
        self._t0 = 0.0
        self._file_fps = cfg.fps
        self._file_frames = 0
        self._next_index = 0  # file: index of the next frame the decoder will return

    # ---- open / release ---------------------------------------------------------------
    def _open(self) -> None:
        cfg = self.cfg
        if cfg.is_file:
            if not os.path.isfile(cfg.device):
                raise CameraDisconnected(self.name, f"video file not found: {cfg.device!r}")
            cap = cv2.VideoCapture(cfg.device)
        else:
            target = int(cfg.device) if cfg.device.isdigit() else cfg.device
            cap = cv2.VideoCapture(target)
        if not cap.isOpened():
            cap.release()
            raise CameraDisconnected(self.name, f"VideoCapture could not open {cfg.device!r}")
        self._cap = cap
        if cfg.is_file:
            fps = cap.get(cv2.CAP_PROP_FPS)
            self._file_fps = fps if fps and fps > 0 else cfg.fps
            self._file_frames = int(cap.get(cv2.CAP_PROP_FRAME_COUNT))
            self._next_index = 0
            self._t0 = self.clock()
        else:
            cap.set(cv2.CAP_PROP_FRAME_WIDTH, cfg.width)
            cap.set(cv2.CAP_PROP_FRAME_HEIGHT, cfg.height)
            cap.set(cv2.CAP_PROP_FPS, cfg.fps)
            cap.set(cv2.CAP_PROP_BUFFERSIZE, 1)  # newest frame, not a queue of old ones
            self._stop.clear()
            self._thread_error = ""
            self._pending = None
            self._thread = threading.Thread(target=self._reader, args=(cap,), name=f"cam-{self.name}", daemon=True)
            self._cap = None  # the reader thread owns a live capture and releases it on exit
            self._thread.start()

    def _release(self) -> None:
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            # A hung camera can block read() for long; the thread releases its capture
            # itself when read() returns, so closing never waits more than this.
            thread.join(timeout=0.2)
        if self._cap is not None:
            self._cap.release()
            self._cap = None

    # ---- live camera --------------------------------------------------------------------
    def _reader(self, cap: cv2.VideoCapture) -> None:
        seq = 0
        try:
            while not self._stop.is_set():
                ok, image = cap.read()
                if not ok or image is None:
                    with self._lock:
                        self._thread_error = f"read() failed on {self.cfg.device!r} (camera unplugged?)"
                    return
                frame = Frame(self.name, image, "bgr8", self.clock(), seq)
                seq += 1
                with self._lock:
                    self._pending = frame
        finally:
            cap.release()

    def _poll_live(self) -> Frame | None:
        with self._lock:
            frame, self._pending = self._pending, None
            error = self._thread_error
        if frame is None and error:
            raise CameraDisconnected(self.name, error)
        return frame

    # ---- video file ------------------------------------------------------------------------
    def _decode_next(self) -> np.ndarray | None:
        assert self._cap is not None
        ok, image = self._cap.read()
        if not ok:
            if not self.cfg.loop:
                return None
            self._cap.set(cv2.CAP_PROP_POS_FRAMES, 0)
            self._t0 += self._next_index / self._file_fps  # the loop continues the time line
            self._next_index = 0
            ok, image = self._cap.read()
            if not ok:
                return None
        self._next_index += 1
        return image

    @property
    def stamps_on_host_clock(self) -> bool:
        """A file stepped frame by frame (`realtime: false`) stamps on its own time line, which runs
        ahead of the host clock as fast as frames are read."""
        return not (self.cfg.is_file and not self.cfg.realtime)

    def _poll_file(self) -> Frame | None:
        if self.cfg.realtime:
            due = int(np.floor((self.clock() - self._t0) * self._file_fps + 1e-9))
            if due < self._next_index:
                return None
            image = None
            while self._next_index <= due:  # decode forward to the frame due now
                image = self._decode_next()
                if image is None:
                    break
                due = int(np.floor((self.clock() - self._t0) * self._file_fps + 1e-9))
        else:
            image = self._decode_next()
        if image is None:
            raise EndOfStream(self.name, f"end of video file {self.cfg.device!r} "
                                                f"after {self._next_index} frames")
        index = self._next_index - 1
        return Frame(self.name, image, "bgr8", self._t0 + index / self._file_fps, index)

    def _poll(self) -> Frame | None:
        if not self.cfg.is_file:
            return self._poll_live()
        if self._cap is None:
            raise CameraDisconnected(self.name, "not open")
        return self._poll_file()

    @property
    def file_fps(self) -> float:
        """Frame rate stored in the video file (the configured fps for live cameras)."""
        return self._file_fps
