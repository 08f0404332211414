"""`vam-stack export-lerobot`: a dataset of this project as a LeRobotDataset v3.0 folder.

    vam-stack export-lerobot runs/demos_yam --out runs/demos_yam_lerobot [--codec av1|lossless|h264]

The same demonstrations then train lerobot's policies (`LeRobotDataset(repo_id, root=OUT)` reads
it without the hub). `--codec av1` is lerobot's default (SVT-AV1, small, lossy); `lossless` (H.264
RGB, QP 0) re-imports to bit-identical samples. This project's episode metadata and phase labels
ride along (`meta/vam_stack.json`, the `phase` feature).
"""
from __future__ import annotations

import argparse

from vam_stack.progress import progress_bar

from vam_data.lerobot_v3 import export_lerobot
from vam_data.video import CODECS


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("dataset", help="dataset folder of this project (vam-stack collect / import)")
    p.add_argument("--out", required=True, help="new LeRobot v3 folder (must not exist)")
    p.add_argument("--codec", default="av1", choices=sorted(CODECS), help="video codec of the camera views")
    p.add_argument("--robot-type", default=None, help="info.json robot_type (default: the dataset's robot)")


def run(args: argparse.Namespace) -> int:
    with progress_bar(desc="export", unit="episode") as bar:
        def progress(done: int, total: int) -> None:
            bar.total, bar.n = total, done
            bar.refresh()

        info = export_lerobot(args.dataset, args.out, codec=args.codec, robot_type=args.robot_type, progress=progress)
    print(f"wrote {args.out}: LeRobotDataset {info['codebase_version']}, {info['total_episodes']} episodes, "
          f"{info['total_frames']} frames at {info['fps']} Hz, views "
          f"{[k for k, f in info['features'].items() if f['dtype'] == 'video']} ({args.codec})")
    return 0
