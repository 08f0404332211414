"""Episodes over worker processes (`eval --workers`): the same results as one process, in the same order."""
import json

import pytest

from vam_cli.main import main

pytestmark = pytest.mark.sim


def _episodes(out):
    res = json.loads((out / "results.json").read_text())
    return res, [(e["guidance"], e["task"], e["success"], e["steps"], [r["tr"] for r in e["replans"]])
                 for e in res["episodes"]]


def test_eval_on_two_workers_matches_one_process(tmp_path):
    """Two schedules x 10 goal episodes of 20 steps: every episode's outcome, length and per-replan TR
    agree between one process and two workers (each episode draws its own noise), in the same
    order; the results name both schedules."""
    common = ["eval", "--suites", "goal", "--guidance", "none,flat", "--seeds", "0", "--max-steps", "20",
              "--device", "cpu", "--backend", "torch"]
    assert main([*common, "--workers", "1", "--out", str(tmp_path / "one")]) == 0
    assert main([*common, "--workers", "2", "--threads", "1", "--out", str(tmp_path / "two")]) == 0
    res1, one = _episodes(tmp_path / "one")
    res2, two = _episodes(tmp_path / "two")
    assert len(one) == len(two) == 20 and res2["complete"]
    for a, b in zip(one, two):
        assert a[:4] == b[:4]
        assert a[4] == pytest.approx(b[4], rel=1e-3, abs=1e-4)
    assert res1["by_guidance"]["flat"]["counts"] == res2["by_guidance"]["flat"]["counts"]


def test_bad_worker_counts_are_refused_in_one_line(tmp_path):
    with pytest.raises(SystemExit, match="--workers and --threads must be >= 0"):
        main(["eval", "--suites", "goal", "--workers", "-1", "--out", str(tmp_path / "w")])
    assert not (tmp_path / "w").exists()


def test_eval_defaults_to_onnxruntime_on_every_core_for_the_vam_policy_on_a_cpu(tmp_path):
    from vam_sim.parallel import default_workers

    out = tmp_path / "d"
    assert main(["eval", "--suites", "goal", "--guidance", "none", "--seeds", "0", "--max-steps", "10",
                 "--device", "cpu", "--out", str(out)]) == 0
    res = json.loads((out / "results.json").read_text())
    assert res["backend"] == "onnxruntime" and len(res["episodes"]) == 10
    assert res.get("workers") == default_workers()
