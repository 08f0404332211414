"""demo_recorder node: records episodes of the running graph into MCAP, started and stopped by services.

Services (std_srvs/Trigger): ~/start opens `<out_dir>/<prefix>_<NNN>.mcap` and records every
configured topic; ~/stop closes it (the answer names the file and the message counts);
~/discard closes and deletes it (a failed demonstration). Messages are taken serialised (raw
subscriptions) and written as received, with the node's clock as log time (sim time under
use_sim_time), the way `ros2 bag record` stores them. Latched topics (instruction, phase) are read
transient-local, so the values announced before ~/start still open the episode.
/diagnostics `demo_recorder: recording` says whether an episode is open and how many were written.
Parameters come from `recorder.RecorderConfig`. Core: `vam_data.recorder.EpisodeRecorder`.

    ros2 launch vam_stack record.launch.py sim_task:=handover seed:=7 out_dir:=runs/recordings
"""
from __future__ import annotations

from vam_stack.process_exit import quiet_stop_while_importing

quiet_stop_while_importing("demo_recorder")   # before the heavy imports below

import time

from rclpy.node import Node
from std_srvs.srv import Trigger

from vam_data.recorder import EpisodeRecorder, RecorderConfig
from vam_stack import ros
from vam_stack.topics import resolve

PARAMS = (*ros.params_from(RecorderConfig, ("out_dir", "prefix", "topics", "max_episode_s"),
                           ranges={"max_episode_s": (1.0, 3600.0)}), ros.DIAGNOSTICS_PERIOD)


class DemoRecorderNode(Node):
    def __init__(self, **node_kwargs):
        super().__init__("demo_recorder", **node_kwargs)
        p = ros.declare(self, PARAMS)
        try:
            self.cfg = RecorderConfig(out_dir=p["out_dir"], prefix=p["prefix"], topics=p["topics"],
                                      max_episode_s=p["max_episode_s"])
        except ValueError as e:
            raise ros.ParameterError(str(e)) from None
        rows = [resolve(n) for n in self.cfg.topic_names]
        self.core = EpisodeRecorder(self.cfg, latched={t.name for t in rows if t.qos == "latched"})
        self._subs = []
        for t in rows:
            qos = ros.qos(t, reader=t.qos != "latched")       # latched rows: the writer's transient-local profile
            self._subs.append(self.create_subscription(ros.ros_class(t.msgtype), t.name, self._callback(t), qos,
                                                       raw=True))
        self.create_service(Trigger, "~/start", self._start)
        self.create_service(Trigger, "~/stop", self._stop)
        self.create_service(Trigger, "~/discard", self._discard)
        self.diag_pub = ros.publisher(self, "diagnostics")
        self.create_timer(p[ros.DIAGNOSTICS_PERIOD.name], self._publish_diagnostics)
        self.get_logger().info(f"recording {list(self.cfg.topic_names)} into {self.cfg.out_dir}/ on ~/start")

    def _now_ns(self) -> int:
        return self.get_clock().now().nanoseconds

    def _callback(self, t):
        def on_message(data: bytes) -> None:
            self.core.on_message(t.name, t.msgtype, data, self._now_ns())
        return on_message

    def _start(self, request, response):
        try:
            path = self.core.start(self._now_ns())
        except (RuntimeError, OSError, ValueError) as e:
            response.success, response.message = False, str(e)
            return response
        response.success, response.message = True, str(path)
        self.get_logger().info(f"recording {path}")
        return response

    def _stop(self, request, response):
        done = self.core.stop()
        response.success = bool(done)
        response.message = (f"{done['path']}: {sum(done['messages'].values())} messages {done['messages']}"
                            if done else "not recording")
        if done.get("unreadable_joints"):     # marked in the file too (vam_data/recorder.py)
            lacking = ", ".join(f"{n} in {c} of {done['joint_states']}" for n, c in done["unreadable_joints"].items())
            response.message += (f"; MARKED: the driver could not read {lacking} /joint_states (NaN): those "
                                 f"steps have no measured state, the import refuses them")
            self.get_logger().warning(response.message)
        elif done:
            self.get_logger().info(response.message)
        return response

    def _discard(self, request, response):
        path = self.core.discard()
        response.success, response.message = path is not None, (f"deleted {path}" if path else "not recording")
        return response

    def _publish_diagnostics(self) -> None:
        self.diag_pub.publish(ros.diagnostics(self, [{
            "name": "demo_recorder: recording", "level": "ok", "hardware_id": "mcap",
            "message": "recording" if self.core.recording else "idle",
            "values": {"recording": self.core.recording, "episodes_written": self.core.episodes,
                       "out_dir": self.cfg.out_dir}}]))

    def destroy_node(self) -> None:
        done = self.core.stop()           # an open episode is closed, never lost
        if done:
            self.get_logger().info(f"closed {done['path']} on shutdown")
        super().destroy_node()


def trigger(node: Node, service: str, timeout_s: float = 10.0) -> tuple[bool, str]:
    """Call a std_srvs/Trigger service from a node spun on another thread; (success, message)."""
    client = node.create_client(Trigger, service)
    try:
        end = time.monotonic() + timeout_s
        while not client.service_is_ready():
            if time.monotonic() > end:
                raise TimeoutError(f"service {service} did not appear within {timeout_s:g} s")
            time.sleep(0.05)
        future = client.call_async(Trigger.Request())
        while not future.done():
            if time.monotonic() > end:
                raise TimeoutError(f"service {service} did not answer within {timeout_s:g} s")
            time.sleep(0.02)
        r = future.result()
        return bool(r.success), str(r.message)
    finally:
        node.destroy_client(client)


def main(args=None) -> None:
    ros.spin_node(DemoRecorderNode, args, exit_process=True)


if __name__ == "__main__":
    main()
