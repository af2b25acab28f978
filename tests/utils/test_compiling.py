"""torch.compile with a fallback (tta/utils/compiling.py): any failure leaves the eager function, same results."""

from __future__ import annotations

import pytest
import torch

from tta.utils.compiling import compiled_or_eager


def _double(x):
    return 2 * x


def test_a_compiled_call_that_fails_runs_eagerly_from_then_on(monkeypatch, caplog):
    calls = []

    def broken_compile(fn):
        def compiled(*args):
            calls.append(1)
            raise RuntimeError("backend exploded")
        return compiled

    monkeypatch.setattr(torch, "compile", broken_compile)
    fn = compiled_or_eager(_double, "double")
    assert torch.equal(fn(torch.ones(2)), torch.full((2,), 2.0)) and fn.eager()
    assert torch.equal(fn(torch.ones(2)), torch.full((2,), 2.0)) and calls == [1]  # not tried again
    assert "running it eagerly" in caplog.text


def test_no_compiler_at_all_gives_the_function_itself(monkeypatch):
    def unavailable(fn):
        raise RuntimeError("no compiler on this platform")

    monkeypatch.setattr(torch, "compile", unavailable)
    assert compiled_or_eager(_double, "double") is _double


def test_a_working_compile_is_used(monkeypatch):
    monkeypatch.setattr(torch, "compile", lambda fn: (lambda *a: fn(*a) + 0))
    fn = compiled_or_eager(_double, "double")
    assert torch.equal(fn(torch.ones(1)), torch.full((1,), 2.0)) and not fn.eager()


def test_the_run_key_compiles_the_query_encoder_of_any_adapter(monkeypatch):
    from tta.adapters.base import OnlineAdapter

    monkeypatch.setattr(torch, "compile", lambda fn: (lambda *args, **kwargs: fn(*args, **kwargs)))
    adapter = OnlineAdapter()
    adapter.on_test_start()
    assert not hasattr(adapter.encode_queries, "eager")  # off by default
    adapter.compile_encoder = "default"
    adapter.on_test_start()
    assert adapter.encode_queries.eager() is False


def test_compile_is_false_true_or_a_mode_and_the_mode_reaches_torch_compile(monkeypatch):
    import pytest
    from omegaconf import OmegaConf

    from tta.stages import check_precision
    from tta.utils.compiling import compile_mode

    assert [compile_mode(v) for v in (False, None, True, "reduce-overhead", "max-autotune")] == \
        [None, None, "default", "reduce-overhead", "max-autotune"]
    for bad in ("yes", "default", 1):
        with pytest.raises(ValueError, match=f"compile={bad} is not one of false, true, reduce-overhead"):
            check_precision(OmegaConf.create({"trainer": {}, "compile": bad}))
    modes = []
    monkeypatch.setattr(torch, "compile", lambda fn, mode="default": modes.append(mode) or fn)
    compiled_or_eager(_double, "double")
    compiled_or_eager(_double, "double", "reduce-overhead")
    assert modes == ["default", "reduce-overhead"]


def test_a_real_compile_of_an_updating_run_gives_the_eager_recalls(tiny_cache, tmp_path, caplog, single_thread_torch):
    """torch.compile itself (inductor and the C++ compiler, no mock) on Tent's stream: gradients flow through the
    compiled encoder, nothing falls back, and the recalls are the eager run's (kernels may round differently, so the
    scores are compared within a tolerance, the ranks exactly)."""
    eager, compiled = assert_compiled_stream_matches("tent", "cpu", "true", tiny_cache, tmp_path, caplog)
    assert compiled["config"]["compile"] is True
    assert compiled["retrieval"] == eager["retrieval"]


#: the updating methods whose query encoder the compiled graph serves in their adaptation step (SAR: two passes)
UPDATING = ("tent", "eata", "sar", "read", "tcr", "hatvtr")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("adapter", UPDATING)
def test_reduce_overhead_on_cuda_streams_as_eager_does(adapter, tiny_cache, tmp_path, caplog):
    """``compile=reduce-overhead`` on a GPU replays the encoder as CUDA graphs, whose outputs live in memory the next
    replay reuses: every updating method streams through it without falling back, and gives the eager GPU run's
    recalls (its scores within a tolerance: compiled kernels round differently)."""
    assert_compiled_stream_matches(adapter, "gpu", "reduce-overhead", tiny_cache, tmp_path, caplog)


def assert_compiled_stream_matches(adapter: str, accelerator: str, mode: str, cache, tmp_path, caplog):
    """``adapter``'s tiny stream with ``compile=<mode>`` against the same stream eager, both on ``accelerator``:
    nothing falls back, it updates, its scores agree within 2e-3 and its recalls within one query; (eager,
    compiled) results."""
    from tests.conftest import tiny_overrides
    from tta.run import run
    from tta.utils.config import compose

    def go(compile_value: str):
        extra = (f"adapter={adapter}", "shift=gaussian", "shift.severity=5", "save.sims=true", "skip_complete=false",
                 "resume=false", f"trainer.accelerator={accelerator}", f"compile={compile_value}")
        out = tmp_path / compile_value
        return run(compose("run", tiny_overrides(cache, *extra)), out), torch.load(out / "sims.pt").float()

    (eager, sims_e), (compiled, sims_c) = go("false"), go(mode)
    assert "eagerly" not in caplog.text, f"{adapter}: the compiled encoder fell back to eager"
    assert compiled["counters"]["updates"] > 0
    assert torch.allclose(sims_c, sims_e, atol=2e-3), f"{adapter}: scores differ by {(sims_c - sims_e).abs().max()}"
    queries = compiled["num_queries"]
    for metric in ("R@1", "R@5"):  # within one query of the eager run
        assert abs(compiled["retrieval"][metric] - eager["retrieval"][metric]) <= 100 / queries + 1e-9, metric
    return eager, compiled


def test_outputs_of_a_replayed_mode_are_the_callers_own(monkeypatch):
    """Under ``reduce-overhead`` (CUDA graphs) the compiled outputs are cloned on CUDA, so that a kept output is not
    the buffer the next replay writes; CPU tensors and other modes are handed back as they come."""
    buffer = torch.zeros(3)
    monkeypatch.setattr(torch, "compile", lambda fn, mode="default": (lambda *a: buffer))
    for mode in ("default", "reduce-overhead"):
        assert compiled_or_eager(_double, "double", mode)(torch.ones(3)) is buffer  # on the CPU: no graph to replay
    cloned = []
    monkeypatch.setattr(torch.Tensor, "is_cuda", property(lambda self: True))  # stands for a CUDA output
    monkeypatch.setattr(torch.Tensor, "clone", lambda self: cloned.append(self) or self + 0)
    out = compiled_or_eager(_double, "double", "reduce-overhead")(torch.ones(3))
    assert out is not buffer and torch.equal(out, buffer) and cloned == [buffer]
    assert compiled_or_eager(_double, "double", "default")(torch.ones(3)) is buffer
