"""LeRobotDataset v3.0 export and import: the layout lerobot 0.4.4 writes, round trips, refusals by name.

`data/lerobot_v3_synth` was written by lerobot 0.4.4's own `LeRobotDataset.create / add_frame /
save_episode / finalize` (scripts/lerobot/make_reference.py): 2 episodes of 20 and 25 frames,
state[j] = 100 e + f + 0.01 j, action = state + 0.5, one 64x48 AV1 view of a flat colour
(R = (40 e + 10 f) % 256, G = 64, B = 128), tasks "pick up the red cube" / "place the cube in the bowl".
"""
import json
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from vam_data.contract import ContractError, DataContract, contract_for
from vam_data.lerobot_import import import_lerobot
from vam_data.lerobot_v3 import LeRobotFormatError, export_lerobot
from vam_data.dataset import Dataset

REFERENCE = Path(__file__).parent / "data" / "lerobot_v3_synth"


@pytest.fixture(scope="module")
def exported(yam_set, tmp_path_factory):
    root = tmp_path_factory.mktemp("lr")
    return {codec: (export_lerobot(yam_set, root / codec, codec=codec), root / codec) for codec in ("lossless", "av1")}


def same_episodes(a: Dataset, b: Dataset, frames_exact=True):
    assert len(a.episodes) == len(b.episodes)
    worst = 0
    for x, y in zip(a.episodes, b.episodes):
        np.testing.assert_array_equal(x.proprio, y.proprio)
        np.testing.assert_array_equal(x.actions, y.actions)
        np.testing.assert_array_equal(x.phase, y.phase)
        assert x.meta["instruction"] == y.meta["instruction"] and x.meta["seed"] == y.meta["seed"]
        fa, fb = x.decode_all().astype(int), y.decode_all().astype(int)
        assert fa.shape == fb.shape
        worst = max(worst, float(np.abs(fa - fb).mean()))
        if frames_exact:
            np.testing.assert_array_equal(fa, fb)
    return worst


def test_a_lossless_export_reimports_to_identical_samples(yam_set, exported, tmp_path):
    import_lerobot(exported["lossless"][1], contract_for("yam64"), tmp_path / "back")
    a, b = Dataset(yam_set), Dataset(tmp_path / "back")
    same_episodes(a, b)
    assert b.info["imported_from"]["format"] == "LeRobotDataset v3.0"
    for t in (0, 5, 20):             # what the trainer draws: the clip, the chunk of targets, the proprio
        sa, sb = a.sample(t, frames=5, chunk=8, skip=3), b.sample(t, frames=5, chunk=8, skip=3)
        for k in sa:
            np.testing.assert_array_equal(np.asarray(sa[k]), np.asarray(sb[k]))


def test_an_av1_export_keeps_every_number_and_frames_close(yam_set, exported, tmp_path):
    import_lerobot(exported["av1"][1], contract_for("yam64"), tmp_path / "back")
    worst = same_episodes(Dataset(yam_set), Dataset(tmp_path / "back"), frames_exact=False)
    assert worst < 6.0, f"AV1 frames differ by {worst:.1f} levels on average"


def test_the_export_has_the_layout_lerobot_writes(exported):
    info, root = exported["av1"]
    ref = json.loads((REFERENCE / "meta" / "info.json").read_text())
    assert set(ref) <= set(info) and info["codebase_version"] == ref["codebase_version"] == "v3.0"
    for key in ("data_path", "video_path", "chunks_size"):
        assert info[key] == ref[key]
    video = next(f for f in info["features"].values() if f["dtype"] == "video")
    assert set(video["info"]) == set(ref["features"]["observation.images.top"]["info"])
    assert video["info"]["video.codec"] == "av1"
    for rel in ("data/chunk-000/file-000.parquet", "meta/tasks.parquet"):
        ours, theirs = pq.read_schema(root / rel), pq.read_schema(REFERENCE / rel)
        for name in theirs.names:
            assert name in ours.names and ours.field(name).type == theirs.field(name).type, (rel, name)
    ours = pq.read_schema(next((root / "meta" / "episodes").glob("*/*.parquet")))
    theirs = pq.read_schema(next((REFERENCE / "meta" / "episodes").glob("*/*.parquet")))
    needed = [n.replace("observation.images.top", "observation.images.left_wrist") for n in theirs.names
              if not n.startswith("stats/")]          # lerobot's loader drops the stats columns
    assert not [n for n in needed if n not in ours.names]
    assert sorted(p.name for p in (root / "videos").iterdir()) == [
        "observation.images.left_wrist", "observation.images.right_wrist", "observation.images.top"]


def reference_contract() -> DataContract:
    names = tuple(f"joint_{j}" for j in range(14))
    return DataContract(preset="lerobot reference", robot="yam", state_names=names, action_names=names,
                        views=("top",), view_width=64, view_height=48, fps=30.0, action_type="absolute_joint")


