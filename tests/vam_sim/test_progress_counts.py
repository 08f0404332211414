"""A progress bar never shows a success count ahead of its episode count (issue 61 row 17).

Before: the postfix was set (and drawn) before the bar's count moved: "0/10 ... success 0/1"."""
from __future__ import annotations

import re

import pytest

from vam_cli.main import main

pytestmark = pytest.mark.unit


def test_eval_bar_counts_and_success_agree(tmp_path, capsys, monkeypatch):
    import vam_stack.progress as progress

    monkeypatch.setattr(progress, "LOG_INTERVAL_S", 0.0)          # draw every update, as on a terminal
    assert main(["eval", "--suites", "goal", "--policy", "expert", "--seeds", "0", "--episodes-per-task", "1",
                 "--max-steps", "3", "--out", str(tmp_path / "e")]) == 0
    text = capsys.readouterr().out.replace("\r", "\n")
    draws = re.findall(r"(\d+)/10 \[[^\]]*success (\d+)/(\d+)", text)
    assert draws, text[:500]
    for done, _, of in draws:
        assert done == of, f"bar at {done}/10 shows success out of {of}"
