"""Video in and out through PyAV: lossless comes back bit-exact, frames are found by presentation time,
decoded forward without holding the file."""
import numpy as np
import pytest

from vam_data.video import VideoCursor, VideoError, VideoWriter


def frames(n, w=64, h=48):
    yy, xx = np.mgrid[0:h, 0:w]
    return np.stack([np.stack([(xx * 4 + k) % 256, (yy * 5) % 256, np.full_like(xx, 10 * k % 256)], -1)
                     for k in range(n)]).astype(np.uint8)


@pytest.mark.parametrize("codec, tol", [("lossless", 0), ("av1", 12), ("h264", 12)])
def test_frames_come_back_at_their_times(tmp_path, codec, tol):
    f = frames(30)
    with VideoWriter(tmp_path / "v.mp4", 64, 48, 30, codec) as w:
        w.write(f[:10])
        w.write(f[10:])
    cur = VideoCursor(tmp_path / "v.mp4", 30)
    got = cur.take(np.arange(5, 12) / 30, "test")
    assert np.abs(got.astype(int) - f[5:12]).mean() <= tol
    if tol == 0:
        np.testing.assert_array_equal(got, f[5:12])
    back = cur.take(np.array([0.0, 1 / 30]), "test")      # behind the cursor: reopened
    assert np.abs(back.astype(int) - f[:2]).mean() <= tol
    with pytest.raises(VideoError, match=r"no frame at 2.0000 s \(nearest 0.9667 s\)"):
        cur.take(np.array([2.0]), "episode 3")
    cur.close()


def test_bad_inputs_are_named(tmp_path):
    with pytest.raises(VideoError, match="codec must be one of"):
        VideoWriter(tmp_path / "a.mp4", 64, 48, 30, "vp9")
    with pytest.raises(VideoError, match="even frame sizes"):
        VideoWriter(tmp_path / "a.mp4", 63, 48, 30, "av1")
    with VideoWriter(tmp_path / "b.mp4", 64, 48, 30, "lossless") as w:
        with pytest.raises(VideoError, match=r"uint8 \[T, 48, 64, 3\]"):
            w.write(np.zeros((2, 48, 64, 3), np.float32))
    with pytest.raises(VideoError, match="missing"):
        VideoCursor(tmp_path / "none.mp4", 30)
    (tmp_path / "junk.mp4").write_bytes(b"not a video at all" * 10)
    with pytest.raises(VideoError, match="cannot decode"):
        VideoCursor(tmp_path / "junk.mp4", 30)


def test_encoding_leaves_the_calling_threads_scheduling_alone(tmp_path):
    """SVT-AV1 run as root makes its calling thread SCHED_FIFO; the writer puts the policy back (a real-time
    main thread spinning in a ROS or training process starves everything else on the machine)."""
    import os

    before = (os.sched_getscheduler(0), os.sched_getparam(0))
    for codec in ("av1", "lossless"):
        with VideoWriter(tmp_path / f"{codec}.mp4", 64, 48, 30, codec) as w:
            w.write(frames(4))
        assert (os.sched_getscheduler(0), os.sched_getparam(0)) == before, codec
