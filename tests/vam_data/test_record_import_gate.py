"""`record` keeps only what `import` accepts, and says its interval in words (issue 61 rows 7, 17).

Before: on a loaded machine `record` kept an episode with a 0.133 s pause and 23.5 Hz targets,
which `import --format mcap --preset yam64` then refused; and it printed "expert 1/1 = 21-100 %".
The graph itself is replaced here by recordings written as the graph writes them.
"""
from __future__ import annotations

import json

import pytest

from vam_cli.main import main
from vam_cli import record
from vam_data.mcap_import import find_recordings

from .test_mcap_import import write_recording

pytestmark = pytest.mark.unit


def test_an_episode_the_import_would_refuse_is_moved_aside_and_not_counted(tmp_path, monkeypatch, capsys):
    out = tmp_path / "rec"
    rates = iter([23.5, 30.0])                         # the first try: a loaded machine's slow rate

    def fake_episode(args, index, out_dir):
        name = f"handover_{index:03d}.mcap"
        write_recording(out_dir / name, rate=next(rates))
        return {"try": index, "episode_seed": 100 + index, "joint_noise": 0.0, "solved": True, "file": name,
                "ticks": 40, "seconds": 1.3, "exit_codes": {"yam_mujoco_sim": 0, "demo_recorder": 0}}

    monkeypatch.setattr(record, "record_episode", fake_episode)
    monkeypatch.setattr("vam_stack.process_graph.isolate_ros", lambda *a: 77)
    assert main(["record", "--task", "handover", "--episodes", "1", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "NOT kept: the import would refuse it" in text and "runs at 23.50 Hz" in text
    assert "moved to refused/handover_000.mcap" in text and "kept handover_001.mcap" in text
    assert "expert solved 1/1 (95 % interval 21-100 %)" in text and "= 21-100" not in text
    assert [p.name for p in find_recordings(out)] == ["handover_001.mcap"]     # import sees only the good one
    assert (out / "refused" / "handover_000.mcap").is_file()
    tries = json.loads((out / "episodes.json").read_text())["tries"]
    assert tries[0]["file"] is None and "23.50 Hz" in tries[0]["import_refusal"] and tries[1]["file"]


def test_a_clean_recording_passes_the_gate(tmp_path):
    assert record.import_refusal(write_recording(tmp_path / "a.mcap")) is None
