"""Annotation files and video trees as users have them: byte-order marks, CRLF, blank tails, extra columns,
quoted captions, paths with spaces and non-ASCII characters, symlinked roots."""

from __future__ import annotations

import json
import os

import pytest

from tests.data.test_readers_real_formats import assert_decodes_to, tiny_video
from tta.data.readers import read_jsfusion_test_csv, read_msrvtt_split
from tta.data.readers.common import VideoLocator, load_json_strict, read_id_list
from tta.data.readers.lsmdc import read_lsmdc_csv

BOM = "\ufeff"


def _csv(rows: list[str], bom=True, eol="\r\n", tail=("", "", ",,,")) -> str:
    return (BOM if bom else "") + eol.join([*rows, *tail]) + eol


def test_jsfusion_csv_with_bom_crlf_blank_tail_extra_column_and_quoted_commas(tmp_path):
    path = tmp_path / "test.csv"
    path.write_text(_csv([" key ,vid_key,video_id,sentence,notes",
                          'ret0,msr0,video0,"a man, a dog and ""a ball""",x',
                          "ret1,msr1,video1,plain caption,"]), encoding="utf-8", newline="")
    pairs = read_jsfusion_test_csv(path)
    assert [(p.caption_id, p.video_id, p.caption) for p in pairs] == [
        ("ret0", "video0", 'a man, a dog and "a ball"'), ("ret1", "video1", "plain caption")]


def test_json_and_id_lists_with_bom(tmp_path):
    (tmp_path / "a.json").write_text(BOM + json.dumps({"k": [1, 2]}), encoding="utf-8")
    assert load_json_strict(tmp_path / "a.json") == {"k": [1, 2]}
    (tmp_path / "ids.txt").write_text(BOM + "v1\r\nv2\r\n\r\n", encoding="utf-8", newline="")
    assert read_id_list(tmp_path / "ids.txt") == ["v1", "v2"]


def test_lsmdc_csv_with_bom_and_crlf(tmp_path):
    path = tmp_path / "LSMDC16_challenge_1000_publictect.csv"
    line = "\t".join(["1001_Movie_00.00.01.000-00.00.02.000", "0", "1", "0", "1", "SOMEONE waves, smiling."])
    path.write_text(BOM + line + "\r\n\r\n", encoding="utf-8", newline="")
    (pair,) = read_lsmdc_csv(path)
    assert pair.video_id == "1001_Movie_00.00.01.000-00.00.02.000" and pair.caption == "SOMEONE waves, smiling."


@pytest.mark.parametrize("name", ["clip with spaces", "vidéo_ß_日本"])
def test_video_names_with_spaces_and_non_ascii_resolve_and_decode(tmp_path, name):
    root = tmp_path / "msr vtt ü"
    tiny_video(root / "videos" / f"{name}.mp4", 90)
    (root / "MSRVTT_JSFUSION_test.csv").write_text(_csv(["key,vid_key,video_id,sentence", f"ret0,m0,{name},a cap"]),
                                                   encoding="utf-8", newline="")
    (pair,) = read_msrvtt_split(root, "test")
    assert pair.video_path == str(root / "videos" / f"{name}.mp4")
    assert_decodes_to(pair.video_path, 90)


def test_symlinked_root_and_symlinked_video_folder(tmp_path):
    real = tmp_path / "storage" / "msrvtt"
    tiny_video(tmp_path / "disk2" / "clips" / "video7.mp4", 60)
    real.mkdir(parents=True)
    os.symlink(tmp_path / "disk2" / "clips", real / "videos")  # the video folder lives on another disk
    (real / "MSRVTT_JSFUSION_test.csv").write_text(_csv(["key,vid_key,video_id,sentence", "ret0,m7,video7,c"]),
                                                   encoding="utf-8", newline="")
    os.symlink(real, tmp_path / "data_link")
    (pair,) = read_msrvtt_split(tmp_path / "data_link", "test")
    assert pair.video_path == str(tmp_path / "data_link" / "videos" / "video7.mp4")
    assert_decodes_to(pair.video_path, 60)


def test_recursive_lookup_follows_symlinked_sub_folders_without_looping(tmp_path):
    tiny_video(tmp_path / "elsewhere" / "part1" / "v1.mp4", 30)
    (tmp_path / "videos").mkdir()
    os.symlink(tmp_path / "elsewhere" / "part1", tmp_path / "videos" / "part1")
    os.symlink(tmp_path / "videos", tmp_path / "videos" / "part1" / "loop")  # a cycle must not hang the search
    found = VideoLocator(tmp_path / "videos").find(["v1"])
    assert found is not None and os.path.realpath(found) == str((tmp_path / "elsewhere" / "part1" / "v1.mp4").resolve())
    assert VideoLocator(tmp_path / "videos").find(["absent"]) is None
