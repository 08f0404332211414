"""The ONNX graph cache the `onnxruntime` and `tensorrt` backends run from: exported once per
weights and model config, said before it happens, stoppable at any moment, checked at every load.

Layout (unchanged from the first cache): `<cache_dir>/onnx/<preset>-<weights hash>-<config hash>-<dtype>/`
for the DiT graphs and `<cache_dir>/onnx/<preset>-head-<head weights hash>-<config hash>/` for the
head's, each with `manifest.json` and one `<graph>.onnx` (+ `<graph>.onnx.data` for weights past
protobuf's 2 GB) per graph.

- Graph by graph: each graph is exported into `<graph>.partial-<pid>/` inside its directory, moved
  in, and only then entered in `manifest.json` (rewritten atomically, under a lock): a stop keeps
  every finished graph, and the next start exports only what is missing.
- Only the graphs the model needs: the DiT's velocity graph runs the solver steps before the
  exposed one, so a preset with `solver.feature_index` 0 needs no `dit_velocity`. Every guidance
  schedule (none, flat, tr_adaptive; the plan branch included) runs the same two DiT calls, so the
  guidance changes no graph: yam64 and libero64 need all four.
- Said before it happens: one line with the graphs, the directory and an estimate (this machine's
  own earlier export times, kept in `<cache_dir>/onnx/export_times.json`; else a guess scaled from
  yam64's on a 2-core CPU), then a line per graph with its time and what is left.
- Stoppable: with a checkpoint file to load from, the export runs in a child process
  (`python -m vam_model.onnx_cache`, which reloads the checkpoint and checks the weights hash) that
  the caller kills at once on SIGINT/SIGTERM (a KeyboardInterrupt in the waiting thread), removing
  its partial files. torch's exporter holds the GIL in long C calls, so the same export in the
  caller's own process stopped only after seconds (past launch's SIGTERM at 5 s). Partial folders
  of processes that no longer exist (a SIGKILL) are removed at the next start.
- Checked: a manifest that is not JSON (or not a manifest), a graph file missing, truncated, empty
  or replaced (size and sha256 against the manifest), or one onnxruntime cannot parse
  (`InvalidProtobuf`) is named in a log line and exported again. In a directory the user gave
  (`onnx_dir`) nothing is deleted: the error names the file and the fix.
"""
from __future__ import annotations

import contextlib
import ctypes
import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable

from .export import config_hash, export_graph, file_sha256, graph_jobs, load_model, manifest_header, weights_hash

DIT_GRAPHS = ("dit_velocity", "dit_features")
HEAD_GRAPHS = ("head_prefix", "head_step")
PARTIAL = re.compile(r"\.partial-(\d+)$")
TIMES_FILE = "export_times.json"
OTHER_MODEL_EXIT = 3          # the exporter child's exit code when the checkpoint is not the caller's model
# seconds per graph for yam64 (4 DiT blocks, 6 head layers) inside the policy node of the MuJoCo robot
# graph on a 2-core CPU at load ~7 (223 s for the four; `vam-stack export cache` alone: 37, 22, 12, 18 s);
# other presets scale by their block / layer counts until this machine has timed its own export
GUESS_S = {"dit_velocity": 90.0, "dit_features": 55.0, "head_prefix": 30.0, "head_step": 45.0}
GUESS_DEPTH = {"dit": 4, "head": 6}


class CacheError(ValueError):
    """A graph directory that cannot be used as it is; the message names the file and the fix."""


def needed_dit_graphs(cfg) -> tuple[str, ...]:
    """The DiT graphs a model runs: `dit_velocity` only when solver steps come before the exposed one."""
    return DIT_GRAPHS if cfg.solver.feature_index > 0 else ("dit_features",)


def graph_file(graph: str, dtype: str) -> str:
    return f"{graph}{'' if dtype == 'fp32' else '_' + dtype}"


# ---- the manifest and the graph files -----------------------------------------------------------
def read_manifest(d: Path) -> dict | None:
    """The directory's manifest, None when there is none; CacheError when it is not one."""
    path = d / "manifest.json"
    if not path.is_file():
        return None
    try:
        m = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as e:
        raise CacheError(f"{path} is damaged (not JSON: {e})") from None
    if not isinstance(m, dict) or not isinstance(m.setdefault("graphs", {}), dict):
        raise CacheError(f"{path} is damaged (not a graph manifest)")
    return m


