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
