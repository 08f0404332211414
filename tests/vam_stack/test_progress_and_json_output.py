"""Progress bars throttle themselves off a terminal; `--json -` means stdout for every benchmark."""
from __future__ import annotations

import io
import json

import pytest

from vam_stack.outputs import write_json_output
from vam_stack.progress import LOG_INTERVAL_S, progress_bar

pytestmark = pytest.mark.unit


def test_a_bar_written_to_a_log_prints_a_few_lines_not_one_per_update():
    log = io.StringIO()                       # not a terminal
    bar = progress_bar(total=500, file=log, desc="collect")
    for _ in range(500):
        bar.update(1)
    bar.close()
    redraws = log.getvalue().count("\r")
    assert redraws <= 3, f"{redraws} progress lines for 500 updates"
    assert "500/500" in log.getvalue()        # the final state is always written
    assert bar.mininterval == LOG_INTERVAL_S


def test_json_output_dash_is_stdout_and_a_path_is_written(tmp_path, capsys):
    write_json_output("-", {"a": 1.5})
    assert json.loads(capsys.readouterr().out) == {"a": 1.5}
    write_json_output(tmp_path / "sub" / "r.json", {"b": 2})
    assert json.loads((tmp_path / "sub" / "r.json").read_text()) == {"b": 2}
    assert not (tmp_path / "-").exists()


@pytest.mark.parametrize("argv,flag", [(["bench", "driver"], "--json"),
                                       (["libero-check", "--libero-python", "python3"], "--markdown")])
def test_a_report_file_of_an_earlier_run_is_refused_before_the_run_starts(tmp_path, monkeypatch, argv, flag):
    import importlib

    from vam_cli import main as cli

    module = importlib.import_module(cli._resolve(argv)[0])
    ran = []
    monkeypatch.setattr(module, "run", lambda args: ran.append(args) or 0)
    old = tmp_path / "r.json"
    old.write_text('{"earlier": true}\n')
    with pytest.raises(FileExistsError, match=r"r\.json.*exists.*--overwrite"):
        cli.main(argv + [flag, str(old)])
    assert ran == [] and json.loads(old.read_text()) == {"earlier": True}
    with pytest.raises(IsADirectoryError, match="directory"):
        cli.main(argv + [flag, str(tmp_path)])
    assert cli.main(argv + [flag, str(old), "--overwrite"]) == 0 and len(ran) == 1
    assert cli.main(argv + [flag, str(tmp_path / "new.json")]) == 0 and len(ran) == 2
    if flag == "--json":
        assert cli.main(argv + ["--json", "-"]) == 0 and len(ran) == 3


@pytest.mark.parametrize("robot", ["libero-mock", "yam-mujoco"])
def test_collect_refuses_an_existing_out_before_it_draws_its_progress(tmp_path, capsys, robot):
    # issue 70 row 15: `collect` drew "collect: 0%|" and only then refused an existing --out
    from vam_cli.main import entry

    out = tmp_path / "d"
    (out / "meta").mkdir(parents=True)
    (out / "meta" / "info.json").write_text("{}")
    assert entry(["collect", "--robot", robot, "--episodes-per-task", "1", "--out", str(out)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "", captured.out                       # no bar, no line
    assert captured.err.count("\n") == 1 and "already holds a dataset; pass --overwrite" in captured.err


def test_outputs_are_sentences_not_dicts():
    # issue 70 row 15: collect and train ended with a raw JSON dict of 17-digit floats
    from vam_cli.collect import _summary
    from vam_train.trainer import describe_result

    line = _summary({"total_episodes": 3, "total_frames": 412, "frame_shape": [48, 192, 3], "collect_s": 95.04,
                     "expert_success": {"handover": {"successes": 3, "episodes": 4}}, "expert_success_rate": 0.75},
                    "runs/d")
    assert line == ("wrote runs/d: 3 episodes, 412 steps (192x48 stacked frames) in 1.6 min; the expert solved "
                    "handover 3/4")
    assert describe_result({"step": 200, "elapsed_min": 3.456, "action": 0.123456789012, "total": 1.23456789}) == (
        "trained to step 200 in 3.5 min; last step's losses: action 0.1235, total 1.2346")


def test_in_words_prints_a_dict_as_a_line_with_short_numbers():
    from vam_stack.outputs import in_words

    assert in_words({"unguided": 1.23456789, "gated": {"cond": 12.0, "ok": True}, "n": 3, "names": ["a", "b"]}) == (
        "unguided 1.23, gated (cond 12, ok True), n 3, names [a, b]")