def check_graph(d: Path, name: str, entry) -> str | None:
    """Why the graph `name` listed with `entry` cannot be used (missing, truncated, replaced), or None."""
    if not isinstance(entry, dict) or not isinstance(entry.get("file"), str):
        return f"its manifest entry {entry!r} is damaged"
    path = d / entry["file"]
    if not path.is_file():
        return f"{path} is missing"
    size = path.stat().st_size
    if size != entry.get("bytes"):
        return f"{path} has {size} bytes, the export wrote {entry.get('bytes')} (truncated or replaced)"
    if file_sha256(path)[:16] != entry.get("sha256"):
        return f"{path} is not the file the export wrote (sha256 differs)"
    if "data_bytes" in entry:
        data = path.with_name(path.name + ".data")
        if not data.is_file() or data.stat().st_size != entry["data_bytes"]:
            return f"{data} (the graph's weights) is missing or has another size than the export wrote"
    return None


@contextlib.contextmanager
def _locked(d: Path):
    d.mkdir(parents=True, exist_ok=True)
    with open(d / ".lock", "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _write_manifest(d: Path, m: dict) -> None:
    tmp = d / f"manifest.json.partial-{os.getpid()}"
    tmp.write_text(json.dumps(m, indent=2) + "\n")
    tmp.replace(d / "manifest.json")


def commit_graph(d: Path, name: str, tmp_dir: Path, entry: dict, header: dict) -> None:
    """Move a finished graph from its partial folder into `d` and enter it in the manifest (atomically)."""
    with _locked(d):
        try:
            m = read_manifest(d)
        except CacheError:
            m = None
        if m is None or any(m.get(k) != header.get(k) for k in ("preset", "weights_hash", "head_weights_hash",
                                                               "config_hash", "dtype")
                            if m.get(k) is not None and header.get(k) is not None):
            m = dict(header, graphs={})
        for f in sorted(tmp_dir.iterdir(), key=lambda p: p.suffix == ".onnx"):   # the weights before the graph
            f.replace(d / f.name)
        m["graphs"][name] = entry
        _write_manifest(d, m)
    shutil.rmtree(tmp_dir, ignore_errors=True)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_partials(d: Path, say: Callable[[str], None]) -> None:
    """Remove the partial files and folders of exports whose process no longer exists (in `d`, and
    the whole-directory partials of the first cache layout beside it)."""
    for where in (d, d.parent):
        if not where.is_dir():
            continue
        for p in where.iterdir():
            m = PARTIAL.search(p.name)
            if m and (where == d or p.name.startswith(d.name + ".")) and not _pid_alive(int(m.group(1))):
                say(f"[onnx] removing {p}: left by an export that was stopped (process {m.group(1)} is gone)")
                shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)


def remove_graph(d: Path, name: str, entry) -> None:
    with _locked(d):
        try:
            m = read_manifest(d)
        except CacheError:
            m = None
        if m is not None and name in m["graphs"]:
            del m["graphs"][name]
            _write_manifest(d, m)
        if isinstance(entry, dict) and isinstance(entry.get("file"), str):
            for f in (d / entry["file"], d / (entry["file"] + ".data")):
                f.unlink(missing_ok=True)


# ---- estimates ---------------------------------------------------------------------------------
def _times_path(d: Path) -> Path:
    return d.parent / TIMES_FILE


def estimate_s(d: Path, cfg, graph: str) -> tuple[float, bool]:
    """(seconds this graph's export is expected to take, measured on this machine?)."""
    try:
        seen = json.loads(_times_path(d).read_text())
        if isinstance(seen, dict) and isinstance(seen.get(f"{cfg.name}/{graph}"), (int, float)):
            return float(seen[f"{cfg.name}/{graph}"]), True
    except (OSError, ValueError):
        pass
    kind = "head" if graph.startswith("head") else "dit"
    depth = cfg.head.layers if kind == "head" else cfg.dit.layers
    base = graph.split("_fp")[0].split("_bf")[0]
    return GUESS_S.get(base, 40.0) * depth / GUESS_DEPTH[kind], False


