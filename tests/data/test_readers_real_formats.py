"""Readers of the five real datasets on fixtures written in exactly the official formats (hatvtr.md §4, App. B.1).

The index files are generated at the size of the official ones (val_1.json: 4,917 entries; the LSMDC public test:
1,000 rows; MSVD: 670 test ids of 1,970 videos; DiDeMo: 1,004 listed videos with 4,021 sentences) so the readers
must yield the official pair counts; MSR-VTT is read from the real JSFusion CSV in ../shared/data/. Tiny generated
videos, placed in each dataset's own layout, check that video paths resolve to the right file and decode.
"""

from __future__ import annotations

import json
import math
import pickle
import random
import string
from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf

from tta.data.readers import (
    XPOOL_EXCLUDED_CLIPS,
    lsmdc_movie,
    read_activitynet_split,
    read_didemo_split,
    read_lsmdc_split,
    read_msvd_split,
    validate_pairs,
)
from tta.data.registry import load_pairs
from tta.media.video import read_frames

REPO = Path(__file__).resolve().parents[2]
REAL_MSRVTT = REPO.parent / "shared" / "data" / "MSRVTT_JSFUSION_test.csv"


def data_cfg(name: str, root: Path | None, **over):
    """The real conf/data/<name>.yaml with the root (and overrides) set, as a run would compose it."""
    cfg = OmegaConf.load(REPO / "conf" / "data" / f"{name}.yaml")
    cfg.root = None if root is None else str(root)
    for k, v in over.items():
        cfg[k] = v
    return cfg


def tiny_video(path: Path, value: int) -> None:
    """Writes a 4-frame 32x24 video whose every pixel is ``value`` (MPEG-4 part 2, any container). OpenCV writes it
    where PyAV is missing (a GPU image without the av wheel), so the real-path tests run there too."""
    path.parent.mkdir(parents=True, exist_ok=True)
    frame = np.full((24, 32, 3), value, np.uint8)
    try:
        import av
    except ImportError:
        import cv2

        out = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"mp4v"), 4, (32, 24))
        assert out.isOpened(), f"OpenCV cannot write {path}"
        for _ in range(4):
            out.write(frame)
        out.release()
        return
    with av.open(str(path), "w") as out:
        stream = out.add_stream("mpeg4", rate=4)
        stream.width, stream.height, stream.pix_fmt = 32, 24, "yuv420p"
        for _ in range(4):
            for pkt in stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")):
                out.mux(pkt)
        for pkt in stream.encode():
            out.mux(pkt)


def assert_decodes_to(path: str, value: int) -> None:
    frames = read_frames(path, num_frames=12)
    assert frames.shape == (12, 24, 32, 3)
    assert abs(float(frames.float().mean()) - value) < 6


def yt_id(rng: random.Random) -> str:
    return "".join(rng.choice(string.ascii_letters + string.digits + "-_") for _ in range(11))


# --------------------------------------------------------------------------------------------------- MSR-VTT
@pytest.mark.skipif(not REAL_MSRVTT.is_file(), reason="../shared/data/MSRVTT_JSFUSION_test.csv not present")
def test_msrvtt_real_jsfusion_csv_through_registry(tmp_path):
    root = tmp_path / "msrvtt"
    root.mkdir()
    (root / "MSRVTT_JSFUSION_test.csv").symlink_to(REAL_MSRVTT)
    pairs = load_pairs(data_cfg("msrvtt", root), "test", tmp_path)
    assert len(pairs) == 1000 and len({p.video_id for p in pairs}) == 1000
    assert math.ceil(len(pairs) / 16) == 63  # hatvtr.md §4 table
    assert pairs[0].video_path == str(root / "videos" / "video9770.mp4")


# ----------------------------------------------------------------------------------------------- ActivityNet
def _activitynet_json(rng: random.Random, n: int) -> dict:
    data = {}
    while len(data) < n:
        k = rng.randint(1, 6)
        dur = round(rng.uniform(20, 230), 2)
        stamps = sorted([round(rng.uniform(0, dur), 2), round(rng.uniform(0, dur), 2)] for _ in range(k))
        # the official sentences carry a leading space from the second one on
        sents = [("" if i == 0 else " ") + f"Sentence {i} of video {len(data)}." for i in range(k)]
        data["v_" + yt_id(rng)] = {"duration": dur, "timestamps": stamps, "sentences": sents}
    return data


