"""Multi-caption evaluation (spec/metrics.md §2): ``data.all_captions=true`` or ``inputs.duplicates=multi``.

t2v: every caption is a query and the gallery holds each video once; v2t: each video is a query once and is ranked by
its best-ranked caption. Checked on the layout itself, on hand-made score matrices, and end to end on an MSVD-format
dataset (3 captions per video) with a converted official-layout checkpoint.
"""

from __future__ import annotations

import json

import pytest
import torch

from tests.run.test_real_path_e2e import N, _msvd, official_checkpoints  # noqa: F401 - fixture
from tta.data.layout import EvalLayout
from tta.data.readers.msrvtt import VideoTextPair
from tta.data.screen import BadInputError, screen_pairs
from tta.metrics import retrieval_metrics
from tta.results import segment_metrics as _metrics
from tta.run import run
from tta.utils.config import compose

PAIRS = [VideoTextPair("a", "a one", "c0"), VideoTextPair("b", "b one", "c1"), VideoTextPair("a", "a two", "c2"),
         VideoTextPair("c", "c one", "c3"), VideoTextPair("b", "b two", "c4"), VideoTextPair("a", "a three", "c5")]


def test_layout_t2v_one_query_per_caption_one_gallery_item_per_video():
    lay = EvalLayout.build(PAIRS, "t2v", multi=True)
    assert [p.caption_id for p in lay.queries] == ["c0", "c1", "c2", "c3", "c4", "c5"]
    assert [p.video_id for p in lay.gallery] == ["a", "b", "c"]  # first-appearance order
    assert lay.gt.tolist() == [0, 1, 0, 2, 1, 0] and lay.gallery_class is None and lay.relevant_mask() is None
    assert lay.num_videos == 3


def test_layout_v2t_one_query_per_video_every_caption_in_the_gallery():
    lay = EvalLayout.build(PAIRS, "v2t", multi=True)
    assert [p.video_id for p in lay.queries] == ["a", "b", "c"] and lay.query_rows == [0, 1, 3]
    assert [p.caption_id for p in lay.gallery] == ["c0", "c1", "c2", "c3", "c4", "c5"]
    assert lay.gt.tolist() == [0, 1, 2] and lay.gallery_class.tolist() == [0, 1, 0, 2, 1, 0]
    assert lay.relevant_mask().tolist() == [[True, False, True, False, False, True],
                                            [False, True, False, False, True, False],
                                            [False, False, False, True, False, False]]
    one = EvalLayout.build(PAIRS[:2], "v2t")  # 1:1 stays the identity
    assert one.queries is one.gallery and one.gt.tolist() == [0, 1] and one.gallery_class is None


def test_v2t_rank_is_the_best_ranked_caption_of_the_video():
    lay = EvalLayout.build(PAIRS, "v2t", multi=True)
    cfg = compose("run", ["hubness.k=2"])
    #                    c0   c1   c2   c3   c4   c5
    sims = torch.tensor([[0.1, 0.9, 0.2, 0.8, 0.0, 0.95],  # video a: c5 (its third caption) ranks first
                         [0.9, 0.3, 0.8, 0.1, 0.2, 0.7],   # video b: best caption c1 at rank 4 (c0, c2, c5 above)
                         [0.5, 0.4, 0.3, 0.2, 0.1, 0.0]])  # video c: its only caption c3 at rank 4
    ok = torch.ones(3, dtype=torch.bool)
    got = _metrics(sims, lay, ok, cfg)["retrieval"]
    assert got["R@1"] == pytest.approx(100 / 3) and got["R@5"] == 100.0 and got["MnR"] == 3.0
    # the first-caption-only (1:1) reading of the same matrix ranks video a's caption c0 fifth
    first_only = retrieval_metrics(sims, torch.tensor([0, 1, 3]))
    assert first_only["R@1"] == 0.0
    # a failed (non-finite) row is a miss at the worst rank G = 6 and keeps the other rows' relevance aligned
    failed = sims.clone()
    failed[1, 2] = float("nan")
    out = _metrics(failed, lay, torch.tensor([True, False, True]), cfg)
    assert out["ranks"].tolist() == [1, 6, 4] and out["failed_rows"] == 1
    assert out["retrieval"]["R@1"] == pytest.approx(100 / 3) and out["retrieval"]["MnR"] == pytest.approx(11 / 3)


