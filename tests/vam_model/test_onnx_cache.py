"""The ONNX graph cache (vam_model/onnx_cache.py) an onnxruntime policy starts from: the export said
before it runs (graphs, estimate, progress), only the graphs the model runs, a stop at any moment
prompt and clean with finished graphs kept (issue 67 rows 1-2), a damaged cache found and rebuilt or
named with the fix, and `backend: auto` without onnxruntime (issue 71 row 6).

The micro model (the tiny networks on 64x64 views) exports each graph in 10-50 s here."""
from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from vam_model.backends import NO_ORT, BackendConfig, auto_backend, make_backend, parity
from vam_model.export import example_inputs
from vam_model.onnx_cache import DIT_GRAPHS, CacheError, _plan, needed_dit_graphs, read_manifest

pytestmark = [pytest.mark.slow]


def ort_cfg(cache: Path, **kw) -> BackendConfig:
    return BackendConfig(name="onnxruntime", cache_dir=str(cache), **kw)


@pytest.fixture(scope="module")
def micro_checkpoint(micro_model, micro_cfg, tmp_path_factory) -> Path:
    from vam_model.networks.checkpoint import save_checkpoint

    return save_checkpoint(tmp_path_factory.mktemp("ckpt") / "micro.safetensors", micro_model, micro_cfg)


@pytest.fixture(scope="module")
def dit_cache(micro_model, micro_checkpoint, tmp_path_factory):
    """The DiT graphs of the micro model exported once, in a child process from the checkpoint, with the
    lines the operator sees."""
    cache = tmp_path_factory.mktemp("cache")
    lines: list[str] = []
    backend = make_backend(ort_cfg(cache, head_graphs=False), micro_model, progress=lines.append,
                           checkpoint=str(micro_checkpoint))
    return cache, backend, lines


def test_the_export_is_announced_with_its_graphs_and_an_estimate_then_each_graph_with_its_time(dit_cache):
    _, backend, lines = dit_cache
    first = lines[0]
    assert "exporting 2 ONNX graph(s) (dit_velocity, dit_features)" in first and "before the first replan" in first
    assert "about " in first and "`vam-stack export cache` does it beforehand" in first, first
    assert any("1/2 dit_velocity: exporting (about" in x for x in lines), lines
    done = [x for x in lines if " done in " in x]
    assert len(done) == 2 and "about" in done[0] and " left" in done[0], done
    assert backend.describe()["head"] == "torch"


def test_only_the_graphs_the_model_runs_are_exported(micro_cfg):
    assert needed_dit_graphs(micro_cfg) == DIT_GRAPHS                  # solver steps before the exposed one
    first = dataclasses.replace(micro_cfg, solver=dataclasses.replace(micro_cfg.solver, feature_index=0))
    assert needed_dit_graphs(first) == ("dit_features",)               # features at the first step: no velocity


def test_the_onnx_graphs_match_torch(dit_cache, micro_model):
    _, backend, _ = dit_cache
    ex = example_inputs(micro_model.cfg, batch=1)
    args = (ex["x"], ex["mask"], ex["sigma_frames"], ex["text"])
    with torch.no_grad():
        p = parity(backend.features(*args), micro_model.dit.features(*args))
    assert p["cosine"] > 0.9999, p


def _damaged_copy(cache: Path, where: Path, damage: str) -> Path:
    """A copy of the module's DiT graph directory (which stays good) under `where`/onnx, damaged."""
    d = next(p for p in (cache / "onnx").iterdir() if p.is_dir() and "-head-" not in p.name)
    copy = where / "onnx" / d.name
    copy.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cp", "-r", str(d), str(copy)], check=True)
    graph = copy / "dit_features.onnx"
    if damage == "truncated":
        graph.write_bytes(graph.read_bytes()[:1000])
    elif damage == "empty":
        graph.write_bytes(b"")
    elif damage == "random":
        graph.write_bytes(os.urandom(graph.stat().st_size))   # same size: the sha256 finds it
    else:
        (copy / "manifest.json").write_text('{"preset": "micro", "graphs": {')
    return copy


@pytest.mark.parametrize("damage", ["truncated", "empty", "random", "manifest"])
def test_a_damaged_cache_is_named_and_its_graphs_exported_again(dit_cache, micro_model, damage, tmp_path):
    cache, _, _ = dit_cache
    copy = _damaged_copy(cache, tmp_path / "cache", damage)
    said: list[str] = []
    _, todo = _plan(micro_model, ort_cfg(tmp_path / "cache"), "dit", DIT_GRAPHS, "fp32", said.append)
    if damage == "manifest":
        assert todo == list(DIT_GRAPHS) and "manifest.json is damaged (not JSON" in said[0], said
        assert not copy.exists()                            # removed: exported again from scratch
    else:
        assert todo == ["dit_features"], todo                # the good graph is kept
        assert str(copy / "dit_features.onnx") in said[0] and said[0].endswith("exported again"), said
    # a directory the user gave is never changed: the error names the file and the fix
    mine = _damaged_copy(cache, tmp_path / "mine", damage)
    with pytest.raises(CacheError, match=("manifest.json" if damage == "manifest" else "dit_features.onnx")
                       + ".*vam-stack export onnx"):
        _plan(micro_model, BackendConfig(name="onnxruntime", onnx_dir=str(mine)), "dit", DIT_GRAPHS, "fp32",
              said.append)
    assert (mine / "manifest.json").is_file() and (mine / "dit_features.onnx").is_file()     # nothing deleted


