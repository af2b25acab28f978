"""benchmarks/finite_check.py runs end to end on the CPU: both forms agree and the fused one dispatches fewer
operators (a count, not a time)."""

from __future__ import annotations

from benchmarks import finite_check


def test_the_finite_check_benchmark_counts_both_forms(capsys):
    out = finite_check.main(["--checks", "3", "--repeats", "1"])
    before, now = out["per tensor, read back"], out["fused, on the device"]
    assert 0 < now["count"] < before["count"] / 10 and now["us"] > 0 and before["us"] > 0
    assert "52 gradients on cpu" in capsys.readouterr().out
