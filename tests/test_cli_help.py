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


def test_each_command_describes_itself_with_its_table_line_not_a_cut_docstring(capsys):
    # before: `eval --help` said "Entry module for `vam-stack eval` (see vam_sim.cli)."; sim's, model-info's
    # and others' descriptions stopped mid-sentence (a docstring's first line); collect's named only LIBERO
    for argv, (_, line) in [([n], v) for n, v in cli.COMMANDS.items()] + [(["bench", n], v) for n, v in cli.BENCHES.items()]:
        with pytest.raises(SystemExit):
            cli.entry(argv + ["--help"])
        out = " ".join(capsys.readouterr().out.split())
        assert " ".join(line.split())[1:] + "." in out, argv
        assert "Entry module" not in out
    assert "MuJoCo YAM" in cli.COMMANDS["collect"][1]


@pytest.mark.parametrize("bench", ["policy", "backends"])
def test_backend_lists_take_commas_and_repeats(bench):
    # before: `bench policy --backend torch,onnxruntime` was refused ("invalid choice") though the help says backend(s)
    full = argparse.ArgumentParser()
    importlib.import_module(cli.BENCHES[bench][0]).add_arguments(full)
    assert full.parse_args(["--backend", "torch,onnxruntime"]).backend == ["torch", "onnxruntime"]
    assert full.parse_args(["--backend", "torch", "--backend", "onnxruntime"]).backend == ["torch", "onnxruntime"]
    assert full.parse_args([]).backend is None
    with pytest.raises(SystemExit):
        full.parse_args(["--backend", "torch,tpu"])


@pytest.mark.parametrize("argv", [["sim", "--episodes", "two", "--out", "x"], ["sim"], ["train", "--bogus"],
                                  ["checkpoint", "verify"], ["bench", "driver", "--bus", "can"], ["nosuch"]])
def test_an_argparse_mistake_prints_one_line_with_help_for_the_rest(argv, capsys):
    # issue 70 row 14: argparse printed its usage block first (17 lines for `sim`) though the README says
    # "a mistake prints one line"
    with pytest.raises(SystemExit) as e:
        cli.entry(argv)
    assert e.value.code == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and captured.out == "", captured
    assert lines[0].startswith("vam-stack") and ": error: " in lines[0] and "--help for the rest" in lines[0], lines
