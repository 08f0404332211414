"""libero_bridge node: the mocked LIBERO environment on the topics of cameras and driver.

Out: the stacked frame and each view (as camera_bridge publishes them; with `publish_compressed`
also as JPEG on <topic>/compressed, image_transport's compressed transport), /joint_states (the
8-dim proprio, named), /vam/instruction at every episode start, to each node that subscribes
to it before the policy acts (so the policy starts the episode, however late it comes up), /libero/episode_status (latched JSON). In: /vam/joint_targets
(the 7-dim end-effector delta, matched by name). A timer at the environment's control rate
observes and, once actions flow, steps it with the newest action; an action older than
`action_timeout_s` is replaced by a hold (zero motion, gripper command kept), as the real
driver's watchdog would. Episodes follow each other (task, episode and seed as in the
closed-loop runner) until `episodes` have run.
"""
from __future__ import annotations

from vam_stack.process_exit import quiet_stop_while_importing

quiet_stop_while_importing("libero_bridge")   # before the heavy imports below

import time

import numpy as np
from rclpy.node import Node

from vam_sim.libero_mock.config import LiberoMockConfig
from vam_sim.libero_mock.env import make_env, validate_action
from vam_sim.libero_mock.tasks import SUITES
from vam_stack import image_msgs, msgs, rclpy_msgs, ros
from vam_stack.estop import EstopService
from vam_stack.topics import LIBERO_ACTION_NAMES, LIBERO_PROPRIO_NAMES, camera_topic

P = ros.Param
PARAMS = (
    P("suite", "goal", "LIBERO suite", choices=SUITES),
    P("first_task", 0, "task of the first episode; tasks cycle from here", range=(0, 9)),
    P("episodes", 1, "episodes to run, one after the other", range=(1, 100000)),
    P("seed", 0, "seed id hashed into every initial state", range=(0, 2**31 - 1)),
    P("max_steps", 0, "cap on episode length in steps; 0 = the suite's limit", range=(0, 100000)),
    P("config_file", "", "environment YAML (section libero_mock); empty = config/libero_mock.yaml"),
    P("action_timeout_s", 0.3, "an action older than this is replaced by a hold [s]", range=(0.01, 10.0)),
    P("publish_compressed", False, "also publish each image as JPEG (sensor_msgs/CompressedImage) on "
                                   "<topic>/compressed, image_transport's compressed transport"),
    P("jpeg_quality", image_msgs.JPEG_QUALITY_DEFAULT, "JPEG quality of the compressed images (image_transport's "
                                                 "jpeg_quality)", range=(1, 100)),
)


