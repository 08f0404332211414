"""PyAV fallback for lerobot 0.4.4's "pyav" video backend.

lerobot 0.4.4 implements video_backend="pyav" with torchvision.io.VideoReader, which no longer exists
in torchvision 0.28 (the only torchvision that matches torch 2.13). `install()` replaces
lerobot.datasets.video_utils.decode_video_frames_torchvision with an equivalent that calls PyAV
directly (same seek-to-keyframe / nearest-timestamp / tolerance semantics, same output:
float32 [N, C, H, W] in [0, 1]). It is a no-op when torchvision still has VideoReader.
"""

import logging
from pathlib import Path

import av
import torch


def decode_video_frames_pyav(
    video_path: Path | str,
    timestamps: list[float],
    tolerance_s: float,
    backend: str = "pyav",
    log_loaded_timestamps: bool = False,
) -> torch.Tensor:
    from lerobot.datasets.video_utils import FrameTimestampError

    video_path = str(video_path)
    first_ts = min(timestamps)
    last_ts = max(timestamps)

    loaded_frames = []
    loaded_ts = []
    with av.open(video_path) as container:
        stream = container.streams.video[0]
        tb = stream.time_base
        # seek to the closest key frame at or before first_ts (like VideoReader.seek(keyframes_only=True))
        container.seek(int(first_ts / tb), stream=stream, backward=True, any_frame=False)
        for frame in container.decode(stream):
            if frame.pts is None:
                continue
            current_ts = float(frame.pts * tb)
            if log_loaded_timestamps:
                logging.info(f"frame loaded at timestamp={current_ts:.4f}")
            loaded_frames.append(torch.from_numpy(frame.to_ndarray(format="rgb24")).permute(2, 0, 1))
            loaded_ts.append(current_ts)
            if current_ts >= last_ts:
                break

    if not loaded_frames:
        raise FrameTimestampError(f"no frame decoded from {video_path} for timestamps {timestamps}")

    query_ts = torch.tensor(timestamps)
    loaded_ts_t = torch.tensor(loaded_ts)
    dist = torch.cdist(query_ts[:, None], loaded_ts_t[:, None], p=1)
    min_, argmin_ = dist.min(1)
    is_within_tol = min_ < tolerance_s
    if not is_within_tol.all():
        raise FrameTimestampError(
            f"One or several query timestamps unexpectedly violate the tolerance ({min_[~is_within_tol]} > {tolerance_s=})."
            f"\nqueried timestamps: {query_ts}"
            f"\nloaded timestamps: {loaded_ts_t}"
            f"\nvideo: {video_path}"
            f"\nbackend: pyav (shim)"
        )
    closest_frames = torch.stack([loaded_frames[idx] for idx in argmin_])
    closest_frames = closest_frames.type(torch.float32) / 255
    if len(timestamps) != len(closest_frames):
        raise FrameTimestampError(
            f"Number of retrieved frames ({len(closest_frames)}) does not match "
            f"number of queried timestamps ({len(timestamps)})"
        )
    return closest_frames


def needed() -> bool:
    import torchvision.io

    return not hasattr(torchvision.io, "VideoReader")


def install(force: bool = False) -> bool:
    """Patch lerobot's pyav decoding path; returns True if the shim was installed."""
    if not (force or needed()):
        return False
    import lerobot.datasets.video_utils as vu

    vu.decode_video_frames_torchvision = decode_video_frames_pyav
    return True
