"""Writing outputs without losing earlier ones: output directories, atomic JSON, `--json PATH`.

One JSON encoder for the whole stack (`jsonable`: numpy arrays and scalars become lists and
numbers), used by the benchmarks' `--json`, run summaries and the JSON status messages.
"""
from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np


def jsonable(obj: Any) -> Any:
    """`json.dumps(default=jsonable)`: numpy arrays -> lists; numpy scalars, 0-d tensors -> numbers."""
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, (np.floating, np.integer, np.bool_)):
        return obj.item()
    if hasattr(obj, "__float__") and not isinstance(obj, (str, bytes)):   # a 0-d tensor, a Decimal
        return float(obj)
    raise TypeError(f"{type(obj).__name__} is not JSON serialisable")


def in_words(obj: Any, digits: int = 3) -> str:
    """A dict (nested ones too) or list as a line a person reads: `key value, key value`, numbers to
    `digits` significant digits (printed results were raw dicts of 17-digit floats)."""
    if isinstance(obj, dict):
        return ", ".join(f"{k} {in_words(v, digits)}" if not isinstance(v, dict) else f"{k} ({in_words(v, digits)})"
                         for k, v in obj.items())
    if isinstance(obj, (list, tuple)):
        return "[" + ", ".join(in_words(v, digits) for v in obj) + "]"
    if isinstance(obj, (bool, np.bool_)) or obj is None:
        return str(obj)
    if isinstance(obj, (int, np.integer)):
        return str(int(obj))
    if isinstance(obj, (float, np.floating)):
        return f"{float(obj):.{digits}g}"
    return str(obj)


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


def remove_empty_dirs(root: str | Path, keep_root: bool = True) -> bool:
    """Remove the empty directories under `root`, deepest first (a run interrupted before it had
    anything to keep leaves no empty folders that would make its rerun's `claim_out_dir` refuse),
    and `root` too when it ends up empty unless `keep_root`. Files are never touched. True when
    nothing is left under `root`."""
    root = Path(root)
    if not root.is_dir():
        return True
    for d in sorted((p for p in root.rglob("*") if p.is_dir() and not p.is_symlink()),
                    key=lambda p: len(p.parts), reverse=True):
        try:
            d.rmdir()                            # only succeeds on an empty directory
        except OSError:
            pass
    empty = not any(root.iterdir())
    if empty and not keep_root:
        root.rmdir()
    return empty


def claim_out_file(path: str | Path | None, overwrite: bool, flag: str = "--json") -> None:
    """Refuse (FileExistsError) a report file `path` that already exists unless `overwrite`, before
    the run starts (not after its minutes of work); None and '-' (stdout) pass."""
    if path is None or str(path) == "-":
        return
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"{flag} {str(path)!r} is a directory: give a file path")
    if path.exists() and not overwrite:
        raise FileExistsError(f"{flag} {str(path)!r} exists: an earlier run's results; pass --overwrite to "
                              f"replace it, or choose another path")


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


# where `write_json_output('-')` writes while `json_owns_stdout()` has lent stdout to stderr
_json_stdout: Any = None


@contextlib.contextmanager
def json_owns_stdout():
    """For `--json -`: while the command runs, everything it prints (progress, tables, the
    processes it starts) goes to stderr, and stdout carries only what `write_json_output('-')`
    writes, so `| python -m json.tool` (or jq) reads one JSON document."""
    global _json_stdout
    real = sys.stdout
    real.flush()
    saved_fd = None
    try:                                        # children inherit fd 1: point it at stderr too
        if real.fileno() == 1:
            saved_fd = os.dup(1)
            sys.stderr.flush()
            os.dup2(sys.stderr.fileno(), 1)
    except (AttributeError, OSError, ValueError):   # a test's capture object has no real fd
        saved_fd = None
    target = os.fdopen(os.dup(saved_fd), "w") if saved_fd is not None else real
    _json_stdout = target
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        _json_stdout = None
        sys.stderr.flush()
        if saved_fd is not None:
            target.close()
            os.dup2(saved_fd, 1)
            os.close(saved_fd)


# what `write_json_output` adds to a benchmark's JSON while `json_machine()` lends it (vam_bench.machine)
_json_machine: Any = None


@contextlib.contextmanager
def json_machine(snapshot):
    """Within the block, every dict `write_json_output` writes gets `machine: snapshot()` (the load and host
    freezes a benchmark ran under), unless it carries one already."""
    global _json_machine
    _json_machine = snapshot
    try:
        yield
    finally:
        _json_machine = None


def write_json_output(path: str | Path, obj: Any) -> None:
    """A benchmark's `--json PATH`: '-' prints the JSON to stdout (the real one while
    `json_owns_stdout()` holds it); a path gets its parent directories and an atomic write, and
    the path is printed. Under `json_machine` a dict gets the machine's `machine` record."""
    if _json_machine is not None and isinstance(obj, dict) and "machine" not in obj:
        obj = obj | {"machine": _json_machine()}
    if str(path) == "-":
        out = _json_stdout if _json_stdout is not None else sys.stdout
        out.write(json.dumps(obj, indent=2, default=jsonable) + "\n")
        out.flush()
        return
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, json.loads(json.dumps(obj, default=jsonable)))
    print(f"wrote {path}")
