"""The ROS package's lint tier, as far as it runs without ament: the pyflakes class of flake8
errors (syntax errors, undefined names, unused imports and variables, redefinitions) over every
Python file, and package.xml validated by xmllint when it is installed (a ROS machine's
`ament_flake8` / `ament_pep257` / `ament_xmllint` apply their own, stricter configs)."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.unit

SELECT = "E9,F63,F7,F82,F401,F811,F841"


def test_flake8_finds_no_errors():
    pytest.importorskip("flake8", reason="flake8 is in the test extra (pip install -e '.[test]')")
    r = subprocess.run([sys.executable, "-m", "flake8", f"--select={SELECT}",
                        "--exclude=.venv,runs,build,install,log,.git", "."], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_package_xml_is_well_formed_for_xmllint():
    xmllint = shutil.which("xmllint")
    if xmllint is None:
        pytest.skip("xmllint is not installed (Debian: libxml2-utils)")
    r = subprocess.run([xmllint, "--noout", str(ROOT / "package.xml")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
