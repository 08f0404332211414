"""Issue 71 row 6 on the policy node process as launch runs it: `backend: auto` (robot.launch's
default) where onnxruntime is not installed. Before: the node exited with a BackendUnavailable
traceback. Now: one warning line naming the package (or backend:=torch), and the policy runs in torch.

onnxruntime is hidden from the node's interpreter only (a sitecustomize that marks it absent in
sys.modules, so importlib.util.find_spec answers None and an import raises ImportError, as where the
package is not installed). The in-process checks are tests/vam_model/test_onnx_cache.py's."""
from __future__ import annotations

import os
import signal
import subprocess
import threading
import time

import pytest

from vam_stack.process_graph import find_executable

pytestmark = [pytest.mark.adapter, pytest.mark.slow]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_backend_auto_without_onnxruntime_starts_the_node_in_torch_with_one_line(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import sys\nsys.modules['onnxruntime'] = None   # not installed\n")
    env = dict(os.environ, HOME=str(tmp_path / "home"), PYTHONUNBUFFERED="1",
               PYTHONPATH=os.pathsep.join(filter(None, [ROOT, str(site), os.environ.get("PYTHONPATH")])))
    proc = subprocess.Popen([find_executable("vam_policy_node"), "--ros-args", "-p", "preset:=tiny",
                             "-p", "device:=cpu", "-p", "warm_up:=false"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            start_new_session=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)
    reader.start()
    try:
        end = time.monotonic() + 240                 # a loaded 2-core machine: ~45 s with the warm-up
        while time.monotonic() < end and proc.poll() is None and not any(" actions at " in x for x in lines):
            time.sleep(0.2)
        assert any(" actions at " in x for x in lines), "".join(lines)[-3000:]      # the policy is running
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
        reader.join(5)
    out = "".join(lines)
    said = [x for x in lines if "onnxruntime" in x]
    assert len(said) == 1 and "backend auto: onnxruntime is not installed" in said[0], said
    assert "runs in torch" in said[0] and "pip install onnxruntime" in said[0] and "backend:=torch" in said[0]
    assert "Traceback" not in out and "BackendUnavailable" not in out, out[-3000:]
    assert proc.returncode == 0, out[-3000:]
