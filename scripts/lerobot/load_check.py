#!/usr/bin/env python
"""Load a LOCAL LeRobotDataset (v3.0) with lerobot and dump samples as JSON (no network).

Usage (inside /work/lerobot_venv):
    python load_check.py DATASET_ROOT [INDEX ...] [--repo-id local/test] [--video-backend torchcodec|pyav]

stdout: one JSON object
  {"ok": true, "root": ..., "video_backend": ...,   # "pyav (pyav_decode_shim)" when the shim was needed
   "info": {"codebase_version", "fps", "total_episodes", "total_frames", "total_tasks",
            "features": [keys...], "video_keys": [...], "image_keys": [...]},
   "len": len(dataset),
   "samples": [{"index": i, "observation.state": [...], "action": [...], "task": str,
                "episode_index": int, "frame_index": int, "timestamp": float,
                "images": {KEY: {"shape": [C,H,W], "dtype": str, "mean": float, "channel_means": [..C],
                                 "min": float, "max": float}}}]}
On failure: exit code 1, {"ok": false, "error": "<Type>: <message>"} on stdout, traceback on stderr.
"""

import argparse
import json
import os
import sys
import traceback

# Never touch the network.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")


def _scalar(v):
    if hasattr(v, "item"):
        return v.item()
    return v


def _list(v):
    if hasattr(v, "tolist"):
        return v.tolist()
    return list(v)


def run(args) -> dict:
    from pathlib import Path

    info_path = Path(args.root) / "meta" / "info.json"
    if not info_path.is_file():
        # LeRobotDataset would mkdir the root and try the Hub; fail early instead.
        raise FileNotFoundError(f"{info_path} not found: not a local LeRobotDataset root")

    from lerobot.datasets.lerobot_dataset import LeRobotDataset

    shim = False
    if args.video_backend == "pyav":
        # lerobot 0.4.4's pyav path needs torchvision.io.VideoReader (gone in torchvision 0.28)
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import pyav_decode_shim

        shim = pyav_decode_shim.install()

    ds = LeRobotDataset(args.repo_id, root=args.root, video_backend=args.video_backend)
    info = ds.meta.info
    out = {
        "ok": True,
        "root": str(args.root),
        "video_backend": ds.video_backend + (" (pyav_decode_shim)" if shim else ""),
        "info": {
            "codebase_version": info.get("codebase_version"),
            "fps": info.get("fps"),
            "total_episodes": info.get("total_episodes"),
            "total_frames": info.get("total_frames"),
            "total_tasks": info.get("total_tasks"),
            "features": list(info.get("features", {}).keys()),
            "video_keys": list(ds.meta.video_keys),
            "image_keys": list(ds.meta.image_keys),
        },
        "len": len(ds),
        "samples": [],
    }
    cam_keys = list(ds.meta.camera_keys)
    for idx in args.indices:
        if idx < 0 or idx >= len(ds):
            raise IndexError(f"index {idx} out of range for dataset of length {len(ds)}")
        item = ds[idx]
        s = {"index": idx}
        for k in ("observation.state", "action"):
            if k in item:
                s[k] = _list(item[k])
        s["task"] = item.get("task")
        for k in ("episode_index", "frame_index", "timestamp"):
            s[k] = _scalar(item[k])
        s["images"] = {}
        for k in cam_keys:
            t = item[k]
            tf = t.float()
            s["images"][k] = {
                "shape": list(t.shape),
                "dtype": str(t.dtype),
                "mean": float(tf.mean()),
                "channel_means": [float(x) for x in tf.reshape(tf.shape[0], -1).mean(dim=1)] if tf.dim() == 3 else None,
                "min": float(tf.min()),
                "max": float(tf.max()),
            }
        out["samples"].append(s)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("root")
    ap.add_argument("indices", type=int, nargs="*", default=[0])
    ap.add_argument("--repo-id", default="local/test")
    ap.add_argument(
        "--video-backend",
        default=None,
        help="torchcodec or pyav; default: lerobot's get_safe_default_codec() (torchcodec if installed)",
    )
    args = ap.parse_args()
    try:
        out = run(args)
    except BaseException as e:  # noqa: BLE001
        traceback.print_exc(file=sys.stderr)
        print(json.dumps({"ok": False, "error": f"{type(e).__name__}: {e}"}))
        return 1
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
