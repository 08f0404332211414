"""The demo recorder's core: episodes start, stop, discard; latched values open each episode; nothing overwritten."""
import pytest

from vam_data.recorder import EpisodeRecorder, RecorderConfig
from vam_stack import msg_base, msgs
from vam_stack.recording import read_messages


def raw(msg):
    return msg_base.msgtype_of(msg), msgs.serialize(msg)


def test_episodes_are_numbered_and_latched_values_open_each_one(tmp_path):
    cfg = RecorderConfig(out_dir=str(tmp_path))
    rec = EpisodeRecorder(cfg, latched={"/vam/instruction"})
    rec.on_message("/vam/instruction", *raw(msgs.string_msg("hand it over")), 1_000)   # before any episode
    rec.on_message("/joint_states", *raw(msgs.joint_state_msg(["a"], [0.0])), 2_000)   # idle: not kept
    first = rec.start(3_000)
    for k in range(3):
        rec.on_message("/joint_states", *raw(msgs.joint_state_msg(["a"], [float(k)])), 4_000 + k)
    done = rec.stop()
    assert done["path"] == str(first) and first.name == "episode_000.mcap"
    assert done["messages"] == {"/vam/instruction": 1, "/joint_states": 3}
    got = list(read_messages(first))
    assert got[0][0] == "/vam/instruction" and got[0][2].data == "hand it over" and got[0][1] == 3_000
    assert [m.position[0] for t, _, m in got if t == "/joint_states"] == [0.0, 1.0, 2.0]
    second = rec.start(10_000)
    assert second.name == "episode_001.mcap"
    assert rec.discard() == str(second) and not second.exists() and first.exists()
    assert rec.start(11_000).name == "episode_001.mcap"        # the discarded index is free again
    rec.stop()
    assert rec.stop() == {} and rec.discard() is None


def test_a_second_start_is_refused_and_an_overlong_episode_closes_itself(tmp_path):
    now = [0.0]
    rec = EpisodeRecorder(RecorderConfig(out_dir=str(tmp_path), max_episode_s=5.0), clock=lambda: now[0])
    rec.start(1)
    with pytest.raises(RuntimeError, match="already recording"):
        rec.start(2)
    now[0] = 6.0
    rec.on_message("/joint_states", *raw(msgs.joint_state_msg(["a"], [0.0])), 3)
    assert not rec.recording and rec.episodes == 1


@pytest.mark.parametrize("kw, match", [
    (dict(topics="/joint_states,/nope"), r"topic '/nope' is not in the topic table"),
    (dict(topics="/joint_states,/joint_states"), "distinct"),
    (dict(prefix="../x"), "prefix must be"),
    (dict(max_episode_s=0.0), "max_episode_s"),
])
def test_the_config_names_the_bad_value(kw, match):
    with pytest.raises(ValueError, match=match):
        RecorderConfig(**kw)

