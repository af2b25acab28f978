"""``trainer.precision``: autocast precisions run on the CPU; a precision that casts the weights away from float32
stops at once with one clear line (exit 2) naming it and what to use."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest

from tests.conftest import tiny_overrides
from tta.run import run
from tta.stages import PRECISIONS
from tta.utils.config import compose


def test_bf16_true_is_refused_by_the_cli(tiny_cache, tmp_path):
    args = [sys.executable, "-m", "tta.run", *tiny_overrides(tiny_cache, "trainer.precision=bf16-true", "data.subset=32",
                                                              f"hydra.run.dir={tmp_path}/run")]
    out = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert out.returncode == 2, out.stderr[-2000:]
    first = out.stderr.strip().splitlines()[0]
    assert first.startswith("error: trainer.precision=bf16-true is not supported") and "32-true" in first
    assert "Traceback" not in out.stderr
    assert not (tmp_path / "run" / "results.json").exists()


@pytest.mark.parametrize("precision", ["16-true", "64-true", "bf16-true", "transformer-engine"])
def test_weight_casting_precisions_stop_before_anything_is_built(tmp_path, precision):
    cfg = compose("run", [f"paths.cache_dir={tmp_path / 'cache'}", f"trainer.precision={precision}"])
    with pytest.raises(ValueError, match=f"trainer.precision={precision} is not supported.*bf16-mixed"):
        run(cfg, tmp_path / "run")
    assert not (tmp_path / "cache").exists()  # refused before the model or the data were touched


def test_float16_autocast_on_the_cpu_stops_before_anything_is_built(tmp_path):
    """Lightning would stream a CPU run in bf16 under the name 16-mixed, its gallery encoded in float16."""
    cfg = compose("run", [f"paths.cache_dir={tmp_path / 'cache'}", "trainer.precision=16-mixed",
                          "trainer.accelerator=cpu"])
    with pytest.raises(ValueError, match="trainer.precision=16-mixed runs on a GPU only.*use trainer.precision=bf16-mixed"):
        run(cfg, tmp_path / "run")
    assert not (tmp_path / "cache").exists()


def test_bf16_mixed_runs_on_the_cpu(tiny_cache, tmp_path):
    assert "bf16-mixed" in PRECISIONS
    cfg = compose("run", tiny_overrides(tiny_cache, "adapter=hatvtr", "trainer.precision=bf16-mixed", "data.subset=16"))
    res = run(cfg, tmp_path)
    assert res["num_queries"] == 16 and all(math.isfinite(v) for v in res["retrieval"].values())


@pytest.mark.parametrize("adapter", ["hatvtr", "tcr"])
def test_mixed_precision_autocasts_the_query_encoder_alone(tiny_cache, tmp_path, monkeypatch, adapter):
    """bf16-mixed: the stream's query encoder runs under autocast, the similarities its step computes do not (a bf16
    similarity puts logits at temperature 0.01 on a grid 0.2 apart), and the scores come out float32."""
    import torch

    from tta.adapters.base import OnlineAdapter
    from tta.models.retrieval import RetrievalModel

    seen = {"encoder": [], "similarity": [], "scores": []}
    encode, similarity, adapt = RetrievalModel.encode_video, RetrievalModel.similarity, OnlineAdapter.adapt_batch
    in_step = []  # the stream's adaptation steps (not the gallery's encoding or the fixture's training)

    def spy_encode(self, frames):
        out = encode(self, frames)
        if in_step:
            seen["encoder"].append((torch.is_autocast_enabled("cpu"), out.dtype))
        return out

    def spy_similarity(self, queries, gallery):
        if in_step:
            seen["similarity"].append((torch.is_autocast_enabled("cpu"), queries.dtype, gallery.dtype))
        return similarity(self, queries, gallery)

    def spy_adapt(self, batch, record):
        in_step.append(True)
        try:
            sims = adapt(self, batch, record)
        finally:
            in_step.clear()
        seen["scores"].append(sims.dtype)
        return sims

    monkeypatch.setattr(RetrievalModel, "encode_video", spy_encode)
    monkeypatch.setattr(RetrievalModel, "similarity", spy_similarity)
    monkeypatch.setattr(OnlineAdapter, "adapt_batch", spy_adapt)
    cfg = compose("run", tiny_overrides(tiny_cache, f"adapter={adapter}", "trainer.precision=bf16-mixed",
                                        "data.subset=32"))
    res = run(cfg, tmp_path)
    assert res["num_queries"] == 32
    assert seen["encoder"] and set(seen["encoder"]) == {(True, torch.bfloat16)}
    assert seen["similarity"] and set(seen["similarity"]) == {(False, torch.float32, torch.float32)}
    assert seen["scores"] == [torch.float32, torch.float32]


def test_an_unknown_matmul_precision_stops_before_anything_is_built(tmp_path):
    cfg = compose("run", [f"paths.cache_dir={tmp_path / 'cache'}", "matmul_precision=tf32"])
    with pytest.raises(ValueError, match="matmul_precision=tf32 is not one of highest, high, medium"):
        run(cfg, tmp_path / "run")
    assert not (tmp_path / "cache").exists()


def test_matmul_precision_holds_for_the_run_is_recorded_and_restored(tiny_cache, tmp_path, monkeypatch):
    """TF32 (``high``) is set while the run computes, recorded in provenance, and the caller's setting comes back;
    ``highest`` names the same run as a config without the key (results and W&B ids of earlier runs stay valid)."""
    import torch

    import tta.stages
    from tta.results import identity_keys

    seen = []
    real = tta.stages.build_trainer

    def spy(*args, **kwargs):
        seen.append(torch.get_float32_matmul_precision())
        return real(*args, **kwargs)

    monkeypatch.setattr(tta.stages, "build_trainer", spy)
    before = torch.get_float32_matmul_precision()
    cfg = compose("run", tiny_overrides(tiny_cache, "matmul_precision=high", "data.subset=16"))
    res = run(cfg, tmp_path)
    assert seen == ["high"] and res["provenance"]["matmul_precision"] == "high"
    assert torch.get_float32_matmul_precision() == before
    plain = {"seed": 1, "matmul_precision": "highest"}
    assert identity_keys(plain) == {"seed": 1} and identity_keys({**plain, "matmul_precision": "high"}) != {"seed": 1}


@pytest.mark.filterwarnings("ignore:The `srun` command")
@pytest.mark.parametrize("flag", [False, True])
def test_trainer_deterministic_flag_holds_whatever_the_process_had(monkeypatch, flag):
    """``trainer.deterministic`` is what the stream runs under, after a job of the same process that set the other
    value; false on a process where it is already off is left as it is (Lightning's call would import torch's
    compiler only to turn it off again)."""
    import torch

    from tta.stages import build_trainer

    cfg = compose("run", [f"trainer.deterministic={str(flag).lower()}", "trainer.enable_progress_bar=false"])
    calls = []
    real = torch.use_deterministic_algorithms
    monkeypatch.setattr(torch, "use_deterministic_algorithms", lambda *a, **k: (calls.append(a[0]), real(*a, **k)))
    before = torch.are_deterministic_algorithms_enabled()
    try:
        for earlier in (not flag, flag):
            real(earlier)
            calls.clear()
            build_trainer(cfg, callbacks=[])
            assert torch.are_deterministic_algorithms_enabled() is flag
            assert calls == ([] if earlier is flag is False else [flag])
    finally:
        real(before)
