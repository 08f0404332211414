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
    add_tolerance_arguments(p, "mcap: ")
    p.add_argument("--out", required=True, help="dataset folder to write")
    p.add_argument("--overwrite", action="store_true", help="replace an existing dataset at --out")


def add_tolerance_arguments(p: argparse.ArgumentParser, prefix: str = "") -> None:
    """The MCAP import's timing tolerances (McapMapping: max_gap_ticks, max_age_s, rate_tolerance) as flags;
    given, they replace the mapping's (a refusal names the values that would take the recording)."""
    d = mcap_import.McapMapping()
    p.add_argument("--max-gap-ticks", type=float, default=None, metavar="N",
                   help=f"{prefix}longest pause of the targets, in control periods (default {d.max_gap_ticks:g})")
    p.add_argument("--max-age-s", type=float, default=None, metavar="S",
                   help=f"{prefix}oldest state or frame at a tick [s] (default {d.max_age_s:g})")
    p.add_argument("--rate-tolerance", type=float, default=None, metavar="F",
                   help=f"{prefix}mean target period's allowed distance from the preset's rate, as a fraction "
                        f"(default {d.rate_tolerance:g})")


def mapping_with_tolerances(mapping: mcap_import.McapMapping, args: argparse.Namespace) -> mcap_import.McapMapping:
    """`mapping` with the tolerance flags given in `args` (ConfigError quoting a bad value)."""
    from dataclasses import replace

    given = {f: getattr(args, f) for f in mcap_import.TOLERANCE_FLAGS if getattr(args, f, None) is not None}
    return replace(mapping, **given) if given else mapping


def train_command(preset: str, out: str) -> str:
    """A `vam-stack train` line that runs as printed on the dataset just written: the preset's shipped
    training config (config/train_<preset>.yaml) on this dataset alone."""
    from pathlib import Path

    from vam_stack.paths import config_dir

    name = Path(str(preset)).stem
    cfg = config_dir() / f"train_{name}.yaml"
    shown = f"config/train_{name}.yaml" if (Path("config") / cfg.name).resolve() == cfg.resolve() else str(cfg)
    run = f"runs/{Path(out).name}_model"
    if not cfg.is_file():
        return (f"vam-stack train --config YOUR_CONFIG.yaml --dataset {out} --out {run}   (no shipped training config "
                f"for preset {preset!r}: docs/training.md)")
    return f"vam-stack train --config {shown} --dataset {out} --set extra_datasets=[] --out {run}"


def run(args: argparse.Namespace) -> int:
    contract = contract_for(args.preset)
    if args.format != "mcap" and any(getattr(args, f) is not None for f in mcap_import.TOLERANCE_FLAGS):
        raise ValueError("--max-gap-ticks / --max-age-s / --rate-tolerance are the MCAP import's timing checks; "
                         "--format lerobot has none")
    mapping = mapping_with_tolerances(mcap_import.load_mapping(args.mapping), args) if args.format == "mcap" else None
    with progress_bar(desc=f"import {args.format}", unit="episode") as bar:
        def progress(done: int, total: int) -> None:
            bar.total = total
            bar.n = done
            bar.refresh()

        if args.format == "lerobot":
            info = import_lerobot(args.source, contract, args.out, lerobot_v3.load_mapping(args.mapping),
                                  overwrite=args.overwrite, progress=progress, skip_bad=args.skip_bad)
        else:
            info = mcap_import.import_mcap(args.source, contract, args.out, mapping,
                                           overwrite=args.overwrite, progress=progress, task=args.task,
                                           skip_bad=args.skip_bad)
    src = info["imported_from"]
    for bad in src.get("skipped", []):
        print(f"skipped {bad.get('recording', bad.get('episode'))}: {bad['reason']}")
    h, w, _ = info["frame_shape"]
    print(f"wrote {args.out}: {info['total_episodes']} episodes, {info['total_frames']} steps at {args.preset}'s "
          f"geometry ({w}x{h} stacked frames, {info['fps']:g} Hz) from {src.get('format', args.format)} "
          f"{src.get('root', args.source)}" + (f", {len(src['skipped'])} skipped" if src.get("skipped") else ""))
    print(f"train with: {train_command(args.preset, args.out)}")
    return 0