def test_a_graph_onnxruntime_cannot_load_is_exported_again(dit_cache, micro_model, tmp_path):
    """Damage the sha256 and size cannot see (a manifest rewritten for a broken file): onnxruntime's
    InvalidProtobuf names the file, and the cache exports that graph again."""
    from vam_model.export import file_sha256

    cache, _, _ = dit_cache
    d = next(p for p in (cache / "onnx").iterdir() if p.is_dir() and "-head-" not in p.name)
    copy = tmp_path / "onnx" / d.name
    copy.parent.mkdir(parents=True)
    subprocess.run(["cp", "-r", str(d), str(copy)], check=True)
    bad = copy / "dit_velocity.onnx"
    bad.write_bytes(b"\x08\x07" + os.urandom(500))
    m = read_manifest(copy)
    m["graphs"]["dit_velocity"].update(bytes=bad.stat().st_size, sha256=file_sha256(bad)[:16])
    (copy / "manifest.json").write_text(json.dumps(m))
    lines: list[str] = []
    backend = make_backend(ort_cfg(tmp_path, head_graphs=False), micro_model, progress=lines.append)
    assert any("onnxruntime cannot load it" in x and "dit_velocity.onnx" in x for x in lines), lines
    assert any("1/1 dit_velocity done" in x for x in lines), lines
    ex = example_inputs(micro_model.cfg, batch=1)
    args = (ex["x"], ex["mask"], ex["sigma_frames"], ex["text"])
    with torch.no_grad():
        assert parity(backend.velocity(*args), micro_model.dit.velocity(*args))["cosine"] > 0.9999


STOP_PROBE = r"""
import signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)   # a terminal's Ctrl-C, also when started from a
                                                           # background job (which starts with SIGINT ignored)
from vam_model.backends import BackendConfig, make_backend
from vam_model.export import load_model
model = load_model(None, sys.argv[1])
try:
    make_backend(BackendConfig(name="onnxruntime", cache_dir=sys.argv[2]), model,
                 progress=lambda line: print(line, flush=True), checkpoint=sys.argv[1])
except KeyboardInterrupt:
    print(f"stopped {time.monotonic():.3f}", flush=True)
    import os
    os._exit(0)                        # as a node process ends (vam_stack/process_exit.py)
print("finished", flush=True)
"""


def test_a_stop_during_the_export_is_prompt_leaves_no_partial_file_and_keeps_finished_graphs(
        micro_checkpoint, micro_model, tmp_path):
    """Ctrl-C in the middle of the second graph (issue 67 row 2: the policy node was still exporting
    at launch's SIGTERM 5 s later, `*.partial-<pid>` folders stayed, the next launch started over)."""
    script = tmp_path / "probe.py"
    script.write_text(STOP_PROBE)
    cache = tmp_path / "cache"
    p = subprocess.Popen([sys.executable, str(script), str(micro_checkpoint), str(cache)], stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, env=dict(os.environ))
    out = []
    for line in p.stdout:
        out.append(line)
        if "2/4 dit_features: exporting" in line:
            break
    assert p.poll() is None, out
    time.sleep(3.0)                                         # inside torch's exporter
    sent = time.monotonic()
    p.send_signal(signal.SIGINT)
    rest, _ = p.communicate(timeout=60)
    stopped_at = [float(x.split()[1]) for x in rest.splitlines() if x.startswith("stopped ")]
    took = (stopped_at[0] if stopped_at else time.monotonic()) - sent   # the exporter killed, its files removed
    out.append(rest)
    assert p.returncode == 0 and "stopped" in rest, "".join(out)
    assert took < 3.0, f"the stop took {took:.1f} s"
    leftovers = [str(x) for x in cache.rglob("*partial*")]
    assert not leftovers, leftovers
    time.sleep(0.5)
    assert not [x for x in os.popen("ps -eo args").read().splitlines() if "vam_model.onnx_cache" in x
                and str(cache) in x], "the exporter child outlived the stop"
    d = next(x for x in (cache / "onnx").iterdir() if x.is_dir() and "-head-" not in x.name)
    assert list(read_manifest(d)["graphs"]) == ["dit_velocity"]          # the finished graph is kept
    _, todo = _plan(micro_model, ort_cfg(cache), "dit", DIT_GRAPHS, "fp32", print)
    assert todo == ["dit_features"]                                       # the next start exports the rest


def test_backend_auto_without_onnxruntime_runs_torch_and_says_what_to_install_in_one_line(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "onnxruntime" else real(name, *a))
    said: list[str] = []
    assert auto_backend("cpu", said.append) == "torch"
    assert said == [NO_ORT] and "\n" not in NO_ORT
    assert "pip install onnxruntime" in NO_ORT and "backend:=torch" in NO_ORT
    assert auto_backend("cuda", said.append) == "torch" and len(said) == 1
    from vam_policy_node.params import resolve_backend

    assert resolve_backend("auto", "cpu", said.append) == "torch" and len(said) == 2
    monkeypatch.setattr(importlib.util, "find_spec", real)
    assert auto_backend("cpu", said.append) == "onnxruntime"


def test_backend_onnxruntime_without_the_package_names_the_package_and_the_alternative(monkeypatch, micro_model):
    from vam_model.backends import BackendUnavailable

    monkeypatch.setitem(sys.modules, "onnxruntime", None)              # import fails as where it is absent
    with pytest.raises(BackendUnavailable) as e:
        make_backend(BackendConfig(name="onnxruntime"), micro_model)
    assert "pip install onnxruntime" in str(e.value) and "backend:=torch" in str(e.value)
    assert "\n" not in str(e.value)
