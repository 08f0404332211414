"""Video files in and out through PyAV (FFmpeg's libraries): what LeRobot v3 stores its camera views in.

Encoding, by `codec`:
- `av1`: SVT-AV1 (`libsvtav1`), yuv420p, CRF 30, a key frame every 2 frames: LeRobot's defaults.
  Lossy: colours come back within a few levels, so samples are close, not identical.
- `lossless`: H.264 in RGB (`libx264rgb`, QP 0): every pixel comes back bit-exact, so an exported
  dataset re-imports to identical samples. Larger files; any FFmpeg-based reader decodes it.
- `h264`: H.264 yuv420p (`libx264`, CRF 23), the format most cameras and `ros2 bag` tools write.

Decoding takes whatever FFmpeg decodes (AV1 through dav1d, H.264, HEVC, VP9, MPEG-4) and returns
RGB frames with their presentation times in seconds.
"""
from __future__ import annotations

import os
from fractions import Fraction
from pathlib import Path

import av
import numpy as np

CODECS = {  # name -> (FFmpeg encoder, pixel format, encoder options, codec name written to info.json)
    "av1": ("libsvtav1", "yuv420p", {"crf": "30", "g": "2", "preset": "8"}, "av1"),
    "lossless": ("libx264rgb", "rgb24", {"qp": "0", "preset": "veryfast"}, "h264"),
    "h264": ("libx264", "yuv420p", {"crf": "23", "preset": "veryfast"}, "h264"),
}


class VideoError(ValueError):
    """A video that cannot be written or read (the message names the file)."""


class _KeepScheduling:
    """Put the calling thread's scheduling policy back after an encoder call. SVT-AV1, run as root, switches
    the thread that initialises it to SCHED_FIFO: a training or ROS process that exported a video would then
    spin a real-time main thread and starve its own DDS and worker threads."""

    def __enter__(self):
        self.policy, self.param = os.sched_getscheduler(0), os.sched_getparam(0)

    def __exit__(self, *exc):
        if os.sched_getscheduler(0) != self.policy or os.sched_getparam(0) != self.param:
            os.sched_setscheduler(0, self.policy, self.param)


class VideoWriter:
    """Append RGB frames to one video file at a fixed rate; use as a context manager. Frame k is
    presented at k / fps seconds (the timestamps LeRobot's episode rows point into)."""

    def __init__(self, path: str | Path, width: int, height: int, fps: float, codec: str = "av1"):
        if codec not in CODECS:
            raise VideoError(f"codec must be one of {sorted(CODECS)}, got {codec!r}")
        encoder, self.pix_fmt, options, self.codec_name = CODECS[codec]
        if encoder == "libsvtav1":
            os.environ.setdefault("SVT_LOG", "1")      # SVT-AV1 prints its whole configuration at level 3; errors only
        if self.pix_fmt == "yuv420p" and (width % 2 or height % 2):
            raise VideoError(f"{path}: {codec} (yuv420p) needs even frame sizes, got {width}x{height}")
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.width, self.height, self.frames = int(width), int(height), 0
        rate = Fraction(fps).limit_denominator(1001)
        self._keep = _KeepScheduling()
        with self._keep:
            self._container = av.open(str(self.path), mode="w")
            self._stream = self._container.add_stream(encoder, rate=rate, options=dict(options))
        self._stream.width, self._stream.height, self._stream.pix_fmt = self.width, self.height, self.pix_fmt
        self._stream.time_base = 1 / rate

    def write(self, frames: np.ndarray) -> None:
        """frames: uint8 [T, H, W, 3] or [H, W, 3] RGB."""
        frames = np.asarray(frames)
        if frames.ndim == 3:
            frames = frames[None]
        if frames.dtype != np.uint8 or frames.shape[1:] != (self.height, self.width, 3):
            raise VideoError(f"{self.path}: frames must be uint8 [T, {self.height}, {self.width}, 3], "
                             f"got {frames.dtype} {tuple(frames.shape)}")
        for f in frames:
            vf = av.VideoFrame.from_ndarray(np.ascontiguousarray(f), format="rgb24")
            vf.pts = self.frames
            self.frames += 1
            with self._keep:
                for packet in self._stream.encode(vf):
                    self._container.mux(packet)

    def close(self) -> None:
        if self._container is None:
            return
        with self._keep:
            try:
                for packet in self._stream.encode():
                    self._container.mux(packet)
            finally:
                self._container.close()
                self._container = None

    def __enter__(self) -> "VideoWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class VideoCursor:
    """One video file decoded forward, frame by frame, never held whole: `take(times)` returns the frames
    presented at ascending `times` (the nearest frame, within half a frame period). LeRobot v3 files hold
    many episodes one after another, read in order; a query before the cursor reopens the file."""

    def __init__(self, path: str | Path, fps: float):
        self.path, self.fps = Path(path), float(fps)
        if not self.path.is_file():
            raise VideoError(f"{self.path}: video file is missing")
        self._container = None
        self._open()

    def _open(self) -> None:
        self.close()
        try:
            self._container = av.open(str(self.path))
            if not self._container.streams.video:
                raise VideoError(f"{self.path}: no video stream")
            stream = self._container.streams.video[0]
            stream.thread_type = "AUTO"
            self._frames = self._container.decode(stream)
        except VideoError:
            raise
        except Exception as e:     # PyAV's FFmpeg errors
            raise VideoError(f"{self.path}: cannot decode ({type(e).__name__}: {e})") from None
        self._prev = None          # (time, av.VideoFrame) at or before the last query
        self._next = self._decode()

    def _decode(self):
        try:
            f = next(self._frames)
        except StopIteration:
            return None
        except Exception as e:
            raise VideoError(f"{self.path}: cannot decode ({type(e).__name__}: {e})") from None
        return (float(f.time) if f.time is not None else np.nan, f)

    def take(self, times: np.ndarray, where: str) -> np.ndarray:
        """uint8 [len(times), H, W, 3] RGB frames at the ascending presentation `times` [s]."""
        times = np.asarray(times, np.float64)
        if len(times) and self._prev is not None and times[0] < self._prev[0] - 0.5 / self.fps:
            self._open()                                   # asked for something behind the cursor
        out = []
        for q in times:
            while self._next is not None and self._next[0] <= q:
                self._prev, self._next = self._next, self._decode()
            near = [c for c in (self._prev, self._next) if c is not None]
            if not near:
                raise VideoError(f"{where}: {self.path.name} holds no frames")
            t, frame = min(near, key=lambda c: abs(c[0] - q))
            if not abs(t - q) <= 0.5 / self.fps:
                raise VideoError(f"{where}: {self.path.name} has no frame at {q:.4f} s (nearest {t:.4f} s)")
            out.append(frame.to_ndarray(format="rgb24"))
        return np.stack(out) if out else np.zeros((0, 0, 0, 3), np.uint8)

    def close(self) -> None:
        if self._container is not None:
            self._container.close()
            self._container = None