def _note_time(d: Path, cfg, graph: str, seconds: float) -> None:
    path = _times_path(d)
    with _locked(d.parent):
        try:
            seen = json.loads(path.read_text())
            seen = seen if isinstance(seen, dict) else {}
        except (OSError, ValueError):
            seen = {}
        seen[f"{cfg.name}/{graph}"] = round(seconds, 1)
        tmp = path.with_name(f"{path.name}.partial-{os.getpid()}")
        tmp.write_text(json.dumps(seen, indent=2, sort_keys=True) + "\n")
        tmp.replace(path)


def _minutes(s: float) -> str:
    return f"{s:.0f} s" if s < 90 else f"{s / 60:.0f} min"


# ---- ensure ------------------------------------------------------------------------------------
def cache_dir_for(model, cfg, kind: str, dtype: str = "fp32") -> Path:
    base = Path(cfg.cache_dir).expanduser() / "onnx"
    chash = config_hash(model.cfg)
    if kind == "head":
        return base / f"{model.cfg.name}-head-{weights_hash(model.head)}-{chash}"
    return base / f"{model.cfg.name}-{weights_hash(model.dit)}-{chash}-{dtype}"


def _identity(model, kind: str, dtype: str) -> dict:
    ident = {"preset": model.cfg.name, "config_hash": config_hash(model.cfg)}
    if kind == "head":
        ident["head_weights_hash"] = weights_hash(model.head)
    else:
        ident["weights_hash"], ident["dtype"] = weights_hash(model.dit), dtype
    return ident


def check_identity(d: Path, m: dict, ident: dict) -> None:
    """The manifest's preset, weights hash and config hash are the model's (ValueError naming both)."""
    if m.get("preset") != ident["preset"]:
        raise ValueError(f"{d}: graphs are for preset {m.get('preset')!r}, the model is {ident['preset']!r}")
    for key, what in (("weights_hash", "weights"), ("head_weights_hash", "head weights")):
        if key in ident and m.get(key) != ident[key]:
            raise ValueError(f"{d}: graphs were exported from {what} {m.get(key)!r}, the model's are "
                             f"{ident[key]!r}; export again")
    if m.get("config_hash") != ident["config_hash"]:
        raise ValueError(f"{d}: graphs were exported for model config {m.get('config_hash')!r} (feature block "
                         f"{m.get('feature_block')!r}), the model's config is {ident['config_hash']!r}; export again")
    if "dtype" in ident and m.get("dtype") != ident["dtype"]:
        raise ValueError(f"{d}: graphs are {m.get('dtype')!r}, wanted {ident['dtype']!r}")


def ensure_graphs(model, cfg, kind: str, graphs: tuple[str, ...], dtype: str = "fp32",
                  progress: Callable[[str], None] = print, checkpoint: str | None = None) -> Path:
    """The directory holding `graphs` ("dit" or "head" kind) of `model`, exporting what is missing
    or damaged (see the module docstring). `cfg` is the backend's config (onnx_dir, cache_dir)."""
    return ensure_sets(model, cfg, [(kind, graphs, dtype)], progress, checkpoint)[0]


def ensure_sets(model, cfg, sets: list[tuple[str, tuple[str, ...], str]], progress: Callable[[str], None] = print,
                checkpoint: str | None = None) -> list[Path]:
    """`ensure_graphs` of several (kind, graphs, dtype) sets with one announcement and one exporter."""
    dirs, plans = [], []
    for kind, graphs, dtype in sets:
        d, todo = _plan(model, cfg, kind, graphs, dtype, progress)
        dirs.append(d)
        plans += [(kind, dtype, d, name) for name in todo]
    if plans:
        _export_missing(model, plans, progress, checkpoint)
    return dirs


