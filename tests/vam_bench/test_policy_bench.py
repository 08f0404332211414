"""`vam-stack bench policy` on the CPU (torch vs the whole policy in onnxruntime) and the GPU
check's stop path (it needs CUDA to measure, but a stop must still leave one whole JSON)."""
import json
import os
import signal

import pytest
import torch

from vam_cli.main import main

pytestmark = pytest.mark.slow


def test_policy_bench_times_backends_modes_and_batching(tmp_path, onnx_cache, capsys):
    out = tmp_path / "bench.json"
    rc = main(["bench", "policy", "--preset", "tiny", "--repeats", "1", "--device", "cpu", "--backend", "torch",
               "--backend", "onnxruntime", "--cache-dir", str(onnx_cache), "--json", str(out)])
    res = json.loads(out.read_text())
    assert rc == 0 and res["device"] == "cpu"
    b = res["backends"]
    assert b["onnxruntime"]["describe"]["head"] == "onnxruntime" and b["torch"]["describe"]["head"] == "torch"
    for backend in ("torch", "onnxruntime"):
        assert b[backend]["branches"]["gated_s0"] == ["cond"]
        assert b[backend]["branches"]["flat"] == ["cond", "null_text", "plan"]
        assert all(v > 0 for v in b[backend]["replan_ms"].values())
    assert set(res["onnxruntime_over_torch"]) == {"unguided", "gated_s0", "guided_s_max", "flat"}
    assert set(res["batched_over_unbatched"]) == {"guided_s_max", "flat"}
    assert set(res["rtc_over_plain"]) == {"guided", "trained"}
    for method in ("guided", "trained"):
        assert set(res["rtc_over_plain"][method]) == {"unguided", "flat"} and all(v > 0 for v in res["rtc_replan_ms"][method].values())
    st = res["stages_ms"]["flat"]
    assert st["video_cond+null_text"] > 0 and st["video_plan"] > 0 and st["euler"] > 0
    assert res["achieved"]["unguided_flop"] > 0 and "fraction_of_bf16_peak" not in res["achieved"]
    assert res["cache_speedup"] > 0
    printed = capsys.readouterr().out                     # every target printed with its verdict
    assert "with a committed chunk" in printed
    gated = b["torch"]["gated_over_unguided"]
    assert f"gated/unguided {gated} (target <= 1.1: {'MET' if gated <= 1.1 else 'MISSED'})" in printed
    assert "(target >= 5 on libero: not this preset)" in printed


def test_bench_refuses_a_device_it_cannot_time(tmp_path):
    with pytest.raises(SystemExit, match="meta"):
        main(["bench", "policy", "--preset", "tiny", "--device", "meta"])
    if not torch.cuda.is_available():
        with pytest.raises(SystemExit, match="no CUDA GPU"):
            main(["bench", "policy", "--preset", "tiny", "--device", "cuda"])


@pytest.mark.unit
def test_gpu_check_stopped_by_sigterm_leaves_what_it_measured(tmp_path, monkeypatch):
    import vam_bench.gpu_check as gc

    monkeypatch.setattr(gc.torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(gc.torch.cuda, "get_device_name", lambda *a: "NVIDIA H200")

    def fake_check(preset, *a, res, save, **kw):        # measures one stage, then the timeout's SIGTERM comes
        res["latency"] = {"tensorrt_velocity": {"median_ms": 1.0}}
        save()
        os.kill(os.getpid(), signal.SIGTERM)
        res["never"] = True
    monkeypatch.setattr(gc, "check_preset", fake_check)
    path = tmp_path / "gpu.json"
    before = signal.getsignal(signal.SIGTERM)
    rc = _run(gc, path)
    got = json.loads(path.read_text())
    assert rc == 1 and got["stopped"].startswith("SIGTERM") and got["parity_ok"] is False
    assert got["presets"]["real"]["latency"]["tensorrt_velocity"]["median_ms"] == 1.0
    assert "never" not in got["presets"]["real"] and "libero" not in got["presets"]
    assert signal.getsignal(signal.SIGTERM) is before                  # the check's handler is removed again


def _run(gc, path):
    import argparse

    p = argparse.ArgumentParser()
    gc.add_arguments(p)
    return gc.run(p.parse_args(["--json", str(path)]))


@pytest.mark.unit
def test_gpu_check_head_parity_and_episode_cost_on_the_cpu(tmp_path, micro_model):
    """The GPU check's head parity and episode measures, run here with onnxruntime on the CPU."""
    from vam_bench.gpu_check import episode_cost, head_parity
    from vam_model.backends import BackendConfig, make_backend

    ort = make_backend(BackendConfig(name="onnxruntime", device="cpu", cache_dir=str(tmp_path)), micro_model,
                       progress=lambda m: None)
    p = head_parity(micro_model, ort)
    assert p["head"] == "onnxruntime" and p["ok"], p
    assert p["velocity"]["cosine"] >= 0.9999 and p["keys"]["max_rel"] < 1e-4 and p["tr"]["max_rel"] < 1e-4
    e = episode_cost(micro_model, BackendConfig(), "cpu", replans=3)
    assert e["none"]["replans_with_guidance_branches"] == 0 and e["none"]["replans_with_s_gt_0"] == 0
    assert e["tr_adaptive"]["replans_with_s_gt_0"] == e["tr_adaptive"]["replans_with_guidance_branches"]
    assert e["tr_adaptive_over_none"] > 0 and e["none"]["total_ms"] > 0
