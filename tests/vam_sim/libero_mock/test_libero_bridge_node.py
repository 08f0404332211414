"""libero_bridge node through rclpy: observations out, the instruction once a policy
publishes joint targets, nothing stepped before an action, steps driven by /vam/joint_targets, holds on stale actions, bad actions
rejected, episodes chained."""
from __future__ import annotations

import json

import numpy as np
import pytest
from rclpy.parameter import Parameter

from vam_sim.libero_mock.node import LiberoBridgeNode
from vam_stack import image_msgs, msgs, ros
from vam_stack.topics import LIBERO_ACTION_NAMES, LIBERO_PROPRIO_NAMES, camera_topic

pytestmark = pytest.mark.adapter


def make(h, **params):
    out = {k: h.capture(k) for k in ("stacked_image", "joint_states", "instruction", "episode_status")}
    out["wrist"] = h.capture(camera_topic("wrist").name)
    params = {"episodes": 2, "max_steps": 4, "suite": "spatial", **params}
    node = h.add(LiberoBridgeNode(parameter_overrides=[Parameter(k, value=v) for k, v in params.items()]))
    assert h.spin_until(lambda: len(out["stacked_image"]) >= 2 and out["instruction"])
    # a policy node whose model took long to build subscribes late: it hears the instruction too, once
    late = h.add(h.rclpy.create_node("late_policy"))
    heard: list = []
    ros.subscription(late, "instruction", heard.append)
    assert h.spin_until(lambda: heard, timeout=5), "a late subscriber never heard the episode's instruction"
    h.spin_for(0.3)
    assert len(heard) == 1 and heard[0].data == node.env.instruction
    return h, node, out


@pytest.fixture
def sim(ros_harness):
    return make(ros_harness)


def status(out):
    return json.loads(out["episode_status"][-1].data)


def test_observes_without_stepping_until_actions_come_then_chains_episodes(sim):
    h, node, out = sim
    assert h.spin_until(lambda: len(out["stacked_image"]) >= 2 and out["instruction"] and out["wrist"])
    img = out["stacked_image"][-1]
    assert (img.width, img.height, img.header.frame_id) == (448, 224, "camera_stacked")
    js = msgs.joint_state_to_numpy(out["joint_states"][-1])
    assert tuple(js.names) == LIBERO_PROPRIO_NAMES and js.position.shape == (8,)
    assert out["instruction"][0].data == node.env.instruction and status(out)["step"] == 0
    assert node.env.steps == 0, "the episode must not run before the policy acts"
    order = list(LIBERO_ACTION_NAMES)[::-1]
    act = lambda: h.publish("joint_targets", msgs.joint_state_msg(order, [0.0] * 6 + [0.2]))  # noqa: E731
    assert h.spin_until(lambda: status(out)["episode"] == 1, every=act, period=0.1)
    done = [json.loads(m.data) for m in out["episode_status"] if json.loads(m.data)["done"]]
    assert done[0]["episode"] == 0 and done[0]["reason"] == "timeout" and done[0]["step"] == 4
    # episode 0 was announced twice (a listener joined late: the broadcast reaches every listener), episode 1 once
    assert len(out["instruction"]) == 3 and node.results == [False]


def test_bad_actions_are_rejected_and_stale_ones_held(ros_harness):
    h, node, out = make(ros_harness, max_steps=8, action_timeout_s=0.01)
    assert h.spin_until(lambda: out["instruction"])
    h.publish("joint_targets", msgs.joint_state_msg(["x"] * 1, [0.0]))
    h.publish("joint_targets", msgs.joint_state_msg(list(LIBERO_ACTION_NAMES), [0.5] + [0.0] * 5 + [1.0]))
    assert h.spin_until(lambda: node.env.steps >= 2)  # the action is stale by the second step
    assert any("action rejected" in e for e in h.errors("libero_bridge"))
    pos = node.env.world.gripper.pos.copy()
    assert h.spin_until(lambda: node.env.done, timeout=5.0)  # no more actions: holds until the step cap
    np.testing.assert_allclose(node.env.world.gripper.pos, pos, atol=1e-9)
    assert tuple(msgs.joint_state_to_numpy(out["joint_states"][-1]).names) == LIBERO_PROPRIO_NAMES


def test_publish_compressed_adds_the_jpeg_camera_topics(ros_harness):
    h = ros_harness
    jpeg = {k: h.capture(n) for k, n in (("stacked", "stacked_image_compressed"),
                                         ("wrist", camera_topic("wrist", compressed=True).name),
                                         ("agentview", camera_topic("agentview", compressed=True).name))}
    h, node, out = make(h, publish_compressed=True, jpeg_quality=90)
    assert h.spin_until(lambda: all(len(v) >= 2 for v in jpeg.values()))
    m = jpeg["stacked"][-1]
    assert m.format == "rgb8; jpeg compressed bgr8" and m.header.frame_id == "camera_stacked"
    # the two topics are separate DDS streams: the raw twin may arrive after its compressed frame
    same = lambda: [r for r in out["stacked_image"] if r.header.stamp == m.header.stamp]  # noqa: E731
    assert h.spin_until(lambda: same(), timeout=3.0), "the compressed frame must carry its raw frame's stamp"
    raw = same()
    frame = image_msgs.image_to_numpy(raw[0])
    decoded = image_msgs.compressed_image_to_numpy(m, shape=(224, 448, 3))
    assert np.abs(decoded.astype(int) - frame).mean() < 4 and m.data.size < frame.size / 4
    assert jpeg["wrist"][-1].header.frame_id == "wrist_camera"
    assert image_msgs.compressed_image_to_numpy(jpeg["agentview"][-1]).shape == (224, 224, 3)
    assert not h.errors("libero_bridge")
