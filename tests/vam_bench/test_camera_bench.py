"""`vam-stack bench camera` runs and writes the JSON keys other tools read (numbers not judged)."""
from __future__ import annotations

import argparse
import json

import pytest

from vam_bench import camera as bench
from vam_stack.paths import config_dir


@pytest.mark.unit
def test_bench_writes_json(tmp_path, capsys):
    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    out = tmp_path / "camera.json"
    args = parser.parse_args(["--ticks", "20", "--json", str(out)])
    assert bench.run(args) == 0
    data = json.loads(out.read_text())
    for key in ("tick_ms_p50", "tick_ms_p99", "buffer_mb", "window_ms_p50", "resize_pyramid_ms_p50"):
        assert data[key] > 0, key
    assert data["window_shape"] == [17, 168, 672, 3]
    assert data["appended_per_tick"] == 1.0  # every timed tick did the full work
    assert data["buffer_mb"] == pytest.approx((51 + 1) * 168 * 672 * 3 / 2**20, rel=0.01)
    assert "tick (read+check+sync+resize+stack)" in capsys.readouterr().out


@pytest.mark.unit
def test_bench_refuses_real_cameras(tmp_path):
    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    args = parser.parse_args(["--config", str(config_dir() / "cameras.yaml"), "--ticks", "5"])
    assert bench.run(args) == 2
