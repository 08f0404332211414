"""vam_stack.names: each shared name list written once, and every place that offers or checks those
names reads it from there (the copies these tests replaced: guidance names in the launch arguments,
ros-eval and the paper study; task names in the launch arguments, ros-eval and record; the expert
noise's NOISE_WHERE spelled again in collect's and record's command lines)."""
from __future__ import annotations

import argparse
import ast
from pathlib import Path

import pytest

from vam_stack import names

pytestmark = pytest.mark.unit
ROOT = Path(__file__).resolve().parents[2]


def _choices(add_arguments, dest: str) -> tuple:
    p = argparse.ArgumentParser()
    add_arguments(p)
    return tuple(next(a for a in p._actions if a.dest == dest).choices)


def test_the_module_imports_none_of_our_packages():
    tree = ast.parse((ROOT / "vam_stack" / "names.py").read_text())
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module or "." for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert imported <= {"__future__"}, imported


def test_the_lists():
    assert names.GUIDANCE_SCHEDULES == ("none", "flat", "tr_adaptive")
    assert names.GUIDANCE_LABELS == ("none", "flat", "tr_adaptive", "tr_adaptive+running_min")
    assert names.YAM_TASKS == ("handover", "relay", "tray_lift")
    assert names.NOISE_WHERE == ("everywhere", "free_space")
    assert names.NOISE_WHERE_FLAGS == ("everywhere", "free-space")


def test_the_guidance_module_uses_the_lists():
    from vam_model import guidance

    assert guidance.SCHEDULES is names.GUIDANCE_SCHEDULES
    assert guidance.TR_BASELINES is names.TR_BASELINES
    assert guidance.GUIDANCE_LABELS is names.GUIDANCE_LABELS


def test_launch_arguments_offer_the_lists():
    from vam_stack.launch_args import CHOICES

    assert CHOICES["guidance"] is names.GUIDANCE_SCHEDULES
    assert CHOICES["sim_task"] is names.YAM_TASKS


def test_command_lines_offer_the_lists():
    from vam_cli.collect import add_arguments as collect_args
    from vam_cli.record import add_arguments as record_args
    from vam_experiments.ros_eval import add_arguments as ros_eval_args

    assert _choices(ros_eval_args, "task") == names.YAM_TASKS
    assert _choices(ros_eval_args, "guidance") == names.GUIDANCE_SCHEDULES
    assert _choices(record_args, "task") == names.YAM_TASKS
    assert _choices(record_args, "noise_where") == names.NOISE_WHERE_FLAGS
    assert _choices(collect_args, "noise_where") == names.NOISE_WHERE_FLAGS


def test_the_paper_study_needs_the_schedules():
    from dataclasses import fields

    from vam_experiments.paper_study import StudyConfig

    assert next(f for f in fields(StudyConfig) if f.name == "guidance").default is names.GUIDANCE_SCHEDULES
