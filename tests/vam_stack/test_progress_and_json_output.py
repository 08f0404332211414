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
