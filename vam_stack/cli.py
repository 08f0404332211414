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
    "collect": ("vam_policy_node.training.collect", "scripted-expert demonstrations into a dataset on disk"),
    "train": ("vam_policy_node.training.train", "train the video-action model (joint or two-stage)"),
    "tr-study": ("vam_policy_node.training.tr_study", "TR of a trained model by expert phase and against sigma_v"),
    "export": ("vam_policy_node.export", "export the DiT feature extractor / head to ONNX"),
    "libero-check": ("libero_real.check", "compare the mocked LIBERO bridge's conventions with real LIBERO's"),
}

# `vam-stack bench NAME`: benchmarks that print numbers (never timed unit tests).
BENCHES: dict[str, tuple[str, str]] = {
    "policy": ("vam_policy_node.policy_bench", "replan latency: unguided vs TR-gated vs guided; prefix cache"),
    "executor": ("vam_policy_node.executor_bench", "30 Hz executor jitter with the tiny policy inferring"),
    "camera": ("camera_bridge.bench", "per-tick cost of read + sync + resize + stack, 3 cameras"),
    "driver": ("yam_driver.bench", "read + write of 14 motors per tick on each emulator"),
    "libero": ("libero_bridge.bench", "mocked LIBERO: physics step, each camera, full env step"),
    "backends": ("vam_policy_node.backends.bench", "feature-extractor latency and parity per backend"),
    "yam-mujoco": ("yam_mujoco.bench", "simulated YAM: physics and three-view render time per 30 Hz tick"),
    "all": ("vam_stack.bench_all", "every benchmark in one run, one JSON"),
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


def _resolve(argv: list[str]) -> tuple[str | None, str, list[str]]:
    """(module, prog, remaining args) for `COMMAND ...` or `bench NAME ...`; module None if unknown."""
    if argv and argv[0] in COMMANDS:
        return COMMANDS[argv[0]][0], f"vam-stack {argv[0]}", argv[1:]
    if len(argv) >= 2 and argv[0] == "bench" and argv[1] in BENCHES:
        return BENCHES[argv[1]][0], f"vam-stack bench {argv[1]}", argv[2:]
    return None, "vam-stack", argv


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    module_name, prog, rest = _resolve(argv)
    if module_name is None:
        # unknown or missing command: argparse prints usage/help (or the error) and exits
        parser = _build_parser()
        args = parser.parse_args(argv)
        if getattr(args, "_module", None) is None:
            parser.print_help()
            return 2
    module = importlib.import_module(module_name)
    full = argparse.ArgumentParser(prog=prog, description=(module.__doc__ or "").strip().splitlines()[0])
    module.add_arguments(full)
    return int(module.run(full.parse_args(rest)) or 0)


if __name__ == "__main__":
    sys.exit(main())
