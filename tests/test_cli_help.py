"""`--help` of every `vam-stack` command prints its help, never a traceback (issue 61 row 1).

argparse reads `%` in a help text as a format: `vam-stack --help` raised
`TypeError: %i format: a real number is required, not dict` from the ros-eval line's "95 % interval".
"""
from __future__ import annotations

import argparse
import importlib
import subprocess
import sys

import pytest

from vam_cli import main as cli

pytestmark = pytest.mark.unit


def _subactions(parser: argparse.ArgumentParser) -> list[str]:
    """The names of `parser`'s sub-commands (foundation import/inspect, checkpoint verify, ...)."""
    return [name for a in parser._actions if isinstance(a, argparse._SubParsersAction) for name in a.choices]


def _command_lines() -> list[list[str]]:
    lines: list[list[str]] = [[], ["bench"]]
    for prefix, table in (([], cli.COMMANDS), (["bench"], cli.BENCHES)):
        for name, (module, _) in table.items():
            lines.append(prefix + [name])
            full = argparse.ArgumentParser(prog="x")
            importlib.import_module(module).add_arguments(full)
            lines += [prefix + [name, action] for action in _subactions(full)]
    return lines


def test_every_command_and_subcommand_prints_its_help(capsys):
    lines = _command_lines()
    assert ["ros-eval"] in lines and ["foundation", "inspect"] in lines and ["bench", "policy"] in lines
    for argv in lines:
        with pytest.raises(SystemExit) as e:     # any other exception (the TypeError) fails here
            cli.entry(argv + ["--help"])
        assert e.value.code == 0, argv
        out = capsys.readouterr().out
        assert out.startswith("usage: vam-stack"), (argv, out[:200])
        assert "Traceback" not in out


def test_the_console_script_alone_and_with_help_prints_usage_not_a_traceback():
    for argv in ([], ["--help"]):
        r = subprocess.run([sys.executable, "-m", "vam_cli.main", *argv], capture_output=True, text=True, timeout=60)
        assert "Traceback" not in r.stderr and "Error" not in r.stderr, r.stderr
        assert r.stdout.startswith("usage: vam-stack") and "ros-eval" in r.stdout
        assert "95 % interval" in r.stdout
        assert r.returncode == (0 if argv else 2)
