"""`collect --robot libero-real` (vam_sim/collect_libero_real.py): resumable, parallel, honest counts.

Run here against the mocked bridge behind the same server protocol (`backend="mock"`: the mock's
own expert answers `demo`), so every part of the collection but LIBERO itself is exercised; the
real expert in real LIBERO is tests/vam_sim/libero_real/test_libero_real_expert.py (where the
LIBERO venv exists).
"""
import errno
import json
import os
import signal

import numpy as np
import pytest

from vam_data.dataset import Dataset
from vam_sim.collect_libero_real import Collector, Journal, RealCollectConfig
from vam_sim.libero_real.runner import DEFAULT_RENDER

ONLY = ("goal/0", "goal/1")


def _cfg(**kw):
    base = dict(suites=("goal",), tasks=ONLY, episodes_per_task=2, workers=2, backend="mock", image_size=32,
                noise=0.1, noise_every=2)
    return RealCollectConfig(**(base | kw))


def _episodes(root):
    return [json.loads(line) for line in (root / "meta" / "episodes.jsonl").read_text().splitlines()]


def _frames(root):
    return {e["index"]: np.load(root / e["file"])["frames_png"].tobytes() for e in _episodes(root)}


@pytest.mark.sim
def test_collects_the_projects_dataset_with_render_settings_and_expert_counts(tmp_path):
    out = tmp_path / "demos"
    info = Collector(_cfg(), out).run()
    assert info["total_episodes"] == 4
    ds = Dataset(out)
    assert len(ds.episodes) == 4 and ds.info["frame_shape"] == [32, 64, 3]
    assert ds.info["libero_render"]["image_size"] == 32 and ds.info["libero_render"]["reflections"] is False
    eps = _episodes(out)
    assert [(e["task"], e["attempt"]) for e in eps] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert all(e["scene_seed"] == 2 * 100000 + 3 * 10000 + e["task"] * 1000 + e["attempt"] for e in eps)
    stats = info["expert"]
    assert set(stats) == {"goal/0", "goal/1"} and all(s["valid"] >= 2 and s["ci95"][0] <= s["rate"] for s in stats.values())
    journal = (out / "meta" / "collect_journal.jsonl").read_text().splitlines()
    assert len(journal) >= 4 and all("cpu_s" in json.loads(r) for r in journal)
    assert not (out / ".collect").exists()                    # staging gone once the dataset is whole


@pytest.mark.sim
def test_an_interrupted_run_continues_where_it_stopped_and_keeps_the_same_demonstrations(tmp_path):
    whole = tmp_path / "whole"
    Collector(_cfg(workers=1), whole).run()

    out = tmp_path / "cut"
    seen = []

    def stop_after_two(rec, prog):
        seen.append(rec)
        if len(seen) == 2:
            os.kill(os.getpid(), signal.SIGINT)               # Ctrl-C, as a user sends it

    with pytest.raises(KeyboardInterrupt):
        Collector(_cfg(workers=1), out, report=stop_after_two).run()
    kept = Journal(out, _cfg(workers=1)).records
    assert 2 <= len(kept) < 4 and not (out / "meta").exists()
    Collector(_cfg(workers=2), out).run()                   # the same command (any worker count) finishes it
    assert [(e["task"], e["attempt"]) for e in _episodes(out)] == [(e["task"], e["attempt"]) for e in _episodes(whole)]
    assert _frames(out) == _frames(whole)                   # the demonstrations themselves, byte for byte


@pytest.mark.sim
def test_a_killed_libero_process_is_restarted_and_the_attempt_run_again(tmp_path):
    out = tmp_path / "demos"
    col = Collector(_cfg(tasks=("goal/1",)), out)
    killed = []

    def kill_once(rec, prog):
        if not killed:
            with col._lock:
                env = col._envs[-1]
            killed.append(env._proc.pid)
            env._proc.kill()                                  # the LIBERO child dies between attempts

    col.report = kill_once
    info = col.run()
    assert killed and info["total_episodes"] == 2


@pytest.mark.sim
def test_a_resume_may_keep_fewer_demonstrations_a_task_and_keeps_the_finished_ones(tmp_path):
    whole = tmp_path / "whole"
    Collector(_cfg(workers=1, episodes_per_task=1), whole).run()
    out = tmp_path / "cut"
    seen = []

    def stop_after_three(rec, prog):
        seen.append(rec)
        if len(seen) == 3:
            os.kill(os.getpid(), signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        Collector(_cfg(workers=1, episodes_per_task=3), out, report=stop_after_three).run()
    info = Collector(_cfg(workers=1, episodes_per_task=1), out).run()   # the run cut short on purpose
    assert info["total_episodes"] == 2 and info["episodes_per_task"] == 1
    assert _frames(out) == _frames(whole)                   # a scene depends on (task, attempt) alone
    assert json.loads((out / "meta" / "info.json").read_text())["collect"]["episodes_per_task"] == 1


@pytest.mark.unit
def test_a_resume_with_other_settings_or_a_finished_dataset_is_refused(tmp_path):
    out = tmp_path / "demos"
    out.mkdir()
    Journal(out, _cfg())                                      # an unfinished run's staging
    with pytest.raises(ValueError, match=r"image_size: 32 there, 64 now"):
        Collector(_cfg(image_size=64), out).run()
    done = tmp_path / "done"
    (done / "meta").mkdir(parents=True)
    (done / "meta" / "info.json").write_text("{}")
    with pytest.raises(FileExistsError, match="finished dataset"):
        Collector(_cfg(), done).run()
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="other files"):
        Collector(_cfg(), other).run()
    with pytest.raises(ValueError, match="'goal/12'"):
        _cfg(tasks=("goal/12",))
    with pytest.raises(ValueError, match="spatial' and 'goal'"):
        RealCollectConfig(suites=("object",))


@pytest.mark.sim
def test_a_full_disk_stops_the_run_with_the_fix_and_loses_nothing(tmp_path, monkeypatch):
    out = tmp_path / "demos"
    real_add = Journal.add
    calls = []

    def add(self, rec, demo):
        calls.append(rec)
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_add(self, rec, demo)

    monkeypatch.setattr(Journal, "add", add)
    with pytest.raises(OSError, match="disk is full.*run the same command again"):
        Collector(_cfg(workers=1), out).run()
    monkeypatch.setattr(Journal, "add", real_add)
    before = len(Journal(out, _cfg(workers=1)).records)
    assert before >= 1
    info = Collector(_cfg(workers=1), out).run()
    assert info["total_episodes"] == 4


@pytest.mark.unit
def test_evaluation_defaults_to_liberos_own_rendering():
    assert DEFAULT_RENDER == {"image_size": 224, "reflections": True}
