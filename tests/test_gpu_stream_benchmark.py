"""The precision check of benchmarks/gpu_stream.py: its arms, and the device-against-CPU verdict from per-query ranks
(the streams themselves need a GPU or minutes of CPU: see docs/results/hatvtr-runtime.md)."""

from __future__ import annotations

import numpy as np

from benchmarks.gpu_stream import device_against_cpu, precision_arms
from tta.reporting.compare import QueryRanks


def _ranks(first: list[bool]) -> QueryRanks:
    n = len(first)
    return QueryRanks(np.array([f"q{i}" for i in range(n)]), np.array([1 if hit else 7 for hit in first], np.int32),
                      np.zeros(n, bool), num_gallery=n)


def test_the_device_arms_follow_the_cpu_reference():
    names = [name for name, _ in precision_arms(True, ["32-true", "bf16-mixed"])]
    assert names == ["cpu 32-true", "gpu 32-true", "gpu 32-true tf32", "gpu bf16-mixed"]
    assert [name for name, _ in precision_arms(False, ["bf16-mixed"])] == ["cpu 32-true", "cpu bf16-mixed"]
    overrides = dict(precision_arms(True, ["bf16-mixed"]))
    assert "matmul_precision=high" in overrides["gpu 32-true tf32"]
    assert "matmul_precision=high" not in overrides["gpu 32-true"]


def test_float32_on_the_device_is_judged_by_its_net_difference_in_queries_seed_by_seed():
    cpu = _ranks([True, True, False, False])
    swapped = _ranks([False, True, True, False])  # two queries change, R@1 the same
    two_more = _ranks([True, True, True, True])
    row = device_against_cpu("source", [swapped, swapped], [cpu, cpu], [0, 1])
    assert (row["queries_differing"], row["net_queries"], row["met"]) == ([2, 2], [0, 0], True)
    row = device_against_cpu("source", [swapped, two_more], [cpu, cpu], [0, 1])
    assert (row["net_queries"], row["met"]) == ([0, 2], False)


def test_a_precision_check_asked_for_without_the_embedded_text_trunk_is_refused_before_any_run(monkeypatch):
    import pytest

    import benchmarks.gpu_stream as bench

    monkeypatch.setattr(bench, "text_trunk_installed", lambda: False)
    monkeypatch.setattr(bench, "stream_rows", lambda *a: pytest.fail("a stream ran before the refusal"))
    with pytest.raises(SystemExit, match="error: the precision check streams the embedded model"):
        bench.main(["--cpu", "--precision-check", "0"])


def test_the_loader_alone_runs_both_transform_modes_on_the_same_batches(tiny_cache, tmp_path):
    """``--loader`` on the tiny benchmark's test videos: both modes stream every query; the native frames that cross
    from the workers are smaller than the 224-px float clips, and only the device mode times a transform."""
    import json

    import benchmarks.gpu_stream as bench
    from tests.conftest import tiny_overrides

    rows = tmp_path / "rows.jsonl"
    found = bench.main(["--loader", "--streams", "none", "--queries", "24", "--rounds", "1", "--workers", "1",
                        "--rows", str(rows), *tiny_overrides(tiny_cache)])["loader"]
    by_mode = {r["transform_device"]: r for r in found}
    assert set(by_mode) == {"loader", "model"} and {r["queries"] for r in found} == {24}
    assert by_mode["model"]["mb_per_batch"] < by_mode["loader"]["mb_per_batch"] / 4
    assert by_mode["model"]["transform_ms_per_batch"] > 0 == by_mode["loader"]["transform_ms_per_batch"]
    written = [json.loads(line) for line in (tmp_path / "rows-loader.jsonl").read_text().splitlines()]
    assert written[0]["header"] == "measurements" and len(written) == 3
