"""Every `vam-stack` command the README shows parses as written.

The commands table and the collect -> train -> sim recipe are read from README.md; each
`{a,b}` choice is expanded into every alternative, each `[optional part]` is included, and each
placeholder (S, N, DIR, ...) gets a small value for the flag before it. The command's own
parser (built as `vam-stack` builds it) must accept the line: a required option missing from a
row, a flag that does not exist, or a choice the command refuses fails here.
"""
from __future__ import annotations

import argparse
import importlib
import re
import shlex
from pathlib import Path

import pytest

from vam_cli.main import _resolve

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.unit

# the value a placeholder takes after each flag (or as a positional, under its own name)
VALUES = {
    "--suite": "goal", "--episodes": "1", "--seed": "0", "--checkpoint": "models/libero64.safetensors",
    "--w-lang": "0.1", "--w-plan": "0.3", "--s-max": "2", "--device": "cpu", "--backend": "torch", "--out": "runs/x",
    "--task": "handover", "--tasks": "handover", "--action-temperature": "1.0", "--episodes-per-task": "1",
    "--config": "config/train_tiny.yaml", "--variant": "gpu", "--set": "lr=0.001", "--stages": "eval",
    "--models": "lora", "--labels": "none", "--preset": "tiny", "--transformer": "dit.pt", "--vae": "vae.pth",
    "--pi0": "pi0.safetensors", "--text-encoder": "qwen", "--json": "-", "--dataset": "runs/demos", "--workers": "2",
    "FILE": "models/tiny.safetensors", "NAME:=VALUE": "preset:=tiny", "SRC": "runs/recordings", "DATASET": "runs/demos",
    "--mapping": "config/mcap_import_yam.yaml", "--index": "5", "--data": "docs/data/paper_study/tr_block",
    "--max-tries": "3", "--max-gap-ticks": "4", "--max-age-s": "0.15", "--rate-tolerance": "0.1",
    "--a-guidance": "tr_adaptive", "--b-guidance": "none",
}
PLACEHOLDER = re.compile(r"^(?:[A-Z][A-Z_]*|K=V|NAME:=VALUE|\.\.\.)$")


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    table = text[text.index("## Commands"):text.index("## On ROS 2")]
    commands = re.findall(r"`(vam-stack [^`]+)`", table)
    recipe = text[text.index("## Your robot, your data"):text.index("## Results")]
    block = recipe[recipe.index("```bash") + 7:recipe.index("```", recipe.index("```bash") + 7)]
    for line in re.sub(r"\\\n\s*", " ", block).splitlines():
        line = line.split("#")[0].strip()
        if line.startswith("vam-stack "):
            commands.append(line)
    return commands


def expand(command: str) -> list[str]:
    m = re.search(r"\{([^{}]+)\}", command)
    if not m:
        return [command]
    return [v for alt in m.group(1).split(",") for v in expand(command[:m.start()] + alt + command[m.end():])]


def concrete(command: str) -> list[str]:
    tokens = shlex.split(command.replace("[", " ").replace("]", " "))[1:]   # drop "vam-stack"
    out: list[str] = []
    for tok in tokens:
        if PLACEHOLDER.match(tok):
            if tok == "...":
                continue
            prev = out[-1] if out else ""
            value = VALUES.get(prev) if prev.startswith("--") else VALUES.get(tok)
            assert value is not None, f"no value for placeholder {tok!r} after {prev!r} in {command!r}"
            out.append(value)
        else:
            out.append(tok)
    return out


CASES = [c for cmd in readme_commands() for c in expand(cmd)]


def test_the_readme_shows_the_commands():
    names = {c.split()[1] for c in CASES}
    assert {"sim", "eval", "collect", "train", "foundation", "bench", "ros-graph"} <= names
    assert len(CASES) > 20


@pytest.mark.parametrize("command", CASES)
def test_a_readme_command_parses_as_written(command):
    argv = concrete(command)
    module_name, prog, rest = _resolve(argv)
    assert module_name is not None, f"{command!r}: not a vam-stack command"
    module = importlib.import_module(module_name)
    parser = argparse.ArgumentParser(prog=prog)
    module.add_arguments(parser)
    opts = parser._option_string_actions
    if any(f in opts and opts[f].nargs != 0 for f in ("--json", "--markdown")) and "--overwrite" not in opts:
        parser.add_argument("--overwrite", action="store_true")        # as vam-stack adds it
    try:
        parser.parse_args(rest)
    except SystemExit:
        pytest.fail(f"README command does not parse: vam-stack {' '.join(argv)}")
