"""`vam-stack import`: bring demonstrations into a training set at a model preset's geometry.

    vam-stack import --format lerobot path/to/lerobot_dataset --preset yam64 --out runs/demos_mine
    vam-stack import --format mcap runs/recordings --preset yam64 --task handover --out runs/demos_rec

`--format lerobot` reads a local LeRobotDataset v3.0 folder (parquet + AV1/H.264 video); `--format
mcap` a folder of rosbag2 MCAP recordings, one episode each (`vam-stack record`, `ros2 bag record`).
`--mapping FILE` says which feature or topic holds what (sections `lerobot_import` / `mcap_import`;
config/mcap_import_yam.yaml shows the graph's own names). Everything is checked against the
preset's contract before anything is written: state and action names in the model's order, the
gripper range, joint ranges, rate, camera views and sizes; a mismatch names the field and both
values. Frames are resized view by view to the preset's size. The result trains with
`vam-stack train --dataset OUT`.
"""
from __future__ import annotations

import argparse
import json

from vam_stack.progress import progress_bar

from vam_data import lerobot_v3, mcap_import
from vam_data.contract import contract_for
from vam_data.lerobot_import import import_lerobot


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("source", help="LeRobot v3 folder (--format lerobot) or a recording / folder of recordings (mcap)")
    p.add_argument("--format", required=True, choices=("lerobot", "mcap"), help="what SOURCE is")
    p.add_argument("--preset", default="yam64", help="model preset whose geometry the training set takes")
    p.add_argument("--mapping", default=None, help="YAML naming the features (lerobot_import) or topics (mcap_import)")
    p.add_argument("--task", default=None, help="task name stored on every imported episode (mcap)")
    p.add_argument("--skip-bad", action="store_true", help="leave out an episode (lerobot) or recording (mcap) that "
                   "fails its own checks, naming it and why, instead of stopping the import")
    p.add_argument("--out", required=True, help="dataset folder to write")
    p.add_argument("--overwrite", action="store_true", help="replace an existing dataset at --out")


def run(args: argparse.Namespace) -> int:
    contract = contract_for(args.preset)
    with progress_bar(desc=f"import {args.format}", unit="episode") as bar:
        def progress(done: int, total: int) -> None:
            bar.total = total
            bar.n = done
            bar.refresh()

        if args.format == "lerobot":
            info = import_lerobot(args.source, contract, args.out, lerobot_v3.load_mapping(args.mapping),
                                  overwrite=args.overwrite, progress=progress, skip_bad=args.skip_bad)
        else:
            info = mcap_import.import_mcap(args.source, contract, args.out, mcap_import.load_mapping(args.mapping),
                                           overwrite=args.overwrite, progress=progress, task=args.task,
                                           skip_bad=args.skip_bad)
    for bad in info["imported_from"].get("skipped", []):
        print(f"skipped {bad.get('recording', bad.get('episode'))}: {bad['reason']}")
    print(json.dumps({k: info[k] for k in ("total_episodes", "total_frames", "fps", "frame_shape", "imported_from")}))
    print(f"wrote {args.out}: {info['total_episodes']} episodes, {info['total_frames']} steps at {args.preset}'s "
          f"geometry; train with: vam-stack train --dataset {args.out} ...")
    return 0
