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
