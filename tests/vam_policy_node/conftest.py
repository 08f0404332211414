import dataclasses

import pytest
import torch

from vam_policy_node.networks.config import load_config
from vam_policy_node.networks.model import VideoActionModel


@pytest.fixture(scope="session")
def tiny_cfg():
    return load_config("tiny")


@pytest.fixture(scope="session")
def tiny_model(tiny_cfg):
    torch.manual_seed(0)
    return VideoActionModel(tiny_cfg).eval()


@pytest.fixture(scope="session")
def micro_cfg(tiny_cfg):
    """The tiny networks on 64x64 views (128x64 stacked: 32 DiT / 8 head tokens per latent
    frame), so behaviour tests that run many replans stay fast on a 2-core CI machine."""
    robot = dataclasses.replace(tiny_cfg.robot, camera_width=64, camera_height=64)
    return dataclasses.replace(tiny_cfg, name="micro", robot=robot)


@pytest.fixture(scope="session")
def micro_model(micro_cfg):
    torch.manual_seed(0)
    return VideoActionModel(micro_cfg).eval()
