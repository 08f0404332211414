"""The `vam-stack` command: one entry point, subcommands loaded lazily from their packages.

Each subcommand module provides `add_arguments(parser)` and `run(args) -> int`.
"""
from __future__ import annotations

import argparse
import importlib
import sys

# name -> (module, one-line help). Modules are imported only when their command runs.
COMMANDS: dict[str, tuple[str, str]] = {
    "model-info": ("vam_policy_node.networks.info", "parameters, tokens, sigma grid and FLOPs of a preset"),
    "sim": ("libero_bridge.cli", "closed-loop episodes on the mocked LIBERO bridge (summary, TR plots, MCAP)"),
    "eval": ("libero_bridge.cli_eval", "success per task and suite, ID vs OOD, across guidance schedules"),
}

# `vam-stack bench NAME`: benchmarks that print numbers (never timed unit tests).
BENCHES: dict[str, tuple[str, str]] = {
    "policy": ("vam_policy_node.policy_bench", "replan latency: unguided vs TR-gated vs guided; prefix cache"),
    "executor": ("vam_policy_node.executor_bench", "30 Hz executor jitter with the tiny policy inferring"),
    "camera": ("camera_bridge.bench", "per-tick cost of read + sync + resize + stack, 3 cameras"),
    "driver": ("yam_driver.bench", "read + write of 14 motors per tick on each emulator"),
    "libero": ("libero_bridge.bench", "mocked LIBERO: physics step, each camera, full env step"),
}


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="vam-stack", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module, help_) in COMMANDS.items():
        p = sub.add_parser(name, help=help_)
        p.set_defaults(_module=module)
    if BENCHES:
        bench = sub.add_parser("bench", help="benchmarks: " + ", ".join(BENCHES))
        bsub = bench.add_subparsers(dest="bench", metavar="BENCH")
        for name, (module, help_) in BENCHES.items():
            p = bsub.add_parser(name, help=help_)
            p.set_defaults(_module=module)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = _build_parser()
    # First pass finds the subcommand; its module then adds its own arguments.
    args, _ = parser.parse_known_args(argv)
    module_name = getattr(args, "_module", None)
    if module_name is None:
        parser.print_help()
        return 2
    module = importlib.import_module(module_name)
    full = argparse.ArgumentParser(prog=f"vam-stack {' '.join(a for a in argv[:2] if not a.startswith('-'))}")
    module.add_arguments(full)
    rest = argv[2:] if args.command == "bench" else argv[1:]
    return int(module.run(full.parse_args(rest)) or 0)


if __name__ == "__main__":
    sys.exit(main())