def test_activitynet_val1_full_size(tmp_path):
    rng = random.Random(0)
    root = tmp_path / "anet"
    root.mkdir()
    val1 = _activitynet_json(rng, 4917)
    (root / "val_1.json").write_text(json.dumps(val1))
    (root / "train.json").write_text(json.dumps(_activitynet_json(rng, 30)))
    keys = list(val1)
    tiny_video(root / "videos" / f"{keys[0]}.mp4", 40)                   # official name v_<id>
    tiny_video(root / "videos" / "part2" / f"{keys[1][2:]}.mkv", 200)    # CLIP4Clip name without v_, sub-folder

    pairs = load_pairs(data_cfg("activitynet", root), "test", tmp_path)
    assert len(pairs) == 4917 and math.ceil(len(pairs) / 16) == 308  # hatvtr.md §4: Q = G = 4917, 308 batches
    assert [p.video_id for p in pairs] == keys                           # file order, one paragraph per video
    k = len(val1[keys[2]]["sentences"])
    assert pairs[2].caption == " ".join(f"Sentence {i} of video 2." for i in range(k))
    assert "  " not in pairs[2].caption
    assert_decodes_to(pairs[0].video_path, 40)
    assert_decodes_to(pairs[1].video_path, 200)
    assert pairs[1].video_path.endswith(f"part2/{keys[1][2:]}.mkv")
    missing = [i for i, problem in validate_pairs(pairs) if "missing video" in problem]
    assert missing == list(range(2, 4917))
    assert len(load_pairs(data_cfg("activitynet", root, drop_missing=True), "test", tmp_path)) == 2
    assert len(read_activitynet_split(root, "train")) == 30


def test_activitynet_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="ActivityNet Captions root directory") as info:
        read_activitynet_split(tmp_path / "absent")
    for part in ("val_1.json", "v_<id>.mp4", "Krishna et al.", "densevid", "ACTIVITYNET_ROOT"):
        assert part in str(info.value)
    with pytest.raises(FileNotFoundError, match=r"val_1\.json.*not found"):
        read_activitynet_split(tmp_path)
    (tmp_path / "val_1.json").write_text('{"v_a": {"sentences": ["x"]}, "v_a": {"sentences": ["y"]}}')
    with pytest.raises(ValueError, match="'v_a' twice"):
        read_activitynet_split(tmp_path)
    (tmp_path / "val_1.json").write_text('{"v_a": {"duration": 3.0}}')
    with pytest.raises(ValueError, match="'v_a' lacks a 'sentences' list"):
        read_activitynet_split(tmp_path)
    with pytest.raises(ValueError, match="Unknown ActivityNet split"):
        read_activitynet_split(tmp_path, "dev")


# ------------------------------------------------------------------------------------------------------ LSMDC
MOVIES = ["0001_American_Beauty", "0017_Pianist", "1012_Unbreakable", "3001_21_JUMP_STREET", "1054_Harry_Potter."
          "and_the_prisoner_of_azkaban"]


def _clip_id(movie: str, i: int) -> str:
    s = 30 + 7 * i
    return f"{movie}_00.{s // 60 % 60:02d}.{s % 60:02d}.{i % 1000:03d}-00.{(s + 4) // 60 % 60:02d}.{(s + 4) % 60:02d}.500"


def _lsmdc_rows(n: int) -> list[str]:
    rows = [f"{XPOOL_EXCLUDED_CLIPS[0]}\t00.05.16.065\t00.05.21.941\t00.05.15.000\t00.05.22.000\t"
            "SOMEONE walks into the station."]
    i = 0
    while len(rows) < n:
        clip = _clip_id(MOVIES[i % len(MOVIES)], i)
        rows.append(f"{clip}\t00.00.01.000\t00.00.02.000\t00.00.00.500\t00.00.02.500\tSOMEONE does thing {i}.")
        i += 1
    return rows


def test_lsmdc_public_test_full_size(tmp_path):
    root = tmp_path / "lsmdc"
    root.mkdir()
    rows = _lsmdc_rows(1000)
    (root / "LSMDC16_challenge_1000_publictect.csv").write_text("\n".join(rows) + "\n")
    clips = [r.split("\t")[0] for r in rows]
    tiny_video(root / "videos" / "1012_Unbreakable" / f"{clips[0]}.avi", 60)
    tiny_video(root / "videos" / MOVIES[4] / f"{clips[5]}.avi", 180)
    assert lsmdc_movie(clips[5]) == MOVIES[4]  # a movie name with a dot keeps it

    pairs = load_pairs(data_cfg("lsmdc", root), "test", tmp_path)
    assert len(pairs) == 1000 and math.ceil(len(pairs) / 16) == 63
    assert [p.video_id for p in pairs] == clips and pairs[1].caption == "SOMEONE does thing 0."
    assert pairs[0].video_path == str(root / "videos" / "1012_Unbreakable" / f"{clips[0]}.avi")
    assert_decodes_to(pairs[0].video_path, 60)
    assert_decodes_to(pairs[5].video_path, 180)
    xpool = load_pairs(data_cfg("lsmdc", root, exclude_clips=list(XPOOL_EXCLUDED_CLIPS)), "test", tmp_path)
    assert len(xpool) == 999 and xpool[0].video_id == clips[1]  # App. B.1: 999 clips


