"""The real-LIBERO report (vam_sim/libero_real/report.py): counts, intervals, refusals, the figure."""
import json

import pytest

from vam_sim.libero_real import report


def _dataset(tmp_path):
    (tmp_path / "demos" / "meta").mkdir(parents=True)
    expert = {"goal/0": {"valid": 20, "success": 19, "broken_scenes": 1, "mean_steps": 140.5},
              "spatial/3": {"valid": 22, "success": 20, "broken_scenes": 0, "mean_steps": 120.0}}
    (tmp_path / "demos" / "meta" / "info.json").write_text(json.dumps({"expert": expert}))
    return tmp_path / "demos"


def _summary(path, suite, outcomes, complete=True, backend="real_libero"):
    eps = [{"suite": suite, "task": i % 10, "instruction": f"do {suite} {i % 10}", "success": ok,
            "init_state": i // 10, "backend": backend} for i, ok in enumerate(outcomes)]
    path.write_text(json.dumps({"episodes": eps, "complete": complete, "config": {"episodes": 20}}))
    return path


@pytest.mark.unit
def test_tables_count_per_task_and_suite_with_wilson_intervals(tmp_path, capsys):
    ds = _dataset(tmp_path)
    sp = _summary(tmp_path / "s.json", "spatial", [True] * 10 + [False] * 10)
    go = _summary(tmp_path / "g.json", "goal", [True, False] * 5, complete=False)
    png = tmp_path / "r.png"
    assert report.main(["--dataset", str(ds), "--eval", f"ours, none={sp},{go}", "--png", str(png),
                        "--anchor", "DP=spatial:78.3,goal:68.3"]) == 0
    out = capsys.readouterr().out
    rows = expert = report.expert_rows(ds)
    assert [(r["suite"], r["task"]) for r in rows] == [("spatial", 3), ("goal", 0)]   # spatial first
    assert "| goal/0 | 19/20: 95 % [76, 99] | 1 | 140.5 |" in out                      # Wilson 95 %: 0.764-0.991
    assert "| spatial/0 | do spatial 0 | 1/2: 50 % [9, 91] |" in out
    assert "| **spatial** | all tasks | **10/20: 50 % [30, 70]** |" in out
    assert "| **goal** | all tasks | **5/10: 50 % [24, 76]** |" in out
    assert f"note: {go}: unfinished, 10 of 20 episodes" in out
    assert png.stat().st_size > 10_000 and expert


@pytest.mark.unit
def test_refuses_what_it_cannot_report_naming_the_file(tmp_path, capsys):
    mock = _summary(tmp_path / "mock.json", "goal", [True], backend="mock_via_server")
    assert report.main(["--eval", f"x={mock}"]) == 2
    assert f"{mock} is not a real-LIBERO evaluation" in capsys.readouterr().err
    assert report.main(["--eval", "no-label"]) == 2
    assert "expected LABEL=SUMMARY" in capsys.readouterr().err
    assert report.main(["--dataset", str(tmp_path)]) == 2
    assert "holds no expert statistics" in capsys.readouterr().err
    assert report.main(["--anchor", "DP=spatial78"]) == 2
    assert "expected LABEL=SUITE:PCT" in capsys.readouterr().err