class LiberoBridgeNode(Node):
    def __init__(self, **node_kwargs):
        super().__init__("libero_bridge", **node_kwargs)
        p = self.p = ros.declare(self, PARAMS)
        self.env_cfg = LiberoMockConfig.from_file(ros.config_path(p["config_file"], "libero_mock.yaml"))
        keys = ("stacked_image", "joint_states", "instruction", "episode_status")
        self.pub = {k: ros.publisher(self, k) for k in keys}
        self.view_pubs = {v: self.create_publisher(ros.ros_class("sensor_msgs/msg/Image"), camera_topic(v).name,
                                                   ros.qos(camera_topic(v))) for v in ("agentview", "wrist")}
        jpeg = p["publish_compressed"]
        self.jpeg_pubs = {k: ros.publisher(self, name) for k, name in (
            ("stacked", "stacked_image_compressed"), ("agentview", camera_topic("agentview", compressed=True).name),
            ("wrist", camera_topic("wrist", compressed=True).name))} if jpeg else {}
        ros.subscription(self, "joint_targets", self._on_action)
        # the arm's e-stop here, as yam_driver's on the robot (vam_stack/estop.py): actions ignored, a hold
        self.estopped = False
        ros.subscription(self, "estop", lambda m: self._estop(bool(m.data)))
        self.estop_service = EstopService(self, self._estop)
        self.index, self.results = 0, []
        self._action, self._action_t, self._acting = None, -1e9, False
        self._begin()
        self.create_timer(1.0 / self.env_cfg.control_hz, self._tick)

    def _begin(self) -> None:
        """Reset the environment for episode `index`; announce its instruction."""
        p = self.p
        task, rep = (p["first_task"] + self.index) % 10, self.index // 10
        self.env = make_env(p["suite"], task, rep, p["seed"], render=True, cfg=self.env_cfg)
        if p["max_steps"]:
            self.env.max_steps = min(self.env.max_steps, p["max_steps"])
        self.obs = self.env.reset()
        self._acting, self._action = False, None
        self._heard_by: set[str] = set()     # nodes this episode's instruction reached
        self._announce()
        self._status()
        self.get_logger().info(f"episode {self.index}: {p['suite']} task {task} rep {rep}: {self.env.instruction!r}")

    def _announce(self) -> None:
        """Publish the episode's instruction to every node that listens for it, once each, until the
        policy acts: a node that subscribes later (the policy node subscribes once its model is
        built) still hears it. Subscribers read the latched instruction volatile
        (vam_stack.ros.subscription), so one published before they subscribed would be lost."""
        if self._acting:
            return
        topic = self.pub["instruction"].topic_name
        listeners = {f"{i.node_namespace.rstrip('/')}/{i.node_name}" for i in self.get_subscriptions_info_by_topic(topic)}
        if not listeners - self._heard_by:
            return
        self.pub["instruction"].publish(ros.to_ros(msgs.string_msg(self.env.instruction)))
        self._heard_by |= listeners

    def _estop(self, on: bool) -> str:
        if on != self.estopped:
            self.estopped = on
            self.get_logger().warning("e-stop: holding, actions ignored" if on else "e-stop released")
        return ("e-stop latched: libero_bridge holds the arm (no motion, gripper kept), actions ignored" if on
                else "e-stop released: libero_bridge steps the policy's actions again")

    def _on_action(self, msg) -> None:
        try:
            js = msgs.joint_state_to_numpy(msg)
            if sorted(js.names) != sorted(LIBERO_ACTION_NAMES):
                raise ValueError(f"action names must be {list(LIBERO_ACTION_NAMES)}, got {js.names}")
            self._action = validate_action(js.position[[js.names.index(n) for n in LIBERO_ACTION_NAMES]])
            self._action_t, self._acting = time.monotonic(), True
        except ValueError as e:
            self.get_logger().error(f"action rejected (holding): {e}")

    def _tick(self) -> None:
        self._announce()
        if self.env.done:
            if self.index + 1 >= self.p["episodes"]:
                return
            self.index += 1
            self._begin()
        elif self._acting:
            fresh = (self._action is not None and not self.estopped
                     and time.monotonic() - self._action_t <= self.p["action_timeout_s"])
            action = self._action if fresh else np.zeros(7)
            if not fresh and self._action is not None:
                action[6] = self._action[6]  # hold: no motion, gripper command kept
            self.obs, _, done, info = self.env.step(action.astype(np.float32))
            if done:
                self.results.append(bool(info["success"]))
                self.get_logger().info(f"episode {self.index} ended: {info['termination']} after {self.env.steps} steps "
                                       f"({sum(self.results)}/{len(self.results)} successes)")
            self._status()
        stamp = ros.stamp(self)
        self.pub["stacked_image"].publish(ros.image(self, "stacked_image", self.obs["stacked"], stamp))
        for view, pub in self.view_pubs.items():
            pub.publish(ros.image(self, camera_topic(view), self.obs[view], stamp))
        for view, pub in self.jpeg_pubs.items():
            frame_id = "camera_stacked" if view == "stacked" else camera_topic(view).frame_id
            pub.publish(ros.to_ros(image_msgs.compressed_image_msg(self.obs[view], stamp, frame_id,
                                                             quality=self.p["jpeg_quality"])))
        self.pub["joint_states"].publish(rclpy_msgs.joint_state(LIBERO_PROPRIO_NAMES, self.obs["proprio"],
                                                                 stamp_ns=stamp.sec * 1_000_000_000 + stamp.nanosec))

    def _status(self) -> None:
        e = self.env
        info = e.last_info
        status = {"suite": e.task.suite, "task": e.task.index, "episode": self.index, "instruction": e.instruction,
                  "step": e.steps, "success": bool(info.get("success", False)), "done": e.done,
                  "reason": e.termination or "", "successes": sum(self.results), "finished": len(self.results)}
        self.pub["episode_status"].publish(ros.to_ros(msgs.json_msg(status)))


def main(args=None) -> None:
    ros.spin_node(LiberoBridgeNode, args, exit_process=True)


if __name__ == "__main__":
    main()
