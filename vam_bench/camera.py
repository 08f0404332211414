"""`vam-stack bench camera`: per-tick cost of read + check + sync + resize + stack, 3 cameras.

Synthetic cameras run on a simulated clock that advances one camera period per tick, so
every tick reads three new 640x480 frames and writes one stacked 672x168 frame: the worst
case of the real loop, where half the ticks (60 Hz loop, 30 Hz cameras) find nothing new.
The synthetic render (one 640x480 copy plus the burnt-in counter) is part of "read" and is
also timed on its own (`render_ms_p50`) so it can be subtracted. `window()` (cutting and
copying the 17-frame clip) is timed separately: it runs once per replan, not per tick.
With `--loop S` the real deadline-paced loop also runs for S seconds on the wall clock and
its achieved rate is reported. Target on the 2-core CI machine: tick_ms_p50 <= 5.
"""
from __future__ import annotations

import argparse
import dataclasses
import time
from pathlib import Path

import cv2
import numpy as np

from camera_bridge.bridge import CameraBridge
from camera_bridge.config import INTERPOLATIONS, load_bridge_config
from camera_bridge.preprocess import ViewWriter
from camera_bridge.sources.base import Frame
from camera_bridge.sources.synthetic import PatternRenderer
from vam_stack.paths import config_dir


class _SimClock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", default=str(config_dir() / "cameras_synthetic.yaml"),
                        help="bridge YAML (section camera_bridge); its cameras must be synthetic")
    parser.add_argument("--ticks", type=int, default=600, help="timed ticks (each appends a frame)")
    parser.add_argument("--interpolation", choices=INTERPOLATIONS, default=None,
                        help="override the config's resize filter")
    parser.add_argument("--threads", type=int, default=None, help="cv2.setNumThreads (default: OpenCV's own)")
    parser.add_argument("--loop", type=float, default=0.0, help="also run the paced loop for this many seconds")
    parser.add_argument("--json", default=None, metavar="PATH", help="write the numbers as JSON here ('-' = stdout)")


def _pcts(samples_s: list[float]) -> tuple[float, float]:
    a = np.asarray(samples_s) * 1000.0
    return float(np.percentile(a, 50)), float(np.percentile(a, 99))


def _time_ticks(cfg, ticks: int) -> dict:
    clock = _SimClock()
    period = 1.0 / cfg.source_fps
    with CameraBridge(cfg, clock=clock) as bridge:
        for _ in range(cfg.buffer_frames + 10):  # fill the ring, warm caches
            bridge.tick()
            clock.t += period
        tick_s, window_s, appended = [], [], 0
        for i in range(ticks):
            t0 = time.perf_counter()
            result = bridge.tick()
            tick_s.append(time.perf_counter() - t0)
            appended += result.appended
            clock.t += period
            if i % 10 == 0:
                clock.t -= period  # window is cut between ticks, at the last frame's time
                t0 = time.perf_counter()
                win = bridge.window()
                window_s.append(time.perf_counter() - t0)
                clock.t += period
                if not win.ready:
                    raise RuntimeError(f"benchmark window not ready: {win.reasons}")
        buffer_bytes = bridge.buffer_bytes
        window_shape = list(win.frames.shape)
    p50, p99 = _pcts(tick_s)
    w50, _ = _pcts(window_s)
    return {"tick_ms_p50": p50, "tick_ms_p99": p99, "tick_ms_mean": float(np.mean(tick_s) * 1000.0),
            "appended_per_tick": appended / ticks, "window_ms_p50": w50,
            "buffer_mb": buffer_bytes / 2**20, "window_shape": window_shape}


def _time_resize(cfg, interpolation: str, n: int = 200) -> float:
    """p50 ms of one view's resize + BGR->RGB with `interpolation`."""
    cam = cfg.cameras[0]
    frame = Frame(cam.name, PatternRenderer(cam.width, cam.height).render(7), "bgr8", 0.0, 0)
    writer = ViewWriter(dataclasses.replace(cfg, interpolation=interpolation))
    dst = np.empty((cfg.view_height, cfg.view_width, 3), np.uint8)
    samples = []
    for _ in range(n):
        t0 = time.perf_counter()
        writer.write(frame, dst)
        samples.append(time.perf_counter() - t0)
    return _pcts(samples)[0]


def _time_render(cfg, n: int = 200) -> float:
    cam = cfg.cameras[0]
    r = PatternRenderer(cam.width, cam.height)
    samples = []
    for k in range(n):
        t0 = time.perf_counter()
        r.render(k)
        samples.append(time.perf_counter() - t0)
    return _pcts(samples)[0]


def _run_loop(cfg, seconds: float) -> dict:
    bridge = CameraBridge(cfg)  # wall clock: real pacing
    with bridge:
        bridge.start()
        time.sleep(seconds)
        hz, overruns = bridge.loop_hz, bridge.overruns
        win = bridge.window()
    return {"loop_hz": hz, "loop_target_hz": cfg.tick_hz, "loop_overruns": overruns, "loop_window_ready": win.ready}


def run(args: argparse.Namespace) -> int:
    cfg = load_bridge_config(Path(args.config))
    if any(c.kind != "synthetic" for c in cfg.cameras):
        print(f"error: {args.config} has non-synthetic cameras; the benchmark needs synthetic ones")
        return 2
    if args.interpolation:
        cfg = dataclasses.replace(cfg, interpolation=args.interpolation)
    if args.threads is not None:
        cv2.setNumThreads(args.threads)
    out = {"cameras": len(cfg.cameras), "source": f"{cfg.cameras[0].width}x{cfg.cameras[0].height}",
           "interpolation": cfg.interpolation, "cv2_threads": cv2.getNumThreads(), "ticks": args.ticks}
    out.update(_time_ticks(cfg, args.ticks))
    out["render_ms_p50"] = _time_render(cfg)
    for name in ("pyramid", "area", "linear"):
        out[f"resize_{name}_ms_p50"] = _time_resize(cfg, name)
    if args.loop > 0:
        out.update(_run_loop(cfg, args.loop))
    print(f"camera bridge, {out['cameras']} x {out['source']} -> {out['window_shape'][1:]} "
          f"({out['interpolation']}, cv2 threads {out['cv2_threads']}, {args.ticks} ticks)")
    print(f"  tick (read+check+sync+resize+stack): p50 {out['tick_ms_p50']:.2f} ms  p99 {out['tick_ms_p99']:.2f} ms"
          f"  (target p50 <= 5 ms)")
    print(f"  of which synthetic render per camera: {out['render_ms_p50']:.2f} ms;"
          f" resize+RGB per view: pyramid {out['resize_pyramid_ms_p50']:.2f} ms,"
          f" area {out['resize_area_ms_p50']:.2f} ms, linear {out['resize_linear_ms_p50']:.2f} ms")
    print(f"  window() {out['window_shape']}: p50 {out['window_ms_p50']:.2f} ms;  ring {out['buffer_mb']:.1f} MB")
    if "loop_hz" in out:
        print(f"  paced loop: {out['loop_hz']:.1f} Hz achieved of {out['loop_target_hz']:.0f} Hz,"
              f" {out['loop_overruns']} overruns, window ready: {out['loop_window_ready']}")
    if args.json:
        from vam_stack.outputs import write_json_output
        write_json_output(args.json, out)
    return 0
