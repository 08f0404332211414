"""`vam-stack merge`: datasets into one training base (statistics over all, sources checked)."""
import json

import numpy as np
import pytest

from vam_data.contract import contract_for
from vam_data.merge import merge_datasets
from vam_data.writing import write_imported
from vam_data.dataset import Dataset, DatasetError

from yam_data import synthetic_yam_demos  # tests/support

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def two_sets(tmp_path_factory):
    root = tmp_path_factory.mktemp("merge")
    a, b = root / "a", root / "b"
    write_imported(synthetic_yam_demos(2, 10, seed=1), contract_for("yam64"), a, {"format": "synthetic"})
    write_imported(synthetic_yam_demos(3, 14, seed=2), contract_for("yam64"), b, {"format": "synthetic"})
    return a, b


def test_the_merge_holds_every_episode_in_order_with_statistics_over_all(two_sets, tmp_path):
    a, b = two_sets
    info = merge_datasets([a, b], tmp_path / "m")
    assert info["total_episodes"] == 5 and info["total_frames"] == 2 * 10 + 3 * 14
    assert [m["dataset"] for m in info["merged_from"]] == [str(a), str(b)]
    merged, da, db = Dataset(tmp_path / "m"), Dataset(a), Dataset(b)
    for got, want in zip(merged.episodes, da.episodes + db.episodes):
        np.testing.assert_array_equal(got.actions, want.actions)
        np.testing.assert_array_equal(got.frame(3), want.frame(3))
    assert merged.episodes[2].meta["source"] == {"dataset": str(b), "index": 0}
    acts = np.concatenate([e.actions for e in da.episodes + db.episodes]).astype(np.float64)
    np.testing.assert_allclose(merged.stats["action_mean"], acts.mean(0), rtol=1e-12)
    assert set(merged.instructions) == set(da.instructions) | set(db.instructions)
    assert not (tmp_path / "m.partial").exists()


def test_sources_that_disagree_are_refused_by_key_and_nothing_is_written(two_sets, tmp_path):
    a, b = two_sets
    c = tmp_path / "c"
    write_imported(synthetic_yam_demos(1, 8), contract_for("yam64"), c, {"format": "synthetic"})
    info = json.loads((c / "meta" / "info.json").read_text())
    info["fps"] = 15.0
    (c / "meta" / "info.json").write_text(json.dumps(info))
    with pytest.raises(DatasetError, match=r"fps is 15.0, .* has 30.0"):
        merge_datasets([a, c], tmp_path / "m")
    info["fps"], info["action_names"] = 30.0, list(reversed(info["action_names"]))
    (c / "meta" / "info.json").write_text(json.dumps(info))
    with pytest.raises(DatasetError, match="action_names"):
        merge_datasets([a, c], tmp_path / "m")
    assert not (tmp_path / "m").exists() and not (tmp_path / "m.partial").exists()
    with pytest.raises(ValueError, match="named twice"):
        merge_datasets([a, a], tmp_path / "m")
