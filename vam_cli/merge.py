"""`vam-stack merge`: its command line; what a merge writes and checks is vam_data/merge.py."""
from __future__ import annotations

import argparse
from pathlib import Path

from vam_stack.progress import progress_bar

from vam_data.merge import merge_datasets


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("datasets", nargs="+", help="two or more dataset folders of this project, in the order wanted")
    p.add_argument("--out", required=True, help="new dataset folder (must not exist)")


def run(args: argparse.Namespace) -> int:
    out = Path(args.out)
    if out.exists():
        raise FileExistsError(f"--out {str(out)!r} exists; merge writes a new dataset")
    with progress_bar(desc="merge", unit="episode") as bar:
        def progress(done: int, total: int) -> None:
            bar.total, bar.n = total, done
            bar.refresh()

        info = merge_datasets(args.datasets, out, progress=progress)
    print(f"wrote {out}: {info['total_episodes']} episodes, {info['total_frames']} frames from "
          f"{[m['dataset'] for m in info['merged_from']]}; train with: vam-stack train --dataset {out} ...")
    return 0