def _plan(model, cfg, kind: str, graphs: tuple[str, ...], dtype: str, progress) -> tuple[Path, list[str]]:
    """(directory, the graph files still to export): the user's directory checked (never changed), the
    cache's repaired (stale partials, a damaged manifest or graph removed, each said in a line)."""
    names = [graph_file(g, dtype) if kind == "dit" else g for g in graphs]
    ident = _identity(model, kind, dtype)
    if cfg.onnx_dir is not None:
        d = Path(cfg.onnx_dir).expanduser()
        fix = f"export it again: vam-stack export onnx --checkpoint CHECKPOINT --out {d}"
        try:
            m = read_manifest(d)
        except CacheError as e:
            raise CacheError(f"{e}; {fix}") from None
        if m is None:
            raise FileNotFoundError(f"no manifest.json in {str(d)!r}: run `vam-stack export onnx --out {d}`")
        check_identity(d, m, ident)
        missing = [n for n in names if n not in m["graphs"]]
        if missing:
            hint = "without --no-head, or set backend.head_graphs false" if kind == "head" else "without --no-dit"
            raise FileNotFoundError(f"{d}: no {', '.join(missing)} graph (exported with --no-{kind}?); export again "
                                    f"{hint}")
        for n in names:
            why = check_graph(d, n, m["graphs"][n])
            if why:
                raise CacheError(f"{why}; {fix}")
        return d, []
    d = cache_dir_for(model, cfg, kind, dtype)
    sweep_partials(d, progress)
    try:
        m = read_manifest(d)
    except CacheError as e:
        progress(f"[onnx] {e}: removed; its graphs are exported again")
        shutil.rmtree(d, ignore_errors=True)
        m = None
    if m is not None:
        try:
            check_identity(d, m, ident)
        except ValueError as e:                 # the directory's name says what it holds: a hand-edited manifest
            progress(f"[onnx] {d / 'manifest.json'} does not match its directory ({e}): removed; exported again")
            shutil.rmtree(d, ignore_errors=True)
            m = None
    todo = []
    for n in names:
        entry = (m or {}).get("graphs", {}).get(n)
        if entry is None:
            todo.append(n)
            continue
        why = check_graph(d, n, entry)
        if why:
            progress(f"[onnx] {why}: exported again")
            remove_graph(d, n, entry)
            todo.append(n)
    return d, todo


def _export_missing(model, plans: list[tuple[str, str, Path, str]], progress, checkpoint) -> None:
    """Export each planned (kind, dtype, directory, graph): announced first, then a line per graph."""
    est = {(d, n): estimate_s(d, model.cfg, n) for _, _, d, n in plans}
    total = sum(s for s, _ in est.values())
    how = "measured on this machine" if all(seen for _, seen in est.values()) else \
        "a guess from yam64 in a loaded 2-core graph"
    progress(f"[onnx] {model.cfg.name}: exporting {len(plans)} ONNX graph(s) ({', '.join(n for *_, n in plans)}) "
             f"into {plans[0][2].parent} before the first replan: about {_minutes(total)} ({how}); once per "
             f"checkpoint; `vam-stack export cache` does it beforehand")
    state = {"left": total, "i": 0}

    def start(d: Path, name: str) -> None:
        progress(f"[onnx] {state['i'] + 1}/{len(plans)} {name}: exporting (about {_minutes(est[d, name][0])}) ...")

    def done(d: Path, name: str, seconds: float, size: int) -> None:
        state["i"] += 1
        state["left"] = max(0.0, state["left"] - est[d, name][0])
        _note_time(d, model.cfg, name, seconds)
        rest = f"; about {_minutes(state['left'])} left" if state["i"] < len(plans) else ""
        progress(f"[onnx] {state['i']}/{len(plans)} {name} done in {seconds:.1f} s ({size / 1e6:.1f} MB){rest}")

    if checkpoint and Path(checkpoint).is_file():
        try:
            return _export_in_child(model, plans, checkpoint, start, done)
        except _OtherModel as e:      # the model is not the checkpoint's as loaded (changed after the load)
            progress(f"[onnx] {e}: exporting in this process")
            plans = [p for p in plans if p[3] not in (read_manifest(p[2]) or {}).get("graphs", {})]
    _export_here(model, plans, checkpoint, start, done)


class _OtherModel(RuntimeError):
    pass


def _export_here(model, plans: list, checkpoint: str | None, start, done) -> None:
    jobs = {}
    for kind, dtype, d, name in plans:
        if (kind, dtype) not in jobs:
            jobs[kind, dtype] = graph_jobs(model, dtype, dit=kind == "dit", head=kind == "head")
        header = manifest_header(model, dtype, True, checkpoint, head=True)
        tmp = d / f"{name}.partial-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        start(d, name)
        try:
            entry = export_graph(jobs[kind, dtype][name], tmp / f"{name}.onnx")
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        commit_graph(d, name, tmp, entry, header)
        done(d, name, entry["export_s"], entry["bytes"])