def test_screen_keeps_every_caption_under_multi():
    frames = None
    with pytest.raises(BadInputError, match="inputs.duplicates=multi"):
        screen_pairs(PAIRS, frames, decode=False)
    with pytest.raises(BadInputError, match="one of error, first, multi"):
        screen_pairs(PAIRS, frames, decode=False, duplicates="all")


def _cfg(root, ckpt, tmp, model, *extra):
    return compose("run", ["data=msvd", f"data.root={root}", f"model={model}", "model.arch=custom",
                           f"model.checkpoint={ckpt}", f"paths.cache_dir={tmp / 'cache'}", "trainer.accelerator=cpu",
                           "trainer.enable_progress_bar=false", "hubness.k=3", "save.sims=true", *extra])


@pytest.fixture(scope="module")
def msvd_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("msvd-multi")
    _msvd(root)  # N videos with 3 captions each
    return root


def test_t2v_all_captions_end_to_end(msvd_root, official_checkpoints, tmp_path):  # noqa: F811
    res = run(_cfg(msvd_root, official_checkpoints["xpool"], tmp_path, "xpool", "task=t2v", "data.all_captions=true",
                   "adapter=hatvtr"), tmp_path / "r")
    assert (res["num_queries"], res["num_gallery"], res["num_pairs_read"]) == (3 * N, N, 3 * N)
    assert res["evaluation"] == {"protocol": "multi_caption", "num_videos": N, "num_captions": 3 * N,
                                 "relevance": "one video per caption"}
    sims = torch.load(tmp_path / "r" / "sims.pt").float()
    gt = torch.arange(N).repeat_interleave(3)  # raw-captions.pkl order: the 3 captions of each video in turn
    assert res["retrieval"]["R@1"] == pytest.approx(retrieval_metrics(sims, gt)["R@1"], abs=100 / (3 * N) + 1e-6)
    assert res["skipped"]["n"] == 0  # repeated video ids are not skipped under multi-caption


def test_v2t_all_captions_end_to_end(msvd_root, official_checkpoints, tmp_path):  # noqa: F811
    res = run(_cfg(msvd_root, official_checkpoints["clip4clip"], tmp_path, "clip4clip", "task=v2t",
                   "data.all_captions=true", "adapter=hatvtr"), tmp_path / "r")
    assert (res["num_queries"], res["num_gallery"]) == (N, 3 * N)
    assert res["evaluation"]["protocol"] == "multi_caption" and res["evaluation"]["num_captions"] == 3 * N
    assert res["evaluation"]["num_videos"] == N
    sims = torch.load(tmp_path / "r" / "sims.pt").float()
    assert sims.shape == (N, 3 * N)
    best = torch.stack([sims[i, 3 * i:3 * i + 3].max() for i in range(N)])
    ranks = 1 + (sims > best[:, None]).sum(dim=1)  # strict count: no ties in random-feature scores
    assert res["retrieval"]["R@1"] == pytest.approx(100 * (ranks <= 1).float().mean().item(), abs=1e-6)
    assert res["retrieval"]["MnR"] == pytest.approx(ranks.float().mean().item(), abs=0.2)  # fp16 sims.pt
    # the adapter's pseudo-target diagnostics count a caption of the query's own video as correct
    history = json.loads((tmp_path / "r" / "history.json").read_text())
    assert history[-1]["running_r1"] == pytest.approx(res["retrieval"]["R@1"], abs=1e-6)


def test_first_caption_protocol_is_unchanged(msvd_root, official_checkpoints, tmp_path):  # noqa: F811
    res = run(_cfg(msvd_root, official_checkpoints["clip4clip"], tmp_path, "clip4clip", "task=v2t"), tmp_path / "r")
    assert (res["num_queries"], res["num_gallery"]) == (N, N) and res["evaluation"] == {"protocol": "one_to_one"}
