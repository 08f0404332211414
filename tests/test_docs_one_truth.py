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


def test_the_readme_first_screen_serves_a_roboticist():
    """Issue 69 row 5: the launch line came at line 66, the status at 197 of 213, and no robot fact,
    e-stop or bring-up link was on the first screen; the README was 222 lines."""
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 160, f"README.md is {len(lines)} lines (at most 160: results and logs go in docs/)"
    screen = " ".join(" ".join(lines[:50]).split())
    for fact in ("14 absolute joint targets", "30 Hz", "Damiao", "CAN", "RealSense", "nothing here has run on a motor",
                 "bash scripts/demo.sh", "bash scripts/test.sh", "ros2 launch vam_stack robot.launch.py",
                 "ros2 service call /vam/estop std_srvs/srv/SetBool", "docs/bring_up.md"):
        assert fact in screen, f"README's first 50 lines do not say {fact!r}"
    robot = (ROOT / "config" / "yam_robot.yaml").read_text()    # the facts it states are the config's
    assert re.search(r"^\s*rate_hz: 30\.0$", robot, re.M) and "joint_names: [joint1, joint2, joint3, joint4, joint5, joint6]" in robot
    cameras = (ROOT / "config" / "cameras.yaml").read_text()
    assert [n for n in ("top", "left_wrist", "right_wrist") if f"name: {n}, kind: realsense" in cameras] == \
        ["top", "left_wrist", "right_wrist"]
