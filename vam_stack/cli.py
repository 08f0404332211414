"""The `vam-stack` command: one entry point, subcommands loaded lazily from their packages.

Each subcommand module provides `add_arguments(parser)` and `run(args) -> int`. `main(argv)`
raises whatever the command raises (for programmatic callers and tests); the console script
runs `entry()`, which prints a user's mistake as one line and exits 2 (see `entry`).
Helpers for commands that write an output directory: `claim_out_dir`, `write_json_atomic`.
"""
from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

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
    "checkpoint": ("vam_policy_node.networks.checkpoint", "verify a checkpoint's tensor hash, or add it to a trusted one"),
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


DEBUG_HELP = ("a mistake in a command line or config file prints one line and exits 2; --debug "
              "(anywhere on the line) or VAM_STACK_DEBUG=1 shows the traceback instead")


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="vam-stack", description=__doc__.splitlines()[0], epilog=DEBUG_HELP)
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


# ---- output directories ------------------------------------------------------------------------
def claim_out_dir(out: str | Path, overwrite: bool, flag: str = "--out") -> Path:
    """Refuse (FileExistsError, naming what is there) to write into a non-empty `out` unless
    `overwrite`: a run never replaces an earlier run's files by accident. Creates nothing, so
    call it first and create the directory after every other check has passed."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(f"{flag} {str(out)!r} is a file, not a directory")
    if out.is_dir() and not overwrite:
        names = sorted(p.name for p in out.iterdir())
        if names:
            shown = ", ".join(names[:4]) + (f", ... ({len(names)} entries)" if len(names) > 4 else "")
            raise FileExistsError(f"{flag} {str(out)!r} is not empty ({shown}): an earlier run's output; "
                                  f"pass --overwrite to write over it, or choose another directory")
    return out


def write_json_atomic(path: str | Path, obj: Any) -> Path:
    """Write `obj` as indented JSON to `path` through a temporary file and `os.replace`, so a
    reader (or a crash) sees the old file or the new one, never half of one."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with tmp.open("w") as f:
            f.write(json.dumps(obj, indent=2) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def write_json_output(path: str | Path, obj: Any) -> None:
    """A benchmark's `--json PATH`: '-' prints the JSON to stdout; a path gets its parent
    directories and an atomic write, and the path is printed."""
    if str(path) == "-":
        print(json.dumps(obj, indent=2, default=float))
        return
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, json.loads(json.dumps(obj, default=float)))
    print(f"wrote {path}")


if __name__ == "__main__":
    sys.exit(entry())
