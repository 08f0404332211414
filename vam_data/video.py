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

from fractions import Fraction
from pathlib import Path

import numpy as np

CODECS = {  # name -> (FFmpeg encoder, pixel format, encoder options, codec name written to info.json)
    "av1": ("libsvtav1", "yuv420p", {"crf": "30", "g": "2", "preset": "8"}, "av1"),
    "lossless": ("libx264rgb", "rgb24", {"qp": "0", "preset": "veryfast"}, "h264"),
    "h264": ("libx264", "yuv420p", {"crf": "23", "preset": "veryfast"}, "h264"),
}


class VideoError(ValueError):
    """A video that cannot be written or read (the message names the file)."""


class VideoWriter:
    """Append RGB frames to one video file at a fixed rate; use as a context manager. Frame k is
    presented at k / fps seconds (the timestamps LeRobot's episode rows point into)."""

    def __init__(self, path: str | Path, width: int, height: int, fps: float, codec: str = "av1"):
        import av

        if codec not in CODECS:
            raise VideoError(f"codec must be one of {sorted(CODECS)}, got {codec!r}")
        encoder, self.pix_fmt, options, self.codec_name = CODECS[codec]
        if self.pix_fmt == "yuv420p" and (width % 2 or height % 2):
            raise VideoError(f"{path}: {codec} (yuv420p) needs even frame sizes, got {width}x{height}")
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.width, self.height, self.frames = int(width), int(height), 0
        rate = Fraction(fps).limit_denominator(1001)
        self._container = av.open(str(self.path), mode="w")
        self._stream = self._container.add_stream(encoder, rate=rate, options=dict(options))
        self._stream.width, self._stream.height, self._stream.pix_fmt = self.width, self.height, self.pix_fmt
        self._stream.time_base = 1 / rate

    def write(self, frames: np.ndarray) -> None:
        """frames: uint8 [T, H, W, 3] or [H, W, 3] RGB."""
        import av

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
            for packet in self._stream.encode(vf):
                self._container.mux(packet)

    def close(self) -> None:
        if self._container is None:
            return
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


def read_video(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """Every frame of the first video stream: (uint8 [N, H, W, 3] RGB, presentation times [N] in s)."""
    import av

    path = Path(path)
    if not path.is_file():
        raise VideoError(f"{path}: video file is missing")
    frames, times = [], []
    try:
        with av.open(str(path)) as container:
            if not container.streams.video:
                raise VideoError(f"{path}: no video stream")
            stream = container.streams.video[0]
            stream.thread_type = "AUTO"
            for frame in container.decode(stream):
                frames.append(frame.to_ndarray(format="rgb24"))
                times.append(float(frame.time) if frame.time is not None else np.nan)
    except VideoError:
        raise
    except Exception as e:   # PyAV's FFmpeg errors: a truncated file, an unknown codec
        raise VideoError(f"{path}: cannot decode ({type(e).__name__}: {e})") from None
    if not frames:
        raise VideoError(f"{path}: no decodable frames")
    return np.stack(frames), np.asarray(times, np.float64)


def frames_at(frames: np.ndarray, times: np.ndarray, query_s: np.ndarray, fps: float, where: str) -> np.ndarray:
    """The frames presented at `query_s` (each within half a frame period, else an error naming `where`)."""
    query_s = np.asarray(query_s, np.float64)
    idx = np.clip(np.searchsorted(times, query_s), 0, len(times) - 1)
    prev = np.clip(idx - 1, 0, len(times) - 1)
    idx = np.where(np.abs(times[prev] - query_s) < np.abs(times[idx] - query_s), prev, idx)
    err = np.abs(times[idx] - query_s)
    if len(err) and err.max() > 0.5 / fps:
        k = int(err.argmax())
        raise VideoError(f"{where}: no frame at {query_s[k]:.4f} s (nearest {times[idx[k]]:.4f} s; the video "
                         f"holds {len(times)} frames over [{times[0]:.3f}, {times[-1]:.3f}] s)")
    return frames[idx]
