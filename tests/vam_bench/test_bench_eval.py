"""`vam-stack bench eval`: four arms on the same episodes, episodes per minute side by side."""
import json

import pytest

from vam_bench.eval import main

pytestmark = [pytest.mark.sim, pytest.mark.slow]


def test_bench_eval_prints_every_arm_and_a_verdict(tmp_path, capsys):
    out = tmp_path / "eval.json"
    assert main(["--episodes", "2", "--max-steps", "12", "--workers", "2", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert text.count("x torch x1)") == 4 and ("MET" in text or "MISSED" in text)
    res = json.loads(out.read_text())
    arms = {(a["backend"], a["workers"]): a for a in res["arms"]}
    assert set(arms) == {("torch", 1), ("onnxruntime", 1), ("torch", 2), ("onnxruntime", 2)}
    assert all(a["episodes"] == 2 and a["episodes_per_min"] > 0 for a in arms.values())
    assert all(a["steps"] == 2 * 12 for a in arms.values())      # every arm ran the same full episodes


def test_bench_eval_needs_two_workers(capsys):
    assert main(["--workers", "1"]) == 2
    assert "--workers >= 2" in capsys.readouterr().err
