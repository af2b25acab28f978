"""Tests for the MSR-VTT annotation readers and writers (tta.data.readers.msrvtt; hatvtr.md §4)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tta.data.readers import (
    VideoTextPair,
    read_jsfusion_test_csv,
    read_msrvtt_data_json,
    read_msrvtt_split,
    read_msrvtt_train_csv,
    validate_pairs,
    write_jsfusion_test_csv,
    write_msrvtt_data_json,
    write_msrvtt_train_csv,
)

REAL_TEST_CSV = Path("/work/shared/data/MSRVTT_JSFUSION_test.csv")
needs_real = pytest.mark.skipif(not REAL_TEST_CSV.is_file(), reason="real MSRVTT_JSFUSION_test.csv not available")


@needs_real
def test_real_jsfusion_csv(tmp_path):
    pairs = read_jsfusion_test_csv(REAL_TEST_CSV)
    assert len(pairs) == 1000
    assert len({p.video_id for p in pairs}) == 1000
    assert pairs[0] == VideoTextPair("video9770", "a person is connecting something to system", "ret0", None)
    assert pairs[1].video_id == "video9771" and pairs[1].caption == "a little girl does gymnastics"
    assert all(p.caption_id == f"ret{i}" for i, p in enumerate(pairs))
    out = tmp_path / "copy.csv"
    write_jsfusion_test_csv(out, pairs)
    assert out.read_bytes() == REAL_TEST_CSV.read_bytes()
    assert validate_pairs(pairs) == []


def _fixture_root(tmp_path: Path) -> tuple[Path, list[dict], list[dict]]:
    root = tmp_path / "msrvtt"
    (root / "videos").mkdir(parents=True)
    videos = [
        {"category": 9, "url": "https://www.youtube.com/watch?v=x0", "video_id": "video0", "start time": 1.5,
         "end time": 11.2, "split": "train", "id": 0},
        {"category": 3, "url": "https://www.youtube.com/watch?v=x1", "video_id": "video1", "start time": 0.0,
         "end time": 9.0, "split": "train", "id": 1},
        {"category": 4, "url": "https://www.youtube.com/watch?v=x2", "video_id": "video7010", "start time": 2.0,
         "end time": 8.0, "split": "validate", "id": 7010},
        {"category": 1, "url": "https://www.youtube.com/watch?v=x3", "video_id": "video9770", "start time": 3.0,
         "end time": 13.0, "split": "test", "id": 9770},
    ]
    sentences = [
        {"caption": "a man is cooking, \"quickly\"", "video_id": "video0", "sen_id": 0},
        {"caption": "a cartoon of a dog", "video_id": "video1", "sen_id": 1},
        {"caption": "someone cooks pasta", "video_id": "video0", "sen_id": 2},
        {"caption": "caf\u00e9 scene", "video_id": "video7010", "sen_id": 3},
        {"caption": "a person is connecting something to system", "video_id": "video9770", "sen_id": 4},
        {"caption": "wires get plugged in", "video_id": "video9770", "sen_id": 5},
    ]
    write_msrvtt_data_json(root / "MSRVTT_data.json", videos, sentences, info={"year": 2016})
    write_msrvtt_train_csv(root / "MSRVTT_train.9k.csv", ["video1", "video0"])
    write_jsfusion_test_csv(root / "MSRVTT_JSFUSION_test.csv",
                            [VideoTextPair("video9770", "a person is connecting something to system", "ret0"),
                             VideoTextPair("video1", "   ", "ret1")])
    (root / "videos" / "video0.mp4").write_bytes(b"")
    (root / "videos" / "video1.webm").write_bytes(b"")
    return root, videos, sentences


def test_writers_round_trip(tmp_path):
    root, videos, sentences = _fixture_root(tmp_path)
    data = read_msrvtt_data_json(root / "MSRVTT_data.json")
    assert list(data) == ["info", "videos", "sentences"]
    assert data["videos"] == videos and data["sentences"] == sentences and data["info"] == {"year": 2016}
    again = tmp_path / "again.json"
    write_msrvtt_data_json(again, data["videos"], data["sentences"], info=data["info"])
    assert again.read_bytes() == (root / "MSRVTT_data.json").read_bytes()
    assert json.loads(again.read_text()) == data

    assert (root / "MSRVTT_train.9k.csv").read_text() == "video_id\nvideo1\nvideo0\n"
    assert read_msrvtt_train_csv(root / "MSRVTT_train.9k.csv") == ["video1", "video0"]
    csv2 = tmp_path / "train2.csv"
    write_msrvtt_train_csv(csv2, read_msrvtt_train_csv(root / "MSRVTT_train.9k.csv"))
    assert csv2.read_bytes() == (root / "MSRVTT_train.9k.csv").read_bytes()

    pairs = [VideoTextPair("video5", 'with, comma and "quotes"', "ret0"), VideoTextPair("video6", "", "ret1")]
    path = tmp_path / "t.csv"
    write_jsfusion_test_csv(path, pairs)
    assert path.read_text().splitlines()[1] == 'ret0,msr5,video5,"with, comma and ""quotes"""'
    assert read_jsfusion_test_csv(path) == pairs


