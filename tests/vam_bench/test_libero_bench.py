"""The benchmark module runs and prints its numbers (no timing assertions)."""
import argparse

import pytest

from vam_bench import libero as bench

pytestmark = pytest.mark.unit


def test_bench_prints_each_stage(capsys):
    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    assert bench.run(parser.parse_args(["--suite", "goal", "--task", "6", "--episodes", "1"])) == 0
    out = capsys.readouterr().out
    for stage in ("reset", "step, no render", "agentview", "wrist", "render both", "env.step total"):
        assert stage in out
    assert "1 expert successes" in out
    assert bench.run(parser.parse_args(["--episodes", "0"])) == 2


def test_every_bench_takes_json(tmp_path):
    """The README lists `--json PATH` for every benchmark: each parser accepts it."""
    import importlib

    from vam_cli.main import BENCHES

    for name, (module, _) in BENCHES.items():
        parser = argparse.ArgumentParser()
        importlib.import_module(module).add_arguments(parser)
        assert "--json" in parser._option_string_actions, f"bench {name} has no --json"
    parser = argparse.ArgumentParser()
    bench.add_arguments(parser)
    out = tmp_path / "libero.json"
    assert bench.run(parser.parse_args(["--task", "6", "--episodes", "1", "--json", str(out)])) == 0
    import json

    r = json.loads(out.read_text())
    assert r["expert_successes"] == 1 and r["step_total"]["n"] == r["steps"] > 0
