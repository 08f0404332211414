"""The driver benchmark runs end to end on both emulators and writes its JSON."""
import argparse
import json

import pytest

from vam_bench import driver as bench

pytestmark = pytest.mark.sim


def test_bench_runs_both_buses_and_writes_json(tmp_path, capsys):
    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    out = tmp_path / "driver.json"
    args = parser.parse_args(["--ticks", "10", "--seconds", "0.2", "--json", str(out)])
    assert bench.run(args) == 0
    results = json.loads(out.read_text())["results"]
    assert [r["bus"] for r in results] == ["dynamixel", "damiao"]
    for r in results:
        assert r["motors"] == 14 and r["paced_ticks"] >= 1
        assert r["read_plus_write"]["p50_ms"] <= r["read_plus_write"]["p99_ms"]
    assert "r+w p50/p99 ms" in capsys.readouterr().out


def test_bench_rejects_bad_arguments():
    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    with pytest.raises(SystemExit, match="--ticks"):
        bench.run(parser.parse_args(["--ticks", "2"]))
