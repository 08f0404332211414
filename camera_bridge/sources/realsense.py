"""Intel RealSense colour stream through pyrealsense2's sensor API (no pipeline).

The camera is found by serial number, its colour sensor is opened on the configured
width x height x fps x format profile and started into an `rs.syncer` (queue of one, so
the SDK keeps only the newest frame). `read_latest` polls the syncer without blocking. The
hardware timestamp (ms, device clock) is mapped onto the host monotonic clock with
`ClockMapper`; the hardware frame number gives dropped-frame counts.

Going through a sensor rather than `rs.pipeline` is what lets `rs.software_device()` stand in
for the camera in tests: a pipeline cannot see a software device, a sensor with a syncer can,
so the tests run this exact code with injected frames. pyrealsense2 needs Debian's
`libusb-1.0-0` at import time; `import_pyrealsense2()` raises an error saying so.

The SDK's own file format works both ways: `record_to` wraps the device in `rs.recorder`
(everything streamed is written; a reopened camera writes `<stem>_<n><ext>`), and a
`device` path plays a recording back through the same sensor code (`rs.context().load_device`),
checking that the recording's serial number is the configured one. SDK 2.59 writes
rosbag2 `.db3` files; earlier versions wrote ROS 1 `.bag`.
"""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from camera_bridge.config import CameraConfig
from camera_bridge.sources.base import (CameraDisconnected, CameraError, CameraSource, Clock, ClockMapper,
                                        EndOfStream, Frame)

DeviceFinder = Callable[[str], Any]  # serial -> rs.device (raises CameraError when absent)


def import_pyrealsense2():
    """Import pyrealsense2 or raise ImportError with the precise reason and the fix."""
    try:
        import pyrealsense2 as rs
    except ImportError as e:
        hint = " (install Debian's libusb-1.0-0: apt-get install libusb-1.0-0)" if "libusb" in str(e) else ""
        raise ImportError(f"pyrealsense2 cannot be imported: {e}{hint}") from e
    return rs


def find_device_by_serial(serial: str) -> Any:
    """The connected RealSense device with this serial number; CameraError lists what is there."""
    rs = import_pyrealsense2()
    devices = rs.context().query_devices()
    seen = []
    for dev in devices:
        s = dev.get_info(rs.camera_info.serial_number)
        if s == serial:
            return dev
        seen.append(s)
    raise CameraDisconnected("?", f"no RealSense with serial {serial!r} (connected: {seen or 'none'})")


