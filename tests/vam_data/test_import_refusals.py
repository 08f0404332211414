"""Demonstrations import only when they are true (issue 61 rows 8-12): a corrupted input is refused
in one line naming the file and what is wrong, and `--skip-bad` leaves out a bad recording.

Before: an empty/truncated/footer-less .mcap raised rosbags' ReaderError (file not named, not
skipped); a stale duplicate joint name was imported (its value at every step); stamps stepping
back or reused with other values were sorted into a backwards / doubled action sequence; a
LeRobot `meta/episodes` missing or doubling a row dropped 30 rows or imported a 4th episode; a
NaN action merged into NaN statistics.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from vam_cli.main import entry
from vam_data.contract import ContractError, contract_for
from vam_data.lerobot_import import import_lerobot
from vam_data.lerobot_v3 import LeRobotFormatError, export_lerobot
from vam_data.mcap_import import McapMapping, RecordingFormatError, import_mcap, read_episode
from vam_data.merge import merge_datasets
from vam_data.writing import write_imported
from vam_stack import msg_base, msgs
from vam_stack.recording import McapRecorder
from vam_data.dataset import Dataset, DatasetError

from yam_data import synthetic_yam_demos  # tests/support

pytestmark = pytest.mark.unit

C = contract_for("yam64")
NAMES = list(C.state_names)


def _joint_state(names, values, stamp_s):
    """A JointState built without msgs.joint_state_msg's checks (which refuse a duplicate name)."""
    return msg_base.msg_class("sensor_msgs/msg/JointState")(
        header=msg_base.header(msgs.time_from_ns(int(round(stamp_s * 1e9))), ""), name=list(names),
        position=np.asarray(values, np.float64), velocity=np.zeros(0), effort=np.zeros(0))


def recording(path, ticks=40, stale_duplicate=False, step_back_at=None, reused=0, rate=30.0, t0=5.0):
    """A clean recording (as tests/vam_data/test_mcap_import.py writes it) with one corruption:
    `stale_duplicate`: /joint_states carries 15 names, a stale `left_joint1` = 3.0 first;
    `step_back_at`: from that tick on, the targets' header stamps are 0.3 s behind (log time goes on);
    `reused`: that many extra targets reuse an earlier tick's stamp with other values."""
    with McapRecorder(path, origin_s=0.0) as rec:
        rec.write_string("instruction", "hand the block over", t0 - 0.5)
        t = t0
        for k in range(ticks):
            q = np.full(14, 0.5) + 0.01 * k
            if stale_duplicate:
                rec.write("joint_states", _joint_state(["left_joint1", *NAMES], [3.0, *q], t - 0.002), t - 0.002)
            else:
                rec.write_joint_state("joint_states", NAMES, q, t - 0.002)
            rec.write_image("stacked_image", np.full((48, 192, 3), k % 256, np.uint8), t - 0.001)
            stamp = t - (0.3 if step_back_at is not None and k >= step_back_at else 0.0)
            rec.write("teleop_command", _joint_state(NAMES, q + 0.05, stamp), t)
            if k < reused:
                rec.write("teleop_command", _joint_state(NAMES, q + 0.3, stamp), t + 0.0005)
            t += 1.0 / rate
    return path


def test_a_clean_recording_still_imports(tmp_path):
    d = read_episode(recording(tmp_path / "ok.mcap"), C, McapMapping())
    assert len(d) == 40
    np.testing.assert_allclose(d.actions, d.proprio + 0.05, atol=1e-6)


