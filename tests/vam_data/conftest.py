"""Small YAM datasets in this project's format, built without the simulator (valid ranges, smooth
joints, textured frames), for the import/export tests."""
import pytest
from yam_data import synthetic_yam_demos  # tests/support


@pytest.fixture(scope="module")
def yam_set(tmp_path_factory):
    """A 3-episode YAM dataset at yam64's geometry (64x48 views, 30 Hz)."""
    from vam_data.contract import contract_for
    from vam_data.writing import write_imported

    root = tmp_path_factory.mktemp("yam") / "demos"
    write_imported(synthetic_yam_demos(), contract_for("yam64"), root, {"format": "synthetic"})
    return root
