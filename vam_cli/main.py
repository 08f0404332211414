"""The `vam-stack` command: one entry point, subcommands loaded lazily from their packages.

Each subcommand module provides `add_arguments(parser)` and `run(args) -> int`. `main(argv)`
raises whatever the command raises (for programmatic callers and tests); the console script
runs `entry()`, which prints a user's mistake as one line and exits 2 (see `entry`).
"""
from __future__ import annotations

import argparse
import importlib
import os
import re
import sys

# name -> (module, one-line help). Modules are imported only when their command runs.
COMMANDS: dict[str, tuple[str, str]] = {
    "model-info": ("vam_cli.model_info", "parameters, tokens, sigma grid and FLOPs of a preset"),
    "sim": ("vam_sim.cli", "closed-loop episodes: mocked LIBERO, real LIBERO or the MuJoCo YAM (summary, TR plots, MCAP)"),
    "eval": ("vam_sim.cli_eval", "success per task and suite, ID vs OOD, across guidance schedules"),
    "collect": ("vam_cli.collect", "scripted-expert demonstrations (mocked LIBERO or the MuJoCo YAM) into a "
                                   "dataset on disk"),
    "train": ("vam_cli.train", "train the video-action model (joint or two-stage)"),
    "tr-study": ("vam_experiments.tr_study", "TR of a trained model by expert phase and against sigma_v"),
    "tr-block": ("vam_experiments.tr_block", "TR by phase against the feature block k and sigma_v: table and figure"),
    "tr-phase": ("vam_experiments.tr_phase", "why TR differs by phase: covariates of each state and a feature-swap test"),
    "paper-study": ("vam_experiments.paper_study", "the paper's study at small scale: video prior, LoRA vs full, "
                                                   "guidance ID/OOD"),
    "compare": ("vam_experiments.compare", "two arms' eval results paired episode by episode: paired interval, "
                                           "McNemar's exact test, verdict"),
    "export": ("vam_cli.export", "export the DiT feature extractor / head to ONNX"),
    "libero-check": ("vam_sim.libero_real.check", "compare the mocked LIBERO bridge's conventions with real LIBERO's"),
    "foundation": ("vam_cli.foundation", "import the public Cosmos-Predict2.5 DiT and Wan VAE (and pi0's expert) "
                                         "into a checkpoint to train from"),
    "checkpoint": ("vam_cli.checkpoint", "verify a checkpoint's tensor hash, or add it to a trusted one"),
    "ros-eval": ("vam_experiments.ros_eval", "episodes of the simulated YAM through the ROS graph as processes "
                                             "(success with its 95 % interval)"),
    "record": ("vam_cli.record", "demonstrations of the simulated YAM through the ROS graph (scripted teleoperator, "
                                 "demo_recorder) into MCAP, one file per episode"),
    "import": ("vam_cli.data_import", "LeRobotDataset v3 or MCAP recordings into a training set at a preset's "
                                      "geometry (checked by name, range, rate and view)"),
    "merge": ("vam_cli.merge", "several datasets into one training set (statistics recomputed, sources checked "
                               "to agree)"),
    "export-lerobot": ("vam_cli.export_lerobot", "a dataset as LeRobotDataset v3.0 (parquet + AV1 or lossless video)"),
    "ros-graph": ("vam_stack.process_graph", "start a launch file's nodes as processes, as `ros2 launch` would "
                                             "(for machines without launch)"),
    "leader": ("yam_leader.cli", "the leader arm: calibrate its offsets (and trigger ends) at the follower's pose"),
    "joints": ("yam_leader.joints", "each joint read with torque off: id, position, the sign of each hand motion"),
}

# `vam-stack bench NAME`: benchmarks that print numbers (never timed unit tests).
BENCHES: dict[str, tuple[str, str]] = {
    "policy": ("vam_bench.policy", "replan latency: unguided vs TR-gated vs guided; prefix cache"),
    "executor": ("vam_bench.executor", "30 Hz executor jitter with the tiny policy inferring"),
    "camera": ("vam_bench.camera", "per-tick cost of read + sync + resize + stack, 3 cameras"),
    "driver": ("vam_bench.driver", "read + write of 14 motors per tick on each emulator"),
    "libero": ("vam_bench.libero", "mocked LIBERO: physics step, each camera, full env step"),
    "eval": ("vam_bench.eval", "closed-loop evaluation throughput: episodes per minute, torch vs onnxruntime, "
                               "one process vs worker processes"),
    "backends": ("vam_bench.backends", "feature-extractor latency and parity per backend"),
    "yam-mujoco": ("vam_bench.yam_mujoco", "simulated YAM: physics and three-view render time per 30 Hz tick"),
    "ros": ("vam_bench.ros_graph", "the ROS graph over DDS between processes: camera->policy latency and drops, "
                                   "target jitter and missed ticks, e-stop latency"),
    "foundation": ("vam_bench.foundation", "time and peak memory of the foundation import at full size "
                                           "(writes ~14 GB of files)"),
    "all": ("vam_bench.run_all", "every benchmark in one run, one JSON"),
}