class RealSenseSource(CameraSource):
    """RealSense colour camera identified by `cfg.serial`."""

    def __init__(self, cfg: CameraConfig, clock: Clock = time.monotonic,
                 find_device: DeviceFinder | None = None):
        super().__init__(cfg, clock)
        self.rs = import_pyrealsense2()
        self._find = find_device or find_device_by_serial
        self._sensor = None
        self._syncer = None
        self._recorder = None  # rs.recorder while recording (destroying it closes the file)
        self._playback = None  # rs.playback while replaying a recording
        self._playing = False  # the playback has been seen running since it was opened
        self.recordings: list[str] = []  # files written by this source
        self._mapper = ClockMapper()
        self.timestamp_domain = ""  # e.g. "hardware_clock"; "system_time" means no kernel metadata

    def _rs_format(self):
        return {"bgr8": self.rs.format.bgr8, "rgb8": self.rs.format.rgb8}[self.cfg.encoding]

    def _open(self) -> None:
        rs, cfg = self.rs, self.cfg
        device = self._open_playback() if cfg.is_file else self._find_live()
        if cfg.record_to:
            path = Path(cfg.record_to)
            if self.recordings:  # reopened: never overwrite the earlier part
                path = path.with_name(f"{path.stem}_{len(self.recordings)}{path.suffix}")
            self._recorder = rs.recorder(str(path), device)
            self.recordings.append(str(path))
            device = self._recorder
        want = (cfg.width, cfg.height, int(round(cfg.fps)), self._rs_format())
        available = []
        for sensor in device.query_sensors():
            for profile in sensor.get_stream_profiles():
                if profile.stream_type() != rs.stream.color or not profile.is_video_stream_profile():
                    continue
                vp = profile.as_video_stream_profile()
                have = (vp.width(), vp.height(), profile.fps(), profile.format())
                if have == want:
                    self._start(sensor, profile)
                    return
                available.append(f"{have[0]}x{have[1]}@{have[2]} {str(have[3]).split('.')[-1]}")
        raise CameraError(self.name, f"serial {cfg.serial!r} has no colour profile "
                                     f"{cfg.width}x{cfg.height}@{int(round(cfg.fps))} {cfg.encoding}; "
                                     f"available: {sorted(set(available))[:12]}")

    def _find_live(self):
        try:
            return self._find(self.cfg.serial)
        except CameraError as e:
            raise CameraDisconnected(self.name, e.detail) from None

    def _open_playback(self):
        rs, cfg = self.rs, self.cfg
        if not os.path.isfile(cfg.device):
            raise CameraDisconnected(self.name, f"recording not found: {cfg.device!r}")
        device = rs.context().load_device(cfg.device)
        recorded = device.get_info(rs.camera_info.serial_number)
        if recorded != cfg.serial:
            raise CameraError(self.name, f"recording {cfg.device!r} is of serial {recorded!r}, config says {cfg.serial!r}")
        self._playback = device.as_playback()
        self._playing = False
        self._playback.set_real_time(cfg.realtime)
        return device

    def _start(self, sensor, profile) -> None:
        rs = self.rs
        for option, value in ((rs.option.global_time_enabled, 0),  # raw device clock; ClockMapper maps it
                              (rs.option.frames_queue_size, 2)):  # SDK-side queue: newest frames only
            if sensor.supports(option) and not sensor.is_option_read_only(option):  # playback: read-only
                sensor.set_option(option, value)
        syncer = rs.syncer(1)  # keeps the newest frame only
        sensor.open(profile)
        try:
            sensor.start(syncer)
        except Exception:
            sensor.close()
            raise
        self._sensor, self._syncer = sensor, syncer
        self._mapper.reset()

    def _release(self) -> None:
        sensor, self._sensor, self._syncer = self._sensor, None, None
        if sensor is not None:
            for step in (sensor.stop, sensor.close):
                try:
                    step()
                except RuntimeError:  # already stopped or device gone: nothing left to release
                    continue
        self._recorder = None  # the recorder writes its file out when destroyed
        self._playback = None

    def _poll(self) -> Frame | None:
        if self._syncer is None:
            raise CameraDisconnected(self.name, "not open")
        newest = None
        while True:  # drain: with a queue of one this is normally a single frameset
            frames = self._syncer.poll_for_frames()
            if not frames:
                break
            newest = frames
        if self._playback is not None and not self._playing:
            # Right after start() the status can still read "stopped": only a playback seen
            # running (status or a frame) can have ended.
            self._playing = newest is not None or self._playback.current_status() == self.rs.playback_status.playing
        if newest is None:
            if self._playing and self._playback.current_status() == self.rs.playback_status.stopped:
                if not self.cfg.loop:
                    raise EndOfStream(self.name, f"end of recording {self.cfg.device!r}")
                self._release()
                self._open()  # replay from the start; the clock mapper resets on the jump back
            return None
        now = self.clock()
        color = newest.get_color_frame() if newest.size() else None
        if not color:
            return None
        vf = color.as_video_frame()
        # Copy out of the SDK's buffer so the frame returns to its pool at once.
        image = np.array(np.asanyarray(vf.get_data()), copy=True)  # [H, W, 3] uint8
        fmt = str(color.get_profile().format()).split(".")[-1]
        device_ms = float(color.get_timestamp())
        self.timestamp_domain = str(color.get_frame_timestamp_domain()).split(".")[-1]
        try:
            stamp = self._mapper.map(device_ms, now)
        except ValueError as e:        # the device's clock lied: this frame is refused, the mapping kept
            raise CameraError(self.name, f"frame {color.get_frame_number()} refused: {e}") from None
        return Frame(self.name, image, fmt, stamp, int(color.get_frame_number()), device_ms)
