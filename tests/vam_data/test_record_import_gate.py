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

from yam_data import write_recording  # tests/support

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
    assert "kept aside as refused/handover_000.mcap: the import's checks refuse it" in text and "23.50 Hz" in text
    assert "the import takes it with --rate-tolerance 0.28" in text and "kept handover_001.mcap" in text
    assert "expert solved 1/1 (95 % interval 21-100 %)" in text and "= 21-100" not in text
    assert [p.name for p in find_recordings(out)] == ["handover_001.mcap"]     # import sees only the good one
    assert (out / "refused" / "handover_000.mcap").is_file()
    tries = json.loads((out / "episodes.json").read_text())["tries"]
    assert tries[0]["file"] is None and "23.50 Hz" in tries[0]["import_refusal"] and tries[1]["file"]


def test_a_clean_recording_passes_the_gate(tmp_path):
    assert record.import_refusal(write_recording(tmp_path / "a.mcap")) is None


def _recorder_episode(outcomes):
    """A stand-in for record_episode that names its file as the demo_recorder does (the next free index in
    --out) and writes a recording with the given (solved, kw) of each try."""
    from vam_data.recorder import EpisodeRecorder, RecorderConfig

    it = iter(outcomes)

    def fake_episode(args, index, out_dir):
        solved, kw = next(it)
        path = EpisodeRecorder(RecorderConfig(out_dir=str(out_dir), prefix=args.task))._next_path()
        keep = solved or args.keep_failures
        if keep:
            write_recording(path, **kw)
        return {"try": index, "episode_seed": 100 + index, "joint_noise": 0.0, "solved": solved,
                "file": path.name if keep else None, "ticks": 40, "seconds": 1.3,
                "exit_codes": {"yam_mujoco_sim": 0, "demo_recorder": 0}}
    return fake_episode


def test_each_try_keeps_its_own_file_and_the_totals_count_what_happened(tmp_path, monkeypatch, capsys):
    # issue 70 row 3: two refused tries were both moved to refused/handover_000.mcap (try 1 overwrote try 0),
    # and the closing line said "2 solved but refused" after two "NOT solved" lines (--keep-failures)
    out = tmp_path / "rec"
    monkeypatch.setattr(record, "record_episode", _recorder_episode([(False, dict(gap_at=20)),
                                                                     (False, dict(rate=23.5))]))
    monkeypatch.setattr("vam_stack.process_graph.isolate_ros", lambda *a: 77)
    assert main(["record", "--task", "handover", "--episodes", "1", "--keep-failures", "--out", str(out)]) == 1
    text = capsys.readouterr().out
    aside = sorted(p.name for p in (out / "refused").iterdir())
    assert len(aside) == 2, aside                                          # two tries, two files
    tries = json.loads((out / "episodes.json").read_text())["tries"]
    assert len({t["refused"] for t in tries}) == 2 and all((out / t["refused"]).is_file() for t in tries)
    assert "solved but" not in text and "0 solved, 2 not solved" in text, text
    assert "2 not solved, kept (--keep-failures) and aside in" in text, text


