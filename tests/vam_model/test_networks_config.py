import dataclasses

import pytest

from vam_model.networks.config import PRESETS, DiTConfig, HeadConfig, ModelConfig, load_config
from vam_model.networks.video_solver import sigma_grid
from vam_stack.config import ConfigError, from_dict, to_dict

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("preset", PRESETS)
def test_presets_load_and_round_trip(preset):
    cfg = load_config(preset)
    assert cfg.name == preset
    assert from_dict(ModelConfig, to_dict(cfg)) == cfg


def test_sigma_grid_reproduces_paper_values():
    grid = sigma_grid(load_config("real").solver)
    assert len(grid) == 6
    paper = {0: 1.000, 1: 0.953, 2: 0.883, 4: 0.562, 5: 0.024}
    for i, v in paper.items():
        assert round(grid[i], 3) == v, (i, grid[i])
    assert all(a > b for a, b in zip(grid, grid[1:]))


def test_token_geometry():
    real, libero, tiny = (load_config(p) for p in ("real", "libero", "tiny"))
    assert real.latent_hw == (21, 84) and real.dit_tokens_per_frame == 462
    assert libero.dit_tokens_per_frame == 392 and libero.head_tokens_per_frame == 98
    assert (tiny.latent_hw, tiny.dit_grid, tiny.head_grid) == (libero.latent_hw, libero.dit_grid, libero.head_grid)
    assert real.head_video_tokens == 5 * 126


def test_bad_values_are_quoted():
    with pytest.raises(ConfigError, match="feature_block.*99"):
        DiTConfig(feature_block=99)
    with pytest.raises(ConfigError, match="kv_heads.*3"):
        HeadConfig(heads=8, kv_heads=3)
    with pytest.raises(ConfigError, match="did you mean 'layers'"):
        from_dict(DiTConfig, {"layer": 4})
    with pytest.raises(ConfigError, match="expected an integer"):
        from_dict(DiTConfig, {"layers": "four"})


def test_unknown_preset_suggests():
    with pytest.raises(ConfigError, match="did you mean 'tiny'"):
        load_config("tiyn")


def test_frames_must_match_latent_frames():
    cfg = load_config("tiny")
    with pytest.raises(ConfigError, match="latent frames"):
        dataclasses.replace(cfg, solver=dataclasses.replace(cfg.solver, latent_frames=6, plan_latent_frames=9))
