"""``data.reader._target_`` selects the split reader (tta/data/registry.py): every conf/data choice names a reader
that exists and documents its layout; a wrong target is one clear error naming it."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from tta.data.registry import load_pairs, split_reader
from tta.utils.config import CONF_DIR, compose

# every dataset choice; data=features reads precomputed features, not a split (tests/data/test_features.py)
DATA_CHOICES = sorted(p.stem for p in (Path(CONF_DIR) / "data").glob("*.yaml") if p.stem != "features")


@pytest.mark.parametrize("name", DATA_CHOICES)
def test_every_data_choice_names_a_split_reader(name):
    data = compose("run", [f"data={name}", "paths.cache_dir=/nonexistent"]).data
    read = split_reader(data)
    module = data.reader._target_.rsplit(".", 1)[0]
    assert read.func.__module__ == module and read.func.__name__.startswith("read_")
    assert "root/" in read.layout_help("<root>")  # shown when data.root is missing
    options = {k for k in data.reader if k != "_target_"}
    assert options <= set(data), f"data={name}: reader options {options} must be data keys (data.<key>=... overrides)"


def test_reader_options_follow_the_data_keys():
    data = compose("run", ["data=lsmdc", "data.exclude_clips=[a,b]", "paths.cache_dir=/nonexistent"]).data
    assert split_reader(data).keywords == {"exclude_clips": ["a", "b"]}
    data = compose("run", ["data=msrvtt", "data.all_captions=true", "paths.cache_dir=/nonexistent"]).data
    assert split_reader(data).keywords == {"all_captions": True}


def test_missing_root_names_the_layout():
    data = compose("run", ["data=msvd", "data.root=null", "paths.cache_dir=/nonexistent"]).data
    with pytest.raises(ValueError, match=r"data=msvd needs data.root \(or MSVD_ROOT\): the dataset's directory holding root/test_list.txt"):
        load_pairs(data, "test", Path("/nonexistent"))


@pytest.mark.parametrize("reader,expected", [
    ({"_target_": "tta.data.readers.nosuch.read_nosuch_split"}, "data.reader._target_=tta.data.readers.nosuch"),
    ({"_target_": "tta.data.readers.msrvtt.VIDEO_EXTENSIONS"}, "VIDEO_EXTENSIONS is not a split reader .not callable"),
    ("msrvtt", "needs data.reader._target_ naming a split reader"),
])
def test_a_wrong_reader_is_one_clear_error(tmp_path, reader, expected):
    data = OmegaConf.create({"name": "mine", "root": str(tmp_path), "reader": reader})
    with pytest.raises(ValueError, match=expected) as info:
        load_pairs(data, "test", tmp_path)
    assert "tta.data.readers.msrvtt.read_msrvtt_split" in str(info.value)
