"""`vam-stack bench executor` runs end to end and writes the documented JSON keys.

Only short runs here (CI never runs the 60 s benchmark); the numbers are printed, not asserted.
"""
from __future__ import annotations

import json

import pytest

from vam_bench.executor import REQUIRED_KEYS
from vam_cli import main as cli

pytestmark = pytest.mark.unit


def check_json(path, policy_word):
    data = json.loads(path.read_text())
    for key in REQUIRED_KEYS:
        assert isinstance(data[key], (int, float)), key
    assert isinstance(data["missed_ticks"], int)
    assert data["ticks"] >= 1 and data["rate_hz"] == 30.0
    assert policy_word in data["policy"]
    assert data["safety_counts"]["commands"] == data["ticks"]  # every target went through the filter
    return data


def test_bench_fake_policy_in_thread(tmp_path, capsys):
    out = tmp_path / "ex.json"
    rc = cli.main(["bench", "executor", "--seconds", "1.5", "--fake-policy-ms", "20", "--worker", "thread",
                   "--rt-priority", "0", "--json", str(out)])
    assert rc == 0
    data = check_json(out, "fake policy")
    assert data["replans"] >= 1 and data["inference_errors"] == 0
    assert "jitter p50" in capsys.readouterr().out


def test_bench_tiny_policy_in_child_process(tmp_path):
    out = tmp_path / "ex_tiny.json"
    rc = cli.main(["bench", "executor", "--seconds", "1", "--json", str(out)])
    assert rc == 0
    data = check_json(out, "tiny_real policy")
    assert "child process" in data["policy"] and data["warmup_ms"] > 0


def test_bench_rejects_bad_arguments():
    with pytest.raises(SystemExit, match="--seconds must be > 0, got -1.0"):
        cli.main(["bench", "executor", "--seconds", "-1", "--fake-policy-ms", "1"])
    with pytest.raises(SystemExit, match="--fake-policy-ms must be >= 0"):
        cli.main(["bench", "executor", "--seconds", "1", "--fake-policy-ms", "-5", "--worker", "thread"])