def test_lsmdc_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="LSMDC root directory") as info:
        read_lsmdc_split(tmp_path / "absent")
    for part in ("LSMDC16_challenge_1000_publictect.csv", "<movie>/<clip_id>.avi", "MPI", "describingmovies"):
        assert part in str(info.value)
    bad = tmp_path / "LSMDC16_challenge_1000_publictect.csv"
    bad.write_text("a_00.00.01.000-00.00.02.000\t1\t2\t3\tonly five\n")
    with pytest.raises(ValueError, match="line 1: expected 6 tab-separated fields"):
        read_lsmdc_split(tmp_path)
    row = "m_00.00.01.000-00.00.02.000\t1\t2\t3\t4\ta sentence\n"
    bad.write_text(row + row)
    with pytest.raises(ValueError, match="more than once"):
        read_lsmdc_split(tmp_path)
    (tmp_path / "LSMDC16_annos_training.csv").write_text(row + row)
    assert len(read_lsmdc_split(tmp_path, "train")) == 2  # training clips may repeat


# ------------------------------------------------------------------------------------------------------- MSVD
def _msvd_files(root: Path, rng: random.Random) -> tuple[list[str], dict[str, list[list[str]]]]:
    ids: list[str] = []
    while len(ids) < 1970:
        vid = f"{yt_id(rng)}_{rng.randint(0, 300)}_{rng.randint(301, 600)}"
        if vid not in ids:
            ids.append(vid)
    words = ["a", "man", "woman", "is", "cooking", "riding", "the", "dog", "playing", "guitar"]
    caps = {v: [[rng.choice(words) for _ in range(rng.randint(3, 9))] for _ in range(rng.randint(25, 60))]
            for v in ids}
    (root / "train_list.txt").write_text("\n".join(ids[:1200]) + "\n")
    (root / "val_list.txt").write_text("\n".join(ids[1200:1300]) + "\n")
    (root / "test_list.txt").write_text("\n".join(ids[1300:]) + "\n")
    with open(root / "raw-captions.pkl", "wb") as f:
        pickle.dump(caps, f)
    return ids, caps


def test_msvd_test_full_size(tmp_path):
    root = tmp_path / "msvd"
    root.mkdir()
    ids, caps = _msvd_files(root, random.Random(1))
    test_ids = ids[1300:]
    tiny_video(root / "YouTubeClips" / f"{test_ids[0]}.avi", 90)

    pairs = load_pairs(data_cfg("msvd", root), "test", tmp_path)
    assert len(pairs) == 670 and math.ceil(len(pairs) / 16) == 42     # hatvtr.md §4: Q = G = 670
    assert [p.video_id for p in pairs] == test_ids
    assert all(p.caption == " ".join(caps[p.video_id][0]) for p in pairs)  # the first official caption
    assert_decodes_to(pairs[0].video_path, 90)
    full = load_pairs(data_cfg("msvd", root, all_captions=True), "test", tmp_path)
    assert len(full) == sum(len(caps[v]) for v in test_ids)
    assert full[1].caption == " ".join(caps[test_ids[0]][1]) and full[1].caption_id == f"{test_ids[0]}#1"
    assert len(read_msvd_split(root, "train")) == sum(len(caps[v]) for v in ids[:1200])

    (root / "raw-captions.pkl").unlink()  # X-Pool's JSON caption file works the same
    (root / "captions_msvd.json").write_text(json.dumps({v: [" ".join(c) for c in cs] for v, cs in caps.items()}))
    assert [p.caption for p in read_msvd_split(root)] == [p.caption for p in pairs]


class _Evil:
    def __reduce__(self):
        return (print, ("this must never run",))


def test_msvd_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="MSVD root directory") as info:
        read_msvd_split(tmp_path / "absent")
    for part in ("test_list.txt", "raw-captions.pkl", "YouTubeClips", "Chen & Dolan", "CLIP4Clip"):
        assert part in str(info.value)
    (tmp_path / "test_list.txt").write_text("vidA\nvidB\n")
    with pytest.raises(FileNotFoundError, match=r"raw-captions\.pkl.*not found"):
        read_msvd_split(tmp_path)
    with open(tmp_path / "raw-captions.pkl", "wb") as f:
        pickle.dump({"vidA": [["a", "b"]]}, f)
    with pytest.raises(ValueError, match=r"1 MSVD test video\(s\) have no caption.*vidB"):
        read_msvd_split(tmp_path)
    with open(tmp_path / "raw-captions.pkl", "wb") as f:
        pickle.dump({"vidA": [_Evil()], "vidB": [["x"]]}, f)
    with pytest.raises(ValueError, match="refusing to load builtins.print"):
        read_msvd_split(tmp_path)