@pytest.mark.parametrize("cut", ["empty", "half", "no-footer", "not-mcap"])
def test_an_unreadable_mcap_is_one_line_naming_the_file_and_skip_bad_skips_it(tmp_path, capsys, cut):
    rec = tmp_path / "rec"
    good = recording(rec / "a_good.mcap")
    raw = good.read_bytes()
    bad = rec / "b_bad.mcap"
    bad.write_bytes({"empty": b"", "half": raw[:len(raw) // 2], "no-footer": raw[:-40],
                     "not-mcap": b"hello world" * 10}[cut])
    with pytest.raises(RecordingFormatError, match=r"b_bad\.mcap: unreadable \(ReaderError"):
        read_episode(bad, C, McapMapping())
    argv = ["import", "--format", "mcap", str(rec), "--preset", "yam64"]
    assert entry(argv + ["--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    errors = [line for line in err.replace("\r", "\n").splitlines() if "error:" in line]   # (the progress bar aside)
    assert "Traceback" not in err and len(errors) == 1 and "b_bad.mcap: unreadable" in errors[0]
    assert not (tmp_path / "out").exists()
    assert entry(argv + ["--skip-bad", "--out", str(tmp_path / "out")]) == 0
    assert "skipped b_bad.mcap: " in capsys.readouterr().out
    assert len(Dataset(tmp_path / "out").episodes) == 1


def test_a_joint_named_twice_is_refused_by_name(tmp_path):
    with pytest.raises(ContractError, match=r"/joint_states at 0.00 s names \['left_joint1'\] more than once \(15 names\)"):
        read_episode(recording(tmp_path / "dup.mcap", stale_duplicate=True), C, McapMapping())


def test_stamps_stepping_back_are_refused(tmp_path):
    with pytest.raises(ContractError, match=r"/teleop/joint_command stamps step back 0.267 s at 0.63 s"):
        read_episode(recording(tmp_path / "back.mcap", step_back_at=20), C, McapMapping())


def test_a_stamp_reused_with_other_values_is_refused(tmp_path):
    with pytest.raises(ContractError, match=r"/teleop/joint_command has two messages stamped .* with different values"):
        read_episode(recording(tmp_path / "reused.mcap", reused=5), C, McapMapping())
    with pytest.raises(RecordingFormatError):                   # and with --skip-bad nothing is left to import
        import_mcap(tmp_path / "reused.mcap", C, tmp_path / "out", skip_bad=True)


# --- LeRobot v3: meta/episodes agrees with data/ and the sidecar ---------------------------------

@pytest.fixture(scope="module")
def lerobot_src(yam_set, tmp_path_factory):
    root = tmp_path_factory.mktemp("lr") / "lossless"
    export_lerobot(yam_set, root, codec="lossless")
    return root


def _edit_episodes(src: Path, dst: Path, edit) -> Path:
    shutil.copytree(src, dst)
    path = next((dst / "meta" / "episodes").glob("*/*.parquet"))
    pq.write_table(edit(pq.read_table(path)), path)
    return dst


@pytest.mark.parametrize("edit, match", [
    (lambda t: t.filter(pa.compute.not_equal(t.column("episode_index"), 1)),
     r"data holds 12 rows of episode 1, which meta/episodes does not list"),
    (lambda t: pa.concat_tables([t, t.slice(1, 1)]), r"meta/episodes lists episode 1 twice"),
])
@pytest.mark.parametrize("skip_bad", [False, True])
def test_meta_episodes_that_disagree_with_the_data_are_refused(lerobot_src, tmp_path, edit, match, skip_bad):
    src = _edit_episodes(lerobot_src, tmp_path / "src", edit)
    with pytest.raises(LeRobotFormatError, match=match):
        import_lerobot(src, C, tmp_path / "out", skip_bad=skip_bad)
    assert not (tmp_path / "out").exists()


def test_a_sidecar_that_does_not_line_up_is_refused(lerobot_src, tmp_path):
    src = tmp_path / "src"
    shutil.copytree(lerobot_src, src)
    side = src / "meta" / "vam_stack.json"
    d = json.loads(side.read_text())
    d["episodes"] = d["episodes"][:2]
    side.write_text(json.dumps(d))
    with pytest.raises(LeRobotFormatError, match=r"vam_stack.json: lists 2 episodes, meta/episodes 3"):
        import_lerobot(src, C, tmp_path / "out")


# --- NaN / inf: refused at merge and at dataset load ------------------------------------------------

def _poisoned(root: Path, key: str, value: float) -> Path:
    demos = synthetic_yam_demos(2, 10, seed=3)
    write_imported(demos, C, root, {"format": "synthetic"})
    path = root / json.loads((root / "meta" / "episodes.jsonl").read_text().splitlines()[1])["file"]
    with np.load(path) as z:
        arrays = dict(z)
    arrays[key][4, 2] = value
    np.savez(path, **arrays)
    return path


@pytest.mark.parametrize("key, value", [("actions", np.nan), ("proprio", np.inf)])
def test_a_non_finite_value_is_refused_at_merge_and_at_load_naming_the_file(tmp_path, key, value):
    bad = _poisoned(tmp_path / "bad", key, value)
    good = tmp_path / "good"
    write_imported(synthetic_yam_demos(2, 10, seed=4), C, good, {"format": "synthetic"})
    want = rf"{bad.name}: {key}\[4, 2\] = {'nan' if np.isnan(value) else 'inf'}"
    with pytest.raises(DatasetError, match=want):
        merge_datasets([good, tmp_path / "bad"], tmp_path / "m")
    assert not (tmp_path / "m").exists() and not (tmp_path / "m.partial").exists()
    with pytest.raises(DatasetError, match=want):
        Dataset(tmp_path / "bad")
