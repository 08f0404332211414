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