def test_read_split(tmp_path):
    root, _, _ = _fixture_root(tmp_path)
    test = read_msrvtt_split(root, "test")
    assert [(p.video_id, p.caption_id) for p in test] == [("video9770", "ret0"), ("video1", "ret1")]
    assert [p.category for p in test] == ["1", "3"]  # MSRVTT_data.json's category ids of the test videos
    assert test[0].video_path == str(root / "videos" / "video9770.mp4")
    assert test[1].video_path == str(root / "videos" / "video1.webm")
    assert test[1].caption == "   "  # kept as-is
    problems = validate_pairs(test)
    assert [i for i, _ in problems] == [0, 1]
    assert "missing video file" in problems[0][1] and "empty caption" in problems[1][1]

    train = read_msrvtt_split(root, "train")
    assert [(p.video_id, p.caption_id) for p in train] == [("video1", "1"), ("video0", "0"), ("video0", "2")]
    assert [p.category for p in train] == ["3", "9", "9"]
    assert train[1].caption == 'a man is cooking, "quickly"'
    assert train[0].video_path.endswith("video1.webm") and train[1].video_path.endswith("video0.mp4")
    assert read_msrvtt_split(root, "train", all_captions=True) == train

    full = read_msrvtt_split(root, "test", all_captions=True)
    assert [p.caption_id for p in full] == ["4", "5", "1"]

    other = tmp_path / "elsewhere"
    other.mkdir()
    (other / "video9770.mkv").write_bytes(b"")
    assert read_msrvtt_split(root, "test", videos_dir=other)[0].video_path == str(other / "video9770.mkv")

    with pytest.raises(FileNotFoundError, match="no official validation split"):
        read_msrvtt_split(root, "val")
    shutil.copy(root / "MSRVTT_JSFUSION_test.csv", root / "MSRVTT_val.csv")
    assert [p.caption_id for p in read_msrvtt_split(root, "val")] == ["ret0", "ret1"]
    with pytest.raises(ValueError, match="Unknown MSR-VTT split"):
        read_msrvtt_split(root, "dev")


def test_missing_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="MSR-VTT root directory") as info:
        read_msrvtt_split(tmp_path / "absent", "test")
    msg = str(info.value)
    for part in ("MSRVTT_JSFUSION_test.csv", "MSRVTT_data.json", "MSRVTT_train.9k.csv", "videos/<video_id>.mp4",
                 "Microsoft", "Xu et al., CVPR 2016", "CLIP4Clip", "X-Pool"):
        assert part in msg
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match=r"MSRVTT_JSFUSION_test\.csv.*not found"):
        read_msrvtt_split(empty, "test")
    with pytest.raises(FileNotFoundError, match=r"MSRVTT_data\.json"):
        read_msrvtt_split(empty, "train")
    with pytest.raises(FileNotFoundError, match="expected MSR-VTT layout|Expected MSR-VTT layout"):
        read_jsfusion_test_csv(empty / "nothing.csv")


def test_bad_contents(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("key,vid_key,video_id\nret0,msr1,video1\n")
    with pytest.raises(ValueError, match="'sentence'"):
        read_jsfusion_test_csv(bad)
    bad.write_text("vid\nvideo1\n")
    with pytest.raises(ValueError, match="'video_id'"):
        read_msrvtt_train_csv(bad)
    dup = tmp_path / "dup.csv"
    write_jsfusion_test_csv(dup, [VideoTextPair("video1", "a", "ret0"), VideoTextPair("video2", "b", "ret1"),
                                  VideoTextPair("video1", "c", "ret2")])
    with pytest.raises(ValueError, match="more than once.*video1"):
        read_jsfusion_test_csv(dup)
    assert len(read_jsfusion_test_csv(dup, unique_videos=False)) == 3
    js = tmp_path / "d.json"
    js.write_text(json.dumps({"videos": []}))
    with pytest.raises(ValueError, match="'sentences'"):
        read_msrvtt_data_json(js)
    js.write_text(json.dumps({"videos": [], "sentences": [{"video_id": "video1"}]}))
    with pytest.raises(ValueError, match="'caption'"):
        read_msrvtt_data_json(js)