DEBUG_HELP = ("a mistake in a command line or config file prints one line and exits 2; --debug "
              "(anywhere on the line) or VAM_STACK_DEBUG=1 shows the traceback instead")


class OneLineParser(argparse.ArgumentParser):
    """argparse's parser with its mistakes in one line: `<prog>: error: <message> (<prog> --help for the
    rest)`, exit 2, as every other mistake of the command line prints (argparse printed its whole usage
    block first: 17 lines for `sim`). `--help` still prints everything. Its sub-parsers are of this class."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {_one_line(message)} ({self.prog} --help for the rest)\n")


def _build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="vam-stack", description=__doc__.splitlines()[0], epilog=DEBUG_HELP)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module, help_) in COMMANDS.items():
        p = sub.add_parser(name, help=_literal(help_))
        p.set_defaults(_module=module)
    if BENCHES:
        bench = sub.add_parser("bench", help="benchmarks: " + ", ".join(BENCHES))
        bsub = bench.add_subparsers(dest="bench", metavar="BENCH")
        for name, (module, help_) in BENCHES.items():
            p = bsub.add_parser(name, help=_literal(help_))
            p.set_defaults(_module=module)
    return parser


def _summary(argv: list[str]) -> str:
    """A command's --help description: its line of the command table, as `vam-stack --help` shows it
    (a module docstring's first line was cut mid-sentence, or read "Entry module for ...")."""
    if argv and argv[0] in COMMANDS:
        text = COMMANDS[argv[0]][1]
    else:
        text = BENCHES[argv[1]][1]
    return text[:1].upper() + text[1:] + "."


def _literal(text: str) -> str:
    """A help text as argparse prints it literally: argparse reads `%` as a format (`95 % interval`
    raised a TypeError from `vam-stack --help`), so every `%` is doubled."""
    return text.replace("%", "%%")


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
    full = OneLineParser(prog=prog, description=_summary(argv))
    module.add_arguments(full)
    from vam_stack.outputs import claim_out_file
    opts = full._option_string_actions
    files = [f for f in ("--json", "--markdown") if f in opts and opts[f].nargs != 0]   # report files, not switches
    if files and "--overwrite" not in opts:
        full.add_argument("--overwrite", action="store_true", help=f"let {' / '.join(files)} replace an existing file")
    args = full.parse_args(rest)
    for f in files:              # an earlier run's report is never replaced by accident
        claim_out_file(getattr(args, f[2:]), args.overwrite, flag=f)
    if "--json" in files and str(getattr(args, "json", None)) == "-":
        from vam_stack.outputs import json_owns_stdout
        with json_owns_stdout():     # stdout: the JSON alone; progress and tables: stderr
            return _run(module, args, bench=argv[0] == "bench")
    return _run(module, args, bench=argv[0] == "bench")


def _run(module, args, bench: bool) -> int:
    """A command's `run(args)`; a benchmark's inside a `MachineWatch`, whose record (load, host freezes)
    every JSON it writes carries and whose line closes its output."""
    if not bench:
        return int(module.run(args) or 0)
    from vam_bench.machine import MachineWatch
    from vam_stack.outputs import json_machine

    with MachineWatch() as watch, json_machine(watch.snapshot):
        code = int(module.run(args) or 0)
        print(watch.line(), flush=True)
    return code


# what a user's mistake raises: a bad value (ConfigError is a ValueError) or a bad path
USER_ERRORS = (ValueError, FileNotFoundError, FileExistsError, IsADirectoryError, NotADirectoryError,
               PermissionError)


def entry(argv: list[str] | None = None) -> int:
    """The console script: `main(argv)` with a user's mistake (`USER_ERRORS`, or a command's
    `SystemExit("message")`) printed as `vam-stack <command>: error: <message>` on stderr,
    exit 2, and an interrupt as one line, exit 130. `--debug` anywhere in `argv` (removed before
    the command parses it) or VAM_STACK_DEBUG=1 re-raises instead, traceback included."""
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv or os.environ.get("VAM_STACK_DEBUG", "").strip() not in ("", "0")
    argv = [a for a in argv if a != "--debug"]
    prog = _resolve(argv)[1]
    try:
        return main(argv)
    except USER_ERRORS as e:
        if debug:
            raise
        print(f"{prog}: error: {_one_line(e)}", file=sys.stderr)
        return 2
    except SystemExit as e:
        if debug or not isinstance(e.code, str):
            raise
        print(f"{prog}: error: {_one_line(e.code)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        if debug:
            raise
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130


def _one_line(e: BaseException | str) -> str:
    text = e if isinstance(e, str) else (str(e) or type(e).__name__)
    return re.sub(r"\s*\n\s*", " ", text).strip()


if __name__ == "__main__":
    sys.exit(entry())
