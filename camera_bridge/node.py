"""camera_bridge node: each camera view and the stacked frame as sensor_msgs/Image
(sensor-data QoS), plus /diagnostics with per-camera rate, frame age and skew.

One `CameraBridge` (plain Python) reads, checks, synchronises, resizes and stacks the views
in its own deadline-paced thread, and publishes each stacked frame (frame id camera_stacked)
from that thread the moment it is complete (`CameraBridge.on_stacked`: no second clock between
the stacking and the publish), optionally with its views cut back out of it (frame ids
<view>_camera, so every published view is exactly the part of the stacked frame the policy
sees). Header stamps are the ROS time of the capture (now minus the frame's age). Only a
complete, synchronised set of views makes a stacked frame; a camera that is stale or failed
stops the stream, and diagnostics say why. Each frame's stage times (capture, host arrival,
stacked, published) go to `vam_stack.latency`'s debug topic for `vam-stack bench ros`.
With `publish_compressed`, every image also goes out as a JPEG sensor_msgs/CompressedImage on
<topic>/compressed, as image_transport's compressed transport names and formats it (for links
where raw rgb8 is too much: 10 MB/s for the stacked 672x168 frame at 30 Hz, twice that with its views).
The node takes no messages; its timers are guarded (`refusals.timer`): one that raises is logged,
rate-limited, and the next tick runs; a publish that raises is counted (`publish_errors`) and
logged by the bridge, which goes on. A camera frame stamped ahead of the host clock by more
than a frame period is refused by itself (`sources.base`), the window staying available.
"""
from __future__ import annotations

from vam_stack.process_exit import quiet_stop_while_importing

quiet_stop_while_importing("camera_bridge")   # before the heavy imports below

import dataclasses

from rclpy.node import Node

from camera_bridge.bridge import CameraBridge, Stacked
from camera_bridge.config import load_bridge_config
from vam_stack import image_msgs, msgs, refusals, ros
from vam_stack.latency import FLUSH_PERIOD_S, LatencyTrace
from vam_control.pacing import IncreasingStamps
from vam_stack.topics import camera_topic

P = ros.Param
PARAMS = (
    P("config_file", "", "camera YAML (section camera_bridge); empty = config/cameras.yaml"),
    P("publish_views", True, "also publish each view on /camera/<view>/image_raw"),
    P("publish_compressed", False, "also publish each image as JPEG (sensor_msgs/CompressedImage) on "
                                   "<topic>/compressed, image_transport's compressed transport"),
    P("jpeg_quality", image_msgs.JPEG_QUALITY_DEFAULT, "JPEG quality of the compressed images (image_transport's "
                                                 "jpeg_quality)", range=(1, 100)),
    P("rt_priority", 40, "SCHED_FIFO priority of the capture thread, which reads, stacks and publishes each frame "
                         "(below the policy's tick thread, 50); 0 = normal scheduling", range=(0, 99)),
    ros.DIAGNOSTICS_PERIOD,
)
# cameras of its own (not a simulator's, whose world process stays at normal scheduling): the rest of the
# process SCHED_FIFO below the capture thread, so a preempted executor never holds the GIL the capture needs
OWN_CAMERA_PARAMS = (dataclasses.replace(ros.PROCESS_RT_PRIORITY, default=35),)


