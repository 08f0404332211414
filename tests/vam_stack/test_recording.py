"""MCAP rosbag2 recorder: files that rosbags reads back with the right topics and content."""
from __future__ import annotations

import numpy as np
import pytest
from rosbags.interfaces import QosDurability, QosReliability
from rosbags.rosbag2 import Reader

from vam_stack import image_msgs, msg_base, msgs
from vam_stack.recording import McapRecorder, RecordingError, read_info, read_messages

pytestmark = pytest.mark.unit

ORIGIN = 1_700_000_000.0
PROPRIO = [f"proprio_{i}" for i in range(8)]


def _telemetry(step):
    return {"step": step, "tr": 1.25, "tr_steps": [1.0 + 0.05 * k for k in range(10)],
            "tr0": 1.0, "s": 0.25, "w_lang": 0.025, "w_plan": 0.075,
            "branches_computed": ["cond", "null_text", "plan"], "latency_ms": 12.5,
            "attention": np.ones((17, 490))}


def _record(path, steps=20, replan_every=10):
    rng = np.random.default_rng(0)
    frames = []
    with McapRecorder(path, origin_s=ORIGIN) as rec:
        for step in range(steps):
            t = step / 20.0  # LIBERO control rate
            frame = rng.integers(0, 256, (224, 448, 3), dtype=np.uint8)
            frames.append(frame)
            rec.write_image("stacked_image", frame, t)
            rec.write_joint_state("joint_states", PROPRIO, np.full(8, step * 0.01), t)
            rec.write_joint_state("joint_targets", [f"a{i}" for i in range(7)], np.zeros(7), t)
            if step % replan_every == 0:
                rec.write_telemetry(_telemetry(step), t, phase="planning")
    return rec, frames


def test_single_file_recording_reads_back_with_topics_counts_and_times(tmp_path):
    path = tmp_path / "run" / "recording.mcap"
    rec, _ = _record(path)
    assert path.is_file() and not any(p.name.startswith(".") for p in path.parent.iterdir())
    info = read_info(path)
    expected = {"/camera/stacked/image_raw": 20, "/joint_states": 20, "/vam/joint_targets": 20,
                "/vam/tr": 2, "/vam/tr0": 2, "/vam/s": 2, "/vam/w_lang": 2, "/vam/w_plan": 2,
                "/vam/latency_ms": 2, "/vam/tr_steps": 2, "/vam/telemetry": 2, "/vam/phase": 2}
    assert info.counts == expected == dict(rec.counts)
    assert info.topics["/camera/stacked/image_raw"] == "sensor_msgs/msg/Image"
    assert info.topics["/vam/tr_steps"] == "std_msgs/msg/Float32MultiArray"
    assert info.start_ns == 1_700_000_000_000_000_000
    assert info.duration_s == pytest.approx(19 / 20.0)


def test_recorded_content_and_header_stamps_match(tmp_path):
    path = tmp_path / "recording.mcap"
    _, frames = _record(path)
    images = [(t, m) for _, t, m in read_messages(path, ["/camera/stacked/image_raw"])]
    assert len(images) == 20
    for (t_ns, m), frame in zip(images, frames):
        assert msg_base.time_to_ns(m.header.stamp) == t_ns
        assert m.header.frame_id == "camera_stacked"
        np.testing.assert_array_equal(image_msgs.image_to_numpy(m), frame)
    by_topic = {}
    for topic, _, m in read_messages(path):
        by_topic.setdefault(topic, []).append(m)
    js = msgs.joint_state_to_numpy(by_topic["/joint_states"][5])
    assert js.names == PROPRIO and np.allclose(js.position, 0.05)
    assert msgs.float32_value(by_topic["/vam/tr"][1]) == 1.25
    assert by_topic["/vam/phase"][0].data == "planning"
    tel = msgs.json_from_msg(by_topic["/vam/telemetry"][1])
    assert tel["step"] == 10 and tel["branches_computed"] == ["cond", "null_text", "plan"]
    assert "attention" not in tel
    np.testing.assert_allclose(msgs.float32_array_to_numpy(by_topic["/vam/tr_steps"][0]),
                               _telemetry(0)["tr_steps"], rtol=1e-6)


def test_unknown_baseline_is_left_out_and_json_keeps_only_telemetry(tmp_path):
    path = tmp_path / "recording.mcap"
    with McapRecorder(path, origin_s=0.0) as rec:
        rec.write_telemetry({**_telemetry(0), "tr0": float("nan"), "actions": np.zeros((17, 7)),
                             "timing_ms": {"total": 12.5}}, 0.0)
        rec.write_telemetry({**_telemetry(10), "tr0": None}, 0.5)
    info = read_info(path)
    assert "/vam/tr0" not in info.counts and info.counts["/vam/tr"] == 2
    tel = [msgs.json_from_msg(m) for _, _, m in read_messages(path, ["/vam/telemetry"])]
    assert tel[0]["tr0"] is None and tel[1]["tr0"] is None
    assert tel[0]["timing_ms"] == {"total": 12.5}
    assert "actions" not in tel[0] and "attention" not in tel[0]