# ----------------------------------------------------------------------------------------------------- DiDeMo
def _didemo_files(root: Path, rng: random.Random) -> tuple[list[str], list[dict]]:
    """1,004 listed test videos carrying 4,021 sentences (App. B.1), plus 33 unlisted annotated videos."""
    videos = [f"{rng.randint(10**7, 10**8)}@N0{rng.randint(0, 8)}_{rng.randint(10**9, 10**10)}_"
              f"{rng.getrandbits(40):010x}{rng.choice(['.mov', '.mp4', '.avi', '.m4v'])}" for _ in range(1037)]
    listed, extra = videos[:1004], videos[1004:]
    counts = [4] * 1004
    for i in rng.sample(range(1004), 5):  # 1004 * 4 + 5 = 4021
        counts[i] += 1
    moments = [(v, f"moment {j} of video {v}") for v, c in zip(listed, counts, strict=True) for j in range(c)]
    moments += [(v, "an unlisted video") for v in extra]
    rng.shuffle(moments)  # the official file is not grouped by video
    anns = [{"annotation_id": k, "description": d, "video": v, "times": [[0, 1], [0, 0], [1, 1], [0, 1]],
             "download_link": f"https://www.flickr.com/video_download.gne?id={v}", "num_segments": 6}
            for k, (v, d) in enumerate(moments)]
    (root / "test_data.json").write_text(json.dumps(anns))
    (root / "test_list.txt").write_text("\n".join(listed) + "\n")
    return listed, anns


def test_didemo_test_full_size(tmp_path):
    root = tmp_path / "didemo"
    root.mkdir()
    listed, anns = _didemo_files(root, random.Random(2))
    first_seen = list(dict.fromkeys(a["video"] for a in anns if a["video"] in set(listed)))
    tiny_video(root / "videos" / first_seen[0], 120)                    # the exact name of the "video" field
    stem = first_seen[1].rsplit(".", 1)[0]
    tiny_video(root / "videos" / f"{stem}.mkv", 220)                     # a re-encoded download: stem + container

    pairs = load_pairs(data_cfg("didemo", root), "test", tmp_path)
    assert len(pairs) == 1004 and math.ceil(len(pairs) / 16) == 63
    assert [p.video_id for p in pairs] == first_seen
    assert sum(p.caption.count("moment ") for p in pairs) == 4021      # App. B.1: from 4,021 sentences
    ordered = [a["description"] for a in anns if a["video"] == pairs[3].video_id]
    assert pairs[3].caption == " ".join(ordered)                         # file order within the paragraph
    assert_decodes_to(pairs[0].video_path, 120)
    assert pairs[1].video_path == str(root / "videos" / f"{stem}.mkv")
    assert_decodes_to(pairs[1].video_path, 220)
    assert len(load_pairs(data_cfg("didemo", root, use_split_list=False), "test", tmp_path)) == 1037


def test_didemo_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="DiDeMo root directory") as info:
        read_didemo_split(tmp_path / "absent")
    for part in ("test_data.json", "test_list.txt", "Hendricks et al.", "LocalizingMoments"):
        assert part in str(info.value)
    with pytest.raises(FileNotFoundError, match=r"test_data\.json.*not found"):
        read_didemo_split(tmp_path)
    (tmp_path / "test_data.json").write_text(json.dumps([{"video": "a.mp4", "times": [[0, 0]]}]))
    with pytest.raises(ValueError, match="entry 0 lacks a 'video' or 'description'"):
        read_didemo_split(tmp_path)
    (tmp_path / "test_data.json").write_text(json.dumps({"video": "a.mp4"}))
    with pytest.raises(ValueError, match="must be a JSON list"):
        read_didemo_split(tmp_path)


# ------------------------------------------------------------------------------------------------ registry
@pytest.mark.parametrize("name,env", [("activitynet", "ACTIVITYNET_ROOT"), ("lsmdc", "LSMDC_ROOT"),
                                      ("msvd", "MSVD_ROOT"), ("didemo", "DIDEMO_ROOT"), ("msrvtt", "MSRVTT_ROOT")])
def test_registry_root_from_env_and_missing_root(tmp_path, monkeypatch, name, env):
    monkeypatch.delenv(env, raising=False)
    cfg = OmegaConf.load(REPO / "conf" / "data" / f"{name}.yaml")
    assert cfg.root is None
    with pytest.raises(ValueError, match="needs data.root .*: the dataset's directory holding root/") as info:
        load_pairs(cfg, "test", tmp_path)
    assert f"(or {env})" in str(info.value)
    monkeypatch.setenv(env, str(tmp_path / "nowhere"))
    cfg = OmegaConf.load(REPO / "conf" / "data" / f"{name}.yaml")
    assert cfg.root == str(tmp_path / "nowhere")
    with pytest.raises(FileNotFoundError, match="data.root=.*nowhere is not a directory"):
        load_pairs(cfg, "test", tmp_path)