def test_a_dataset_lerobot_wrote_imports_with_its_values(tmp_path):
    info = import_lerobot(REFERENCE, reference_contract(), tmp_path / "ref")
    ds = Dataset(tmp_path / "ref")
    assert info["total_episodes"] == 2 and [len(e) for e in ds.episodes] == [20, 25]
    assert [e.meta["instruction"] for e in ds.episodes] == ["pick up the red cube", "place the cube in the bowl"]
    for e, ep in enumerate(ds.episodes):
        f = np.arange(len(ep))[:, None]
        np.testing.assert_allclose(ep.proprio, 100 * e + f + 0.01 * np.arange(14), rtol=0, atol=1e-4)
        np.testing.assert_allclose(ep.actions, ep.proprio + 0.5, atol=1e-4)
        frames = ep.decode_all().astype(int)
        red = (40 * e + 10 * np.arange(len(ep))) % 256
        assert np.abs(frames[..., 0].mean(axis=(1, 2)) - red).max() < 4
        assert np.abs(frames[..., 1].mean() - 64) < 4 and np.abs(frames[..., 2].mean() - 128) < 4
        assert (ep.phase == 1).all()           # no phase feature: manipulation throughout


def edit_copy(src: Path, dst: Path, info=None, data=None) -> Path:
    shutil.copytree(src, dst)
    if info is not None:
        path = dst / "meta" / "info.json"
        d = json.loads(path.read_text())
        info(d)
        path.write_text(json.dumps(d))
    if data is not None:
        path = next((dst / "data").glob("*/*.parquet"))
        pq.write_table(data(pq.read_table(path)), path)
    return dst


def swap_grippers(d):
    for key in ("observation.state", "action"):
        names = d["features"][key]["names"]
        names[6], names[13] = names[13], names[6]


def scale_gripper(table):
    import pyarrow as pa

    state = np.stack(table.column("observation.state").to_numpy(zero_copy_only=False)).astype(np.float32)
    state[:, 6] *= 100.0
    col = pa.FixedSizeListArray.from_arrays(state.reshape(-1), 14)
    return table.set_column(table.column_names.index("observation.state"), "observation.state", col)


@pytest.mark.parametrize("edit, match", [
    (dict(info=swap_grippers), r"observation.state: joint order differs .* position 6 is 'right_gripper', "
                               r"expected 'left_gripper'"),
    (dict(data=scale_gripper), r"episode 0: observation.state: left_gripper spans \[\d+, \d+\.\d+\]; the yam64 contract keeps it "
                               r"in \[0, 1\] \(a percentage"),
    (dict(info=lambda d: d.update(fps=15)), r"rate is 15 Hz, the yam64 contract runs at 30 Hz"),
    (dict(info=lambda d: d.update(codebase_version="v2.1")), r"codebase_version is 'v2.1'"),
    (dict(info=lambda d: d["features"].pop("observation.images.right_wrist")),
     r"camera views \['right_wrist'\] are missing"),
    (dict(info=lambda d: d["features"]["action"].update(names=None)), r"action: the dimensions carry no names"),
])
def test_a_wrong_dataset_is_refused_by_name_and_nothing_is_written(exported, tmp_path, edit, match):
    src = edit_copy(exported["lossless"][1], tmp_path / "src", **edit)
    with pytest.raises((ContractError, LeRobotFormatError), match=match):
        import_lerobot(src, contract_for("yam64"), tmp_path / "out")
    assert not (tmp_path / "out").exists() and not (tmp_path / "out.partial").exists()


def test_views_larger_than_the_preset_are_fitted_and_smaller_ones_refused(exported, tmp_path):
    small = replace(contract_for("yam64"), view_width=32, view_height=24)
    info = import_lerobot(exported["lossless"][1], small, tmp_path / "small")
    assert info["frame_shape"] == [24, 96, 3]
    big = replace(contract_for("yam64"), view_width=128, view_height=96)
    with pytest.raises(ContractError, match=r"view 'top' is 64x48, smaller than .* 128x96"):
        import_lerobot(exported["lossless"][1], big, tmp_path / "big")


def test_skip_bad_leaves_out_an_episode_that_fails_its_own_checks(exported, tmp_path):
    def scale_second_episode(table):
        import pyarrow as pa

        state = np.stack(table.column("observation.state").to_numpy(zero_copy_only=False)).astype(np.float32)
        ep = table.column("episode_index").to_numpy()
        state[ep == 1, 13] = 50.0
        col = pa.FixedSizeListArray.from_arrays(state.reshape(-1), 14)
        return table.set_column(table.column_names.index("observation.state"), "observation.state", col)

    src = edit_copy(exported["lossless"][1], tmp_path / "src", data=scale_second_episode)
    with pytest.raises(ContractError, match="episode 1: observation.state: right_gripper spans"):
        import_lerobot(src, contract_for("yam64"), tmp_path / "out")
    info = import_lerobot(src, contract_for("yam64"), tmp_path / "out", skip_bad=True)
    assert info["total_episodes"] == 2
    assert [s["episode"] for s in info["imported_from"]["skipped"]] == [1]
    assert [e.meta["seed"] for e in Dataset(tmp_path / "out").episodes] == [100, 102]   # the sidecar still lines up
