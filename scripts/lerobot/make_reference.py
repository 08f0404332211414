#!/usr/bin/env python
"""Write a tiny synthetic LeRobotDataset v3.0 with lerobot's own writer API (no network).

Usage (inside /work/lerobot_venv):
    python make_reference.py OUTPUT_DIR [--force] [--vcodec libsvtav1] [--frames 20 25]

Content (deterministic, so readers can check exact values):
  episode e (0-based), frame f:
    observation.state[j] = 100*e + f + 0.01*j            (float32, shape [14])
    action[j]            = observation.state[j] + 0.5     (float32, shape [14])
    observation.images.top: uint8 HWC [48,64,3], R = (40*e + 10*f) % 256, G = 64, B = 128
    task: TASKS[e % len(TASKS)]
"""

import argparse
import os
import shutil
import sys
from pathlib import Path

# Never touch the network.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

import numpy as np  # noqa: E402

from lerobot.datasets.lerobot_dataset import LeRobotDataset  # noqa: E402

FPS = 30
STATE_DIM = 14
IMG_SHAPE = (48, 64, 3)
TASKS = ["pick up the red cube", "place the cube in the bowl"]
JOINT_NAMES = [f"joint_{j}" for j in range(STATE_DIM)]

FEATURES = {
    "observation.state": {"dtype": "float32", "shape": (STATE_DIM,), "names": JOINT_NAMES},
    "action": {"dtype": "float32", "shape": (STATE_DIM,), "names": JOINT_NAMES},
    "observation.images.top": {
        "dtype": "video",
        "shape": IMG_SHAPE,
        "names": ["height", "width", "channels"],
    },
}


def state_value(ep: int, f: int) -> np.ndarray:
    return (100.0 * ep + f + 0.01 * np.arange(STATE_DIM)).astype(np.float32)


def image_value(ep: int, f: int) -> np.ndarray:
    r = (40 * ep + 10 * f) % 256
    img = np.empty(IMG_SHAPE, dtype=np.uint8)
    img[..., 0] = r
    img[..., 1] = 64
    img[..., 2] = 128
    return img


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("output_dir", type=Path)
    ap.add_argument("--force", action="store_true", help="delete OUTPUT_DIR first if it exists")
    ap.add_argument("--repo-id", default="local/synth")
    ap.add_argument("--vcodec", default="libsvtav1", help="lerobot default is libsvtav1 (AV1)")
    ap.add_argument("--frames", type=int, nargs="+", default=[20, 25], help="frames per episode")
    args = ap.parse_args()

    root: Path = args.output_dir
    if root.exists():
        if not args.force:
            print(f"{root} exists (use --force to overwrite)", file=sys.stderr)
            return 2
        shutil.rmtree(root)
    root.parent.mkdir(parents=True, exist_ok=True)

    ds = LeRobotDataset.create(
        repo_id=args.repo_id,
        fps=FPS,
        root=root,
        features=FEATURES,
        robot_type="synthetic",
        use_videos=True,
        vcodec=args.vcodec,
    )
    for ep, n in enumerate(args.frames):
        task = TASKS[ep % len(TASKS)]
        for f in range(n):
            s = state_value(ep, f)
            ds.add_frame(
                {
                    "observation.state": s,
                    "action": s + np.float32(0.5),
                    "observation.images.top": image_value(ep, f),
                    "task": task,
                }
            )
        ds.save_episode()
    ds.finalize()
    print(f"wrote {root}: {ds.meta.total_episodes} episodes, {ds.meta.total_frames} frames")

    # Read back with a fresh reader (local only).
    rd = LeRobotDataset(args.repo_id, root=root)
    assert rd.meta.total_episodes == len(args.frames), rd.meta.total_episodes
    assert len(rd) == sum(args.frames), len(rd)
    last = len(rd) - 1
    for idx in (0, args.frames[0] - 1, args.frames[0], last):
        item = rd[idx]
        ep, f = int(item["episode_index"]), int(item["frame_index"])
        np.testing.assert_allclose(item["observation.state"].numpy(), state_value(ep, f), rtol=0, atol=1e-5)
        np.testing.assert_allclose(item["action"].numpy(), state_value(ep, f) + 0.5, rtol=0, atol=1e-5)
        assert item["task"] == TASKS[ep % len(TASKS)], item["task"]
        img = item["observation.images.top"]
        assert tuple(img.shape) == (3, IMG_SHAPE[0], IMG_SHAPE[1]), img.shape
        exp = image_value(ep, f).astype(np.float32).mean(axis=(0, 1)) / 255.0
        got = img.float().mean(dim=(1, 2)).numpy()  # per channel (CHW float in [0,1])
        assert np.abs(got - exp).max() < 0.02, (idx, got, exp)  # lossy video: ~±5/255
        print(f"  idx={idx} ep={ep} frame={f} task={item['task']!r} rgb_mean={[round(float(x), 4) for x in got]} (expected ~{[round(float(x), 4) for x in exp]})")
    print(f"read back OK (video_backend={rd.video_backend})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