def _export_in_child(model, plans: list, checkpoint: str, start, done) -> None:
    root = str(Path(__file__).resolve().parent.parent)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
    job = {"checkpoint": str(checkpoint),
           "expect": {f"{kind}:{dtype}": _identity(model, kind, dtype) for kind, dtype, _, _ in plans},
           "graphs": [[kind, dtype, str(d), n] for kind, dtype, d, n in plans]}
    argv = [sys.executable, "-m", "vam_model.onnx_cache", json.dumps(job)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            preexec_fn=_child_setup)
    errors: list[str] = []
    reader = threading.Thread(target=_relay, args=(proc, start, done), daemon=True)
    err_reader = threading.Thread(target=lambda: errors.extend(proc.stderr), daemon=True)
    reader.start()
    err_reader.start()
    try:
        while proc.poll() is None:
            time.sleep(0.05)                    # the waiting thread takes a signal at once
    except BaseException:
        proc.kill()                             # stopped: the exporter goes now, with its partial files
        proc.wait()
        for d in {p[2] for p in plans}:
            for leftover in d.glob(f"*.partial-{proc.pid}"):
                shutil.rmtree(leftover, ignore_errors=True) if leftover.is_dir() else leftover.unlink(missing_ok=True)
        raise
    reader.join(5.0)
    err_reader.join(5.0)
    tail = "".join(errors[-20:]).strip()
    if proc.returncode == OTHER_MODEL_EXIT:
        raise _OtherModel(tail.splitlines()[-1] if tail else "the checkpoint loads to another model")
    if proc.returncode != 0:
        raise RuntimeError(f"ONNX export of {', '.join(p[3] for p in plans)} failed (exit {proc.returncode}): "
                           f"{tail.splitlines()[-1] if tail else 'no message'}\n{tail}")


def _relay(proc, start, done) -> None:
    for line in proc.stdout:
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        if ev.get("event") == "start":
            start(Path(ev["dir"]), ev["graph"])
        elif ev.get("event") == "done":
            done(Path(ev["dir"]), ev["graph"], ev["export_s"], ev["bytes"])


def _child_setup() -> None:
    """In the exporter child: die with its parent (Linux PR_SET_PDEATHSIG, SIGKILL) and leave SIGINT
    to it (the parent decides and kills the child), at normal scheduling."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)   # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    with contextlib.suppress(OSError, AttributeError):
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))


def _worker(job: dict) -> int:
    """The exporter child: reload `job["checkpoint"]`, check it is the caller's model (`job["expect"]`,
    identity per "kind:dtype"), export each `job["graphs"]` entry [kind, dtype, directory, graph]
    (one JSON line on stdout per start and finish)."""
    model = load_model(None, job["checkpoint"])
    for key, want in job["expect"].items():
        kind, dtype = key.split(":")
        if _identity(model, kind, dtype) != want:
            print(f"the checkpoint {job['checkpoint']} loads to another model ({_identity(model, kind, dtype)}) "
                  f"than the caller's ({want}): not exported", file=sys.stderr)
            return OTHER_MODEL_EXIT
    jobs = {}
    for kind, dtype, d, name in job["graphs"]:
        d = Path(d)
        if (kind, dtype) not in jobs:
            jobs[kind, dtype] = graph_jobs(model, dtype, dit=kind == "dit", head=kind == "head")
        header = manifest_header(model, dtype, True, job["checkpoint"], head=True)
        tmp = d / f"{name}.partial-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        print(json.dumps({"event": "start", "dir": str(d), "graph": name}), flush=True)
        entry = export_graph(jobs[kind, dtype][name], tmp / f"{name}.onnx")
        commit_graph(d, name, tmp, entry, header)
        print(json.dumps({"event": "done", "dir": str(d), "graph": name, "export_s": entry["export_s"],
                          "bytes": entry["bytes"]}), flush=True)
    return 0


if __name__ == "__main__":          # python -m vam_model.onnx_cache JOB_JSON (started by _export_in_child)
    sys.exit(_worker(json.loads(sys.argv[1])))
