"""The real path end to end, on fixtures: an official-format dataset (MSVD files, DiDeMo files) with tiny videos, an
official-format X-Pool / CLIP4Clip checkpoint converted by ``tta.models.convert``, and ``tta.run`` with
``data=<dataset> data.root=... model.arch=custom model.checkpoint=<converted>`` (hatvtr.md §3-4)."""

from __future__ import annotations

import json
import pickle
import random
from pathlib import Path

import open_clip
import pytest
import torch

from tests.data.test_readers_real_formats import tiny_video
from tta.models.convert import main as convert_main
from tta.run import run
from tta.utils.config import compose

N = 20
TINY = {"embed_dim": 32, "quick_gelu": True,
        "vision_cfg": {"image_size": 32, "layers": 1, "width": 64, "patch_size": 16},
        "text_cfg": {"context_length": 77, "vocab_size": 49408, "width": 64, "heads": 1, "layers": 1}}


@pytest.fixture(scope="module")
def official_checkpoints(tmp_path_factory):
    """A random OpenAI-layout CLIP saved as CLIP4Clip (plain state dict) and as X-Pool (+ pool_frames)."""
    root = tmp_path_factory.mktemp("official")
    torch.manual_seed(0)
    clip = {"clip." + k: v for k, v in open_clip.CLIP(**TINY).state_dict().items()}
    torch.save(clip, root / "pytorch_model.bin.2")
    head = {}
    for name in ("cross_attn.q_proj", "cross_attn.k_proj", "cross_attn.v_proj", "cross_attn.out_proj", "linear_proj"):
        head[f"pool_frames.{name}.weight"] = torch.eye(32) + 0.05 * torch.randn(32, 32)
        head[f"pool_frames.{name}.bias"] = 0.05 * torch.randn(32)
    for i in (1, 2, 3):
        head[f"pool_frames.layer_norm{i}.weight"] = 1 + 0.05 * torch.randn(32)
        head[f"pool_frames.layer_norm{i}.bias"] = 0.05 * torch.randn(32)
    torch.save({"epoch": 1, "state_dict": {**clip, **head}}, root / "model_best.pth")
    out = {}
    for fmt, src in (("clip4clip", "pytorch_model.bin.2"), ("xpool", "model_best.pth")):
        assert convert_main(["--format", fmt, str(root / src), str(root / f"{fmt}.pt")]) == 0
        out[fmt] = root / f"{fmt}.pt"
    return out


def _msvd(root, n=N, step=12):
    rng = random.Random(0)
    ids = [f"vid{i:03d}_{i}_{i + 5}" for i in range(n)]
    (root / "test_list.txt").write_text("\n".join(ids) + "\n")
    words = ["a", "man", "woman", "dog", "cooks", "runs", "sings", "in", "the", "park"]
    caps = {v: [[rng.choice(words) for _ in range(5)] for _ in range(3)] for v in ids}
    with open(root / "raw-captions.pkl", "wb") as f:
        pickle.dump(caps, f)
    for i, v in enumerate(ids):
        tiny_video(root / "YouTubeClips" / f"{v}.avi", 10 + step * i)


def _didemo(root):
    videos = [f"1000{i}@N00_{i}_abc.mov" for i in range(N)]
    anns = [{"annotation_id": k, "description": f"sentence {j} about clip {i}", "video": v, "times": [[0, 0]],
             "download_link": "", "num_segments": 6}
            for k, (i, v, j) in enumerate((i, v, j) for i, v in enumerate(videos) for j in range(2))]
    (root / "test_data.json").write_text(json.dumps(anns))
    for i, v in enumerate(videos):
        tiny_video(root / "videos" / v.replace(".mov", ".mp4"), 10 + 12 * i)


@pytest.mark.parametrize("data,fmt,task,adapter", [("msvd", "clip4clip", "v2t", "hatvtr"),
                                                    ("didemo", "xpool", "t2v", "tcr")])
def test_run_on_official_formats_with_converted_checkpoint(tmp_path, official_checkpoints, data, fmt, task, adapter):
    root = tmp_path / data
    root.mkdir()
    (_msvd if data == "msvd" else _didemo)(root)
    model = "clip4clip" if fmt == "clip4clip" else "xpool"
    cfg = compose("run", [f"data={data}", f"data.root={root}", f"model={model}", "model.arch=custom",
                          f"model.checkpoint={official_checkpoints[fmt]}", f"task={task}", f"adapter={adapter}",
                          "shift=gaussian", f"paths.cache_dir={tmp_path / 'cache'}", "trainer.accelerator=cpu",
                          "trainer.enable_progress_bar=false"])
    res = run(cfg, tmp_path / "run")
    assert (res["num_queries"], res["num_gallery"]) == (N, N)
    assert res["data"] == data and 0 <= res["retrieval"]["R@1"] <= res["retrieval"]["R@10"] <= 100
    assert res["retrieval"]["R@50"] == 100.0
    assert json.loads((tmp_path / "run" / "results.json").read_text())["retrieval"] == res["retrieval"]


ADAPTERS = sorted(p.stem for p in (Path(__file__).resolve().parents[2] / "conf" / "adapter").glob("*.yaml"))


@pytest.mark.gpu
@pytest.mark.heavy  # three whole tta.run.run per case
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("task", ["v2t", "t2v"])
@pytest.mark.parametrize("model,adapter", [("clip4clip", a) for a in ADAPTERS]
                         + [("xpool", a) for a in ("source", "hatvtr", "tcr", "sar")])
def test_every_adapter_runs_on_cuda_as_on_the_cpu(tmp_path, official_checkpoints, model, adapter, task):
    """Each adapter (on CLIP4Clip; four of them on X-Pool too) streams the official-format fixture on the GPU in float32 and bf16 autocast. float32 ranks as the
    CPU does up to one query per recall level (cuBLAS may sum in another order); bf16 gives valid metrics. Five
    batches, so that the memories fill and truncate (their bookkeeping mixes CPU ground truth with GPU features)."""
    n = 80
    root = tmp_path / "msvd"
    root.mkdir()
    _msvd(root, n=n, step=3)
    results = {}
    for name, accelerator, precision in (("cpu", "cpu", "32-true"), ("gpu", "gpu", "32-true"),
                                         ("gpu-bf16", "gpu", "bf16-mixed")):
        cfg = compose("run", ["data=msvd", f"data.root={root}", f"model={model}", "model.arch=custom",
                              f"model.checkpoint={official_checkpoints[model]}", f"task={task}",
                              f"adapter={adapter}", "shift=gaussian", f"paths.cache_dir={tmp_path / 'cache'}",
                              f"trainer.accelerator={accelerator}", f"trainer.precision={precision}",
                              "trainer.enable_progress_bar=false"])
        results[name] = run(cfg, tmp_path / name)
        recorded = json.loads((tmp_path / name / "results.json").read_text())
        assert recorded["retrieval"] == results[name]["retrieval"]
        assert recorded["provenance"]["device"]["type"] == ("cuda" if accelerator == "gpu" else "cpu")
        assert recorded["provenance"]["precision"] == precision
    print(model, adapter, task, {k: {m: r["retrieval"][m] for m in ("R@1", "R@5", "R@10")} for k, r in results.items()})
    for name in ("gpu", "gpu-bf16"):
        assert results[name]["num_queries"] == n
        assert 0 <= results[name]["retrieval"]["R@1"] <= results[name]["retrieval"]["R@10"] <= 100
    for metric in ("R@1", "R@5", "R@10"):
        assert abs(results["gpu"]["retrieval"][metric] - results["cpu"]["retrieval"][metric]) <= 100 / n, metric
