"""The docs say one thing per fact (issue 61 rows 15 and 16).

Before: training.md said the demo runs tasks 0-2 (scripts/demo.sh runs 10 episodes, one per goal
task); benchmarks.md gave the ROS graph's replan, warm-up and exit figures without the load they
need; the README's collect -> train -> sim path did not say it trains to 0/20
(docs/your_data/results.md), not the 16/20 of its Results.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.unit


def test_training_md_describes_the_demo_scripts_demo_sh_runs():
    demo = (ROOT / "scripts" / "demo.sh").read_text()
    episodes = int(re.search(r"vam-stack sim .*--episodes (\d+)", demo).group(1))
    text = " ".join((ROOT / "docs" / "training.md").read_text().split())
    sentence = re.search(r"The demo \(`scripts/demo.sh`\) runs [^:]*:", text).group(0)
    assert f"{episodes} episodes" in sentence and f"tasks 0-{episodes - 1}" in sentence, sentence
    assert "tasks 0-2" not in text


def test_benchmarks_md_says_the_load_its_graph_figures_need():
    text = (ROOT / "docs" / "benchmarks.md").read_text()
    section = text[text.index("## ROS graph"):]
    section = section[:section.index("\n## ", 1)] if "\n## " in section[1:] else section
    assert "The load these figures need" in section and "nothing else running" in section
    for figure in ("**Replan latency in the graph**", "exited 0 on SIGINT", "**Warm-up**"):
        at = section.index(figure)
        assert "idle machine" in section[at:at + 400], figure


def test_the_readme_quick_path_says_what_it_gives():
    readme = (ROOT / "README.md").read_text()
    part = readme[readme.index("## Your robot, your data"):readme.index("Demonstrations of your own")]
    words = " ".join(part.split())
    assert "0/20" in words and "docs/your_data/results.md" in words and "16/20" in words
    results = (ROOT / "docs" / "your_data" / "results.md").read_text()
    assert "| collect | 0/20 = 0 % [0-16]" in results           # the number the README cites
    assert "11 566 steps in 53.9 minutes" in results and "about 54 minutes" in words
