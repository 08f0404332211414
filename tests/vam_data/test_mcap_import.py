"""MCAP recordings -> training set: ticks from the targets, the newest state and frame at each, names reordered,
and every way a recording can lie refused by name before anything is written."""
import numpy as np
import pytest

from vam_data.contract import ContractError, contract_for
from vam_data.mcap_import import McapMapping, RecordingFormatError, import_mcap, read_episode
from vam_stack.recording import McapRecorder
from vam_data.dataset import Dataset
from yam_data import write_recording  # tests/support

C = contract_for("yam64")
NAMES = list(C.state_names)


def test_a_recording_becomes_aligned_steps(tmp_path):
    d = read_episode(write_recording(tmp_path / "a.mcap"), C, McapMapping())
    assert len(d) == 40 and d.instruction == "hand the block over"
    k = np.arange(40)
    np.testing.assert_allclose(d.proprio[:, 0], 0.5 + 0.01 * k, atol=1e-6)
    np.testing.assert_allclose(d.actions, d.proprio + 0.05, atol=1e-6)       # reordered back by name
    np.testing.assert_array_equal(d.stacked[:, 0, 0, 0], k)                  # the frame of the same tick
    assert d.stacked.shape[1:] == C.frame_shape
    np.testing.assert_array_equal(d.phase_codes, (k >= 20).astype(np.uint8))
    assert d.meta["frame_age_ms"] == {"median": 1.0, "p90": 1.0, "max": 1.0}     # written 1 ms before each tick


def test_the_action_is_the_raw_command_unless_the_mapping_names_the_filtered_stream(tmp_path):
    path = write_recording(tmp_path / "a.mcap")
    raw = read_episode(path, C, McapMapping())
    filtered = read_episode(path, C, McapMapping(targets="/vam/joint_targets"))
    assert raw.actions.max() > 0.52 and filtered.actions.max() <= 0.52 + 1e-6
    np.testing.assert_allclose(filtered.proprio, raw.proprio)


def test_bigger_views_are_fitted_and_the_folder_imports_as_one_dataset(tmp_path):
    for i in range(2):
        write_recording(tmp_path / "rec" / f"ep_{i}.mcap", view=(128, 96))
    info = import_mcap(tmp_path / "rec", C, tmp_path / "out", task="handover")
    ds = Dataset(tmp_path / "out")
    assert info["total_episodes"] == 2 and ds.info["frame_shape"] == [48, 192, 3]
    assert [e.meta["task"] for e in ds.episodes] == ["handover"] * 2
    assert ds.info["imported_from"]["topics"]["action"] == "/teleop/joint_command"


@pytest.mark.parametrize("kw, match", [
    (dict(rate=20.0), r"runs at 20.00 Hz \(mean period over the recording\), the yam64 contract at 30 Hz"),
    (dict(gap_at=20), r"/teleop/joint_command pauses 0.233 s at .* dropped messages"),
    (dict(frame_every=10), r"/camera/stacked/image_raw is 0.\d+ s old at .*max_age_s"),
    (dict(gripper_scale=80.0), r"/joint_states: left_gripper spans \[40, 40\]; the yam64 contract keeps it in \[0, 1\]"),
    (dict(drop=("instruction",)), r"topic /vam/instruction is not recorded"),
    (dict(drop=("joint_states",)), r"topic /joint_states is not recorded"),
    (dict(view=(128, 80)), r"view 'top' is 128x80 \(aspect 1.600\), .* resizing would stretch"),
])
def test_a_recording_that_lies_is_refused_by_name_and_nothing_is_written(tmp_path, kw, match):
    (tmp_path / "rec").mkdir()
    write_recording(tmp_path / "rec" / "good.mcap")
    write_recording(tmp_path / "rec" / "z_bad.mcap", **kw)
    with pytest.raises((ContractError, RecordingFormatError), match=match):
        import_mcap(tmp_path / "rec", C, tmp_path / "out")
    assert not (tmp_path / "out").exists() and not (tmp_path / "out.partial").exists()


def test_a_missing_joint_name_is_refused(tmp_path):
    path = tmp_path / "a.mcap"
    with McapRecorder(path, origin_s=0.0) as rec:
        rec.write_string("instruction", "x", 0.1)
        for k in range(5):
            t = 1 + k / 30
            rec.write_joint_state("joint_states", NAMES[:13] + ["left_wrist_roll"], np.full(14, 0.5), t - 0.002)
            rec.write_image("stacked_image", np.zeros((48, 192, 3), np.uint8), t - 0.001)
            rec.write_joint_state("teleop_command", NAMES, np.full(14, 0.5), t)
    with pytest.raises(ContractError, match=r"/joint_states at 0.00 s lacks joints \['right_gripper'\]"):
        read_episode(path, C, McapMapping())


def test_the_mapping_refuses_values_that_would_switch_checks_off():
    with pytest.raises(ValueError, match="max_age_s must be in"):
        McapMapping(max_age_s=0)
    with pytest.raises(ValueError, match="max_gap_ticks"):
        McapMapping(max_gap_ticks=1e9)
    with pytest.raises(ValueError, match="must be a topic name"):
        McapMapping(targets="joint_targets")


def test_skip_bad_leaves_out_a_failing_recording_and_names_it(tmp_path):
    (tmp_path / "rec").mkdir()
    write_recording(tmp_path / "rec" / "a.mcap")
    write_recording(tmp_path / "rec" / "b.mcap", frame_every=10)
    info = import_mcap(tmp_path / "rec", C, tmp_path / "out", skip_bad=True)
    assert info["total_episodes"] == 1
    [bad] = info["imported_from"]["skipped"]
    assert bad["recording"] == "b.mcap" and "max_age_s" in bad["reason"]
    assert Dataset(tmp_path / "out").info["imported_from"]["skipped"] == [bad]
    (tmp_path / "only_bad").mkdir()
    write_recording(tmp_path / "only_bad" / "b.mcap", frame_every=10)
    with pytest.raises(RecordingFormatError, match="every one of the 1 recordings failed a check; the first: b.mcap"):
        import_mcap(tmp_path / "only_bad", C, tmp_path / "out2", skip_bad=True)


def test_a_timing_refusal_names_the_measure_no_tolerance_takes(tmp_path):
    # a loaded machine's recording: a pause the flags can take, but the targets at 20 Hz (52 % off): the refusal
    # said "beyond what --max-gap-ticks allows (30)" for a 7.8-period pause
    with pytest.raises(ContractError) as e:
        read_episode(write_recording(tmp_path / "a.mcap", rate=19.77, gap_at=20), C, McapMapping())
    text = str(e.value)
    assert "no tolerance takes it: /teleop/joint_command runs at " in text and "--rate-tolerance allows (0.5)" in text
    assert "--max-gap-ticks allows" not in text, text