def test_a_solved_demonstration_is_kept_aside_with_the_flags_that_import_it(tmp_path, monkeypatch, capsys):
    # issue 70 row 2: a solved try the import refused ("pauses 0.218 s > 2.5 periods") was called NOT kept, and
    # nothing said that the import's max_gap_ticks (only in a mapping file) would take it; record had no
    # --max-tries
    out = tmp_path / "rec"
    monkeypatch.setattr(record, "record_episode", _recorder_episode([(True, dict(gap_at=20))] * 3))
    monkeypatch.setattr("vam_stack.process_graph.isolate_ros", lambda *a: 77)
    assert main(["record", "--task", "handover", "--episodes", "2", "--max-tries", "3", "--out", str(out)]) == 1
    text = capsys.readouterr().out
    assert text.count("kept aside as refused/handover_") == 3 and "pauses 0.233 s" in text, text
    assert "3 tries: 3 solved, 0 not solved; 0 importable kept" in text and "3 solved but kept aside" in text, text
    line = next(x for x in text.splitlines() if x.startswith("to train on them too: vam-stack import"))
    assert "--max-gap-ticks 7.5 --rate-tolerance 0.16" in line, line
    assert "only 0 of 2 importable episodes in 3 tries (--max-tries 3)" in text
    # the line works as printed: every kept-aside recording imports with it
    import shlex
    argv = shlex.split(line.split(": ", 1)[1])
    assert main(argv[1:]) == 0
    from vam_data.dataset import Dataset
    assert len(Dataset(argv[argv.index("--out") + 1]).episodes) == 3
    # and the refusal names the flag: the import's default refuses with the values that take it
    from vam_cli.main import entry
    assert entry(["import", "--format", "mcap", str(out / "refused"), "--preset", "yam64", "--out",
                  str(tmp_path / "no")]) == 2
    assert "the import takes it with --max-gap-ticks 7.5" in capsys.readouterr().err


def test_the_train_command_import_prints_works_as_printed(tmp_path, monkeypatch, capsys):
    # issue 70 row 11: import ended with "train with: vam-stack train --dataset OUT ...", which fails (the
    # default config is train_tiny.yaml: LIBERO's 7-dim actions) without --config config/train_yam64.yaml
    import shlex

    import vam_train.train as train_mod

    for i in range(2):
        write_recording(tmp_path / "rec" / f"handover_{i:03d}.mcap")
    monkeypatch.chdir(tmp_path)
    assert main(["import", "--format", "mcap", str(tmp_path / "rec"), "--preset", "yam64", "--task", "handover",
                 "--out", "runs/demos_rec"]) == 0
    text = capsys.readouterr().out
    assert "{" not in text, text                                      # no raw dict (row 15)
    line = next(x for x in text.splitlines() if x.startswith("train with: "))
    argv = shlex.split(line[len("train with: "):])
    ran = {}

    def fit(cfg, out, **kw):                                         # the spawned ranks' training itself
        ran.update(cfg=cfg, out=out)
        return 0
    monkeypatch.setattr(train_mod, "fit_data_parallel", fit)
    assert argv[:2] == ["vam-stack", "train"] and main(argv[1:]) == 0, line
    assert ran["cfg"].preset == "yam64" and ran["cfg"].dataset == "runs/demos_rec" and ran["cfg"].extra_datasets == ()


def test_a_kept_aside_try_no_tolerance_takes_adds_skip_bad_to_the_printed_import_line(tmp_path, monkeypatch, capsys):
    # issue 70 row 2 (measured at load 7-16): one solved try's targets ran at 20 Hz, beyond what any
    # --rate-tolerance takes; the printed import line then refused the whole folder for that one file
    out = tmp_path / "rec"
    monkeypatch.setattr(record, "record_episode", _recorder_episode([(True, dict(gap_at=20)),
                                                                     (True, dict(rate=19.77, gap_at=20))]))
    monkeypatch.setattr("vam_stack.process_graph.isolate_ros", lambda *a: 77)
    assert main(["record", "--task", "handover", "--episodes", "2", "--max-tries", "2", "--out", str(out)]) == 1
    text = capsys.readouterr().out
    assert "no tolerance takes it" in text, text
    line = next(x for x in text.splitlines() if x.startswith("to train on them too: vam-stack import"))
    assert "--max-gap-ticks 7.5" in line and line.endswith(f"--skip-bad --out {out}_refused_demos"), line
    import shlex
    argv = shlex.split(line.split(": ", 1)[1])
    assert main(argv[1:]) == 0                               # as printed: the takeable one in, the other named
    from vam_data.dataset import Dataset
    assert len(Dataset(argv[argv.index("--out") + 1]).episodes) == 1
