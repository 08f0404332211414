"""`vam-stack checkpoint`: add the integrity hash to trusted checkpoints, or verify it (also
`python -m vam_cli.checkpoint ACTION FILE...`); the hashes and checks are vam_model/networks/checkpoint.py."""
from __future__ import annotations

import argparse
import sys

from vam_model.networks.checkpoint import HASH_KEY, CheckpointError, add_hash, verify_checkpoint


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    a = sub.add_parser("add-hash", help="add the tensor integrity hash to trusted checkpoints (metadata only)")
    a.add_argument("files", nargs="+", help=".safetensors checkpoints")
    a.add_argument("--force", action="store_true",
                   help="replace a stored hash that does not match the tensors (only if you trust them)")
    v = sub.add_parser("verify", help="check a checkpoint's metadata and integrity hash")
    v.add_argument("files", nargs="+", help=".safetensors checkpoints")


def run(args: argparse.Namespace) -> int:
    status = 0
    for f in args.files:
        try:
            if args.action == "add-hash":
                digest, changed = add_hash(f, force=args.force)
                print(f"{f}: {HASH_KEY} {digest} ({'added' if changed else 'already present'})")
            else:
                print(f"{f}: ok, {HASH_KEY} {verify_checkpoint(f)}")
        except CheckpointError as e:
            print(f"error: {e}", file=sys.stderr)
            status = 1
    return status


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m vam_cli.checkpoint",
                                description="checkpoint integrity hash: add it to trusted files, verify it")
    add_arguments(p)
    return run(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