class CameraBridgeNode(Node):
    def __init__(self, bridge: CameraBridge | None = None, **node_kwargs):
        super().__init__("camera_bridge", **node_kwargs)
        p = self.p = ros.declare(self, PARAMS + (OWN_CAMERA_PARAMS if bridge is None else ()))
        self.bridge = bridge or CameraBridge(load_bridge_config(ros.config_path(p["config_file"], "cameras.yaml")))
        cfg = self.bridge.cfg
        self.stacked_pub = ros.publisher(self, "stacked_image")
        self.diag_pub = ros.publisher(self, "diagnostics")
        self.view_pubs = {c.name: self.create_publisher(ros.ros_class("sensor_msgs/msg/Image"), camera_topic(c.name).name,
                                                        ros.qos(camera_topic(c.name)))
                          for c in cfg.cameras} if p["publish_views"] else {}
        jpeg = p["publish_compressed"]
        self.stacked_jpeg_pub = ros.publisher(self, "stacked_image_compressed") if jpeg else None
        self.view_jpeg_pubs = {name: ros.publisher(self, camera_topic(name, compressed=True).name)
                               for name in self.view_pubs} if jpeg else {}
        self.jpeg_bytes = 0   # size of the latest compressed stacked frame (diagnostics)
        self.published = 0   # stacked frames published (a subscriber's drop rate counts against it)
        self._last_skew_ms = float("nan")
        self._stamps = IncreasingStamps()   # stacked-frame stamps: strictly increasing (see _publish_frame)
        self.latency = LatencyTrace("camera_bridge")
        self._latency_pub = LatencyTrace.publisher(self)
        failed = self.bridge.connect(strict=False)
        for name, problem in failed.items():
            self.get_logger().error(f"camera {name!r} did not open ({problem}); retrying")
        self.bridge.on_stacked = self._publish_frame    # published by the bridge's thread as each frame completes
        self.bridge.start(p["rt_priority"])
        refusals.timer(self, p[ros.DIAGNOSTICS_PERIOD.name], self._publish_diagnostics, "diagnostics")
        refusals.timer(self, FLUSH_PERIOD_S, lambda: self.latency.flush(self._latency_pub), "latency trace")
        h, w, _ = cfg.stacked_shape
        self.get_logger().info(f"{len(cfg.cameras)} cameras stacked to {w}x{h} at {cfg.source_fps} Hz")

    def _publish_frame(self, st: Stacked) -> None:
        """The bridge's thread, once per completed stacked frame: publish it (and its views)."""
        clock_now, wall_ns = self.bridge.clock(), LatencyTrace.now_ns()
        ns = self.get_clock().now().nanoseconds - int((clock_now - st.stamp_s) * 1e9)
        # never a stamp before the last one: this runs on the bridge's thread, and under use_sim_time the
        # node's ROS clock is the last /clock its executor took in, which a busy executor leaves stale (a
        # frame stamped 70-95 ms before the one published just before it on a loaded machine)
        ns = self._stamps.next(max(ns, 0))
        stamp = msgs.time_from_ns(ns)
        self._last_skew_ms = float(st.skew_ms)
        frame = st.frame  # [H, W*cams, 3] RGB, the bridge's buffer until its next tick (published before it)

        def wall(t: float) -> int:       # a bridge-clock time as wall-clock ns
            return wall_ns - int((clock_now - t) * 1e9)
        msg = ros.image(self, "stacked_image", frame, stamp)
        published = LatencyTrace.now_ns()
        self.stacked_pub.publish(msg)
        times = {"capture": wall(st.stamp_s), "arrival": wall(st.arrival_s), "stacked": wall(st.stacked_s),
                 "published": published}
        if self.stacked_jpeg_pub is not None:
            jpeg = self._jpeg(frame, stamp, "camera_stacked")
            self.jpeg_bytes = len(jpeg.data)
            times["published_jpeg"] = LatencyTrace.now_ns()
            self.stacked_jpeg_pub.publish(jpeg)
        self.published += 1
        self.latency.note(ns, **times)
        vw = self.bridge.cfg.view_width
        for i, (name, pub) in enumerate(self.view_pubs.items()):
            view = frame[:, i * vw:(i + 1) * vw]
            pub.publish(ros.image(self, camera_topic(name), view, stamp))
            if name in self.view_jpeg_pubs:
                self.view_jpeg_pubs[name].publish(self._jpeg(view, stamp, camera_topic(name).frame_id))

    def _jpeg(self, image, stamp, frame_id: str):
        """rclpy CompressedImage (JPEG, image_transport's format) of an RGB array."""
        return ros.to_ros_bytes(image_msgs.compressed_image_msg(image, stamp, frame_id, quality=self.p["jpeg_quality"]))

    def _publish_diagnostics(self) -> None:
        refusals.flush_refusals(self)
        now = self.bridge.clock()
        statuses = []
        for st, src in zip(self.bridge.statuses(), self.bridge.sources):
            latest = getattr(src, "_latest", None)
            age = (now - latest.stamp_s) * 1000.0 if latest is not None else float("nan")
            statuses.append({"name": f"camera_bridge: {st.name}", "level": "ok" if st.ok else "error",
                             "message": st.message or "streaming", "hardware_id": src.cfg.serial or src.cfg.device,
                             "values": {"rate_hz": st.stats.measured_fps, "age_ms": age, "skew_ms": self._last_skew_ms,
                                        "frames": st.stats.frames, "dropped": st.stats.dropped,
                                        "reconnects": st.stats.reconnects, "connected": st.connected}})
        w = self.bridge.latest()
        statuses.append({"name": "camera_bridge: stacked", "level": "ok" if w.ready else "warn",
                         "message": "ready" if w.ready else "; ".join(w.reasons),
                         "values": {"published": self.published, "loop_hz": self.bridge.loop_hz,
                                    "overruns": self.bridge.overruns, "publish_errors": self.bridge.on_stacked_errors,
                                    "stamps_moved_past_a_stale_clock": self._stamps.bumped,
                                    **({"jpeg_bytes": self.jpeg_bytes} if self.stacked_jpeg_pub is not None else {}),
                                    "newest_age_ms": w.newest_age_ms if w.newest_age_ms is not None else float("nan"),
                                    "skew_ms": self._last_skew_ms}})
        self.diag_pub.publish(ros.diagnostics(self, statuses))

    def destroy_node(self) -> None:
        """Stop the capture thread and release every camera, then the ROS entities."""
        self.bridge.close()
        super().destroy_node()


def main(args=None) -> None:
    ros.spin_node(CameraBridgeNode, args, exit_process=True)


if __name__ == "__main__":
    main()
