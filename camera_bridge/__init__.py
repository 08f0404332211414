"""camera_bridge: synchronised multi-camera capture into the stacked frame-skip clip.

Plain Python (no rclpy). `CameraBridge(load_bridge_config())` reads the cameras, matches
them by timestamp, resizes, converts to RGB, stacks them and keeps the ring; `window()`
hands the policy uint8 [17, 168, 672, 3] RGB (robot) or [17, 224, 448, 3] (LIBERO).
"""
from camera_bridge.bridge import CameraBridge, CameraStatus, TickResult
from camera_bridge.config import BridgeConfig, CameraConfig, load_bridge_config
from camera_bridge.window import Window

__all__ = ["BridgeConfig", "CameraBridge", "CameraConfig", "CameraStatus", "TickResult", "Window",
           "load_bridge_config"]
