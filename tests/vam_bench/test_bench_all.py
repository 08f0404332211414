"""`vam-stack bench all --quick` writes one complete JSON (every section present, none failed)."""
import json

import pytest

from vam_cli.main import main

SECTIONS = ("model_info", "replan", "head", "backends", "camera", "executor", "driver", "libero")


@pytest.mark.sim
@pytest.mark.slow
def test_bench_all_quick_writes_complete_json(tmp_path, capsys, onnx_cache):
    out = tmp_path / "bench.json"
    rc = main(["bench", "all", "--quick", "--preset", "tiny", "--cache-dir", str(onnx_cache),
               "--json", str(out)])
    res = json.loads(out.read_text())
    failed = {k: v.get("error") for k, v in res.items() if isinstance(v, dict) and "error" in v}
    assert rc == 0 and not failed, failed
    for name in SECTIONS:
        assert name in res and res[name]["wall_s"] >= 0, name
    rep = res["replan"]
    assert set(rep["stages"]) == {"unguided", "gated_s0", "guided_s_max", "flat"}
    unguided = rep["stages"]["unguided"]
    for stage in ("encode", "video_cond", "prefix_cond", "euler", "tr", "guidance", "total"):
        assert unguided[stage]["median_ms"] > 0 and unguided[stage]["p90_ms"] >= unguided[stage]["median_ms"], stage
    assert "video_null_text" in rep["stages"]["guided_s_max"] and "video_plan" in rep["stages"]["guided_s_max"]
    assert "video_null_text" not in rep["stages"]["gated_s0"]            # s = 0 gates the extra branches off
    assert res["head"]["cached"]["median_ms"] > 0 and res["head"]["cache_speedup"] > 0
    b = res["backends"]["backends"]
    assert {"torch", "onnxruntime"} <= set(b) and res["backends"]["parity_ok"]
    assert b["onnxruntime"]["parity_velocity"]["cosine"] >= 0.999
    assert res["achieved"]["video_pass_gflop_s"] > 0 and res["achieved"]["replan_flop"] > 0
    assert res["peak_memory"]["max_rss_mb"] > 0
    assert res["executor"]["rc"] == 0 and "p99_jitter_ms" in res["executor"]
    assert res["camera"]["rc"] == 0 and res["driver"]["rc"] == 0 and res["libero"]["rc"] == 0
    assert "gated/unguided" in capsys.readouterr().out


def test_bench_all_records_a_failing_section(tmp_path, monkeypatch):
    """A section that raises is recorded with its error; the others still run and rc is 1."""
    import vam_bench.run_all as ba

    monkeypatch.setattr(ba, "bench_head", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("boom")))
    out = tmp_path / "b.json"
    skip = [a for s in ("replan", "backends", "camera", "executor", "driver", "libero", "model_info")
            for a in ("--skip", s)]
    rc = main(["bench", "all", "--quick", *skip, "--json", str(out)])
    res = json.loads(out.read_text())
    assert rc == 1 and res["head"]["error"] == "RuntimeError: boom"
    assert res["replan"] == {"skipped": "--skip"} and "achieved" not in res