def test_qos_profiles_are_stored_per_topic(tmp_path):
    path = tmp_path / "recording.mcap"
    _record(path, steps=1)
    with Reader(path) as reader:
        qos = {c.topic: c.ext.offered_qos_profiles[0] for c in reader.connections}
    assert qos["/camera/stacked/image_raw"].reliability == QosReliability.BEST_EFFORT
    assert qos["/vam/tr"].reliability == QosReliability.RELIABLE
    assert qos["/vam/phase"].durability == QosDurability.TRANSIENT_LOCAL


def test_bag_directory_layout_has_metadata(tmp_path):
    path = tmp_path / "bag"
    _record(path, steps=3)
    assert (path / "metadata.yaml").is_file() and (path / "bag.mcap").is_file()
    assert read_info(path).counts["/joint_states"] == 3


def test_exception_inside_the_block_still_leaves_a_readable_file(tmp_path):
    path = tmp_path / "recording.mcap"
    with pytest.raises(RuntimeError, match="boom"):
        with McapRecorder(path, origin_s=0.0) as rec:
            rec.write_float32("tr", 1.0, 0.0)
            raise RuntimeError("boom")
    assert read_info(path).counts == {"/vam/tr": 1}


def test_misuse_is_rejected(tmp_path):
    path = tmp_path / "recording.mcap"
    with McapRecorder(path, origin_s=0.0) as rec:
        with pytest.raises(RecordingError, match="carries std_msgs/msg/Float32"):
            rec.write("tr", msgs.string_msg("x"), 0.0)
        with pytest.raises(KeyError, match="not in the topic table"):
            rec.write_float32("/vam/unknown", 1.0, 0.0)
        with pytest.raises(RecordingError, match="finite and >= 0"):
            rec.write_float32("tr", 1.0, -1.0)
        with pytest.raises(RecordingError, match="lacks \\['tr0'"):
            rec.write_telemetry({"tr": 1.0, "s": 0.0, "w_lang": 0.0, "w_plan": 0.0,
                                 "latency_ms": 1.0}, 0.0)
        with pytest.raises(msg_base.MessageError, match="finite"):
            rec.write_telemetry({**_telemetry(0), "s": float("inf")}, 0.0)
        with pytest.raises(msg_base.MessageError, match="uint8"):
            rec.write_image("stacked_image", np.zeros((4, 4, 3)), 0.0)
    assert sum(rec.counts.values()) == 0  # nothing half-written by the rejected calls
    with pytest.raises(RecordingError, match="closed"):
        rec.write_float32("tr", 1.0, 0.0)
    with pytest.raises(RecordingError, match="exists"):
        McapRecorder(path)
    with McapRecorder(path, origin_s=0.0, overwrite=True) as rec2:
        rec2.write_float32("s", 0.5, 0.0)
    assert read_info(path).counts == {"/vam/s": 1}


def test_foxglove_mcap_reader_decodes_the_file_independently(tmp_path):
    """The MCAP ecosystem's own reader (what Foxglove uses) opens and decodes the recording."""
    pytest.importorskip("mcap", reason="the `mcap` package (independent MCAP reader) is not installed")
    decoder = pytest.importorskip(
        "mcap_ros2.decoder", reason="`mcap-ros2-support` (independent CDR decoder) is not installed")
    from mcap.reader import make_reader

    path = tmp_path / "recording.mcap"
    _, frames = _record(path, steps=3, replan_every=2)
    with path.open("rb") as f:
        reader = make_reader(f, validate_crcs=True, decoder_factories=[decoder.DecoderFactory()])
        assert reader.get_header().profile == "ros2"
        summary = reader.get_summary()
        for ch in summary.channels.values():
            assert ch.message_encoding == "cdr"
            assert summary.schemas[ch.schema_id].encoding == "ros2msg"
        images, trs = [], []
        for _, ch, _, decoded in reader.iter_decoded_messages(
                topics=["/camera/stacked/image_raw", "/vam/tr"]):
            (images if ch.topic.startswith("/camera") else trs).append(decoded)
    assert len(images) == 3 and trs[0].data == 1.25
    img = images[2]
    assert (img.height, img.width, img.encoding) == (224, 448, "rgb8")
    np.testing.assert_array_equal(np.frombuffer(bytes(img.data), np.uint8).reshape(224, 448, 3),
                                  frames[2])


def test_concurrent_writers_share_one_recorder(tmp_path):
    import threading

    path = tmp_path / "recording.mcap"
    with McapRecorder(path, origin_s=0.0) as rec:
        def worker(k):
            for i in range(50):
                rec.write_float32(("tr", "s", "w_lang", "w_plan")[k], float(i), i * 0.01)
        threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    assert read_info(path).counts == {"/vam/tr": 50, "/vam/s": 50, "/vam/w_lang": 50,
                                      "/vam/w_plan": 50}
