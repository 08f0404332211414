"""Shared fixtures of the training tests."""
import pytest


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """Two scripted-expert goal episodes (tasks 1 and 6, 9 steps each) as a dataset on disk; a
    test module that defines its own `data` uses that one instead."""
    from vam_sim.libero_mock import LiberoMockConfig, rollout_expert
    from vam_sim.collect import bridge_info
    from vam_data.dataset import Dataset, write_dataset

    root = tmp_path_factory.mktemp("ds") / "demos"
    demos = [rollout_expert("goal", 1, 0, 9), rollout_expert("goal", 6, 0, 9)]
    return Dataset(write_dataset(root, demos, bridge_info(LiberoMockConfig())))
