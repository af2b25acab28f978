"""benchmarks/stream_share.py: the arms of each round, their order and the shares computed from the runs' stream
times (a stand-in run function returns fixed times; timing is never asserted)."""

from __future__ import annotations

import pytest

from benchmarks import stream_share

TIMES = {"clean": 10.0, "off": 40.0, "fill": 41.0, "warm": 16.0}


def fake_run(calls: list):
    def run(_out, tag, overrides):
        calls.append((tag, overrides))
        arm = tag.rsplit("-", 1)[1]
        adapter = next(o for o in overrides if o.startswith("adapter=")).split("=")[1]
        bump = 5.0 if adapter == "hatvtr" else 0.0
        round_jitter = 1.0 if tag.startswith("r1") else 0.0
        return {"ms": TIMES[arm] + bump + round_jitter, "r1": 60.0 if arm == "clean" else 52.5}
    return run


def test_each_round_runs_every_arm_per_adapter_the_fill_before_the_warm_run(tmp_path):
    calls: list = []
    rows = stream_share.measure(["source", "hatvtr"], "motion_blur", 5, 2, ["task=v2t"], tmp_path, fake_run(calls))
    assert [tag for tag, _ in calls[:4]] == ["r0-source-clean", "r0-source-off", "r0-source-fill", "r0-source-warm"]
    assert len(calls) == 16 and len(rows) == 16
    overrides = dict(calls)
    assert "shift=clean" in overrides["r0-source-clean"]
    assert {"shift=motion_blur", "shift.severity=5", "shift.motion_store=false"} <= set(overrides["r0-source-off"])
    assert "shift.motion_store=true" in overrides["r1-hatvtr-warm"] and "task=v2t" in overrides["r1-hatvtr-warm"]


def test_shares_are_of_the_round_means_and_the_fill_run_is_not_reported(tmp_path):
    rows = stream_share.measure(["source", "hatvtr"], "video_defocus", 3, 2, [], tmp_path, fake_run([]))
    source, hatvtr = stream_share.summarise(rows)
    assert source["ms"] == {"clean": [10.0, 11.0], "off": [40.0, 41.0], "warm": [16.0, 17.0]}
    assert source["share"]["off"] == pytest.approx(1 - 10.5 / 40.5)
    assert source["share"]["warm"] == pytest.approx(1 - 10.5 / 16.5)
    assert hatvtr["mean"]["clean"] == pytest.approx(15.5) and source["same_scores"]
    table = stream_share.markdown([source, hatvtr])
    assert "| source | 10.5 (10.0, 11.0) | 40.5 (40.0, 41.0) | 16.5 (16.0, 17.0) | 74 % | 36 % | 60.00 / 52.50 | yes |" \
        in table


def test_a_shift_without_a_store_has_two_arms_and_a_changed_score_is_flagged(tmp_path):
    assert stream_share.arms("gaussian") == ["clean", "off"]
    rows = stream_share.measure(["source"], "gaussian", 3, 1, [], tmp_path, fake_run([]))
    rows.append({"round": 1, "adapter": "source", "arm": "off", "ms": 40.0, "r1": 51.0})
    (summary,) = stream_share.summarise(rows)
    assert not summary["same_scores"] and "**no**" in stream_share.markdown([summary])


def test_the_table_says_where_the_shifted_arms_perturbed(tmp_path):
    rows = stream_share.measure(["source"], "motion_blur", 5, 1, [], tmp_path, fake_run([]))
    assert stream_share.where_perturbed(rows) == "? loader worker(s), shift device ?"  # a run without provenance
    for r in rows:
        r.update(workers=0 if r["arm"] == "fill" else 4, shift_device="cuda:0" if r["arm"] == "fill" else "cpu")
    assert stream_share.where_perturbed(rows) == ("0 loader worker(s), shift device cuda:0; "
                                                  "4 loader worker(s), shift device cpu")


def test_a_share_that_rounds_to_zero_prints_without_a_sign(tmp_path):
    rows = [{"round": 0, "adapter": "source", "arm": arm, "ms": ms, "r1": 50.0}
            for arm, ms in (("clean", 16.90), ("off", 42.7), ("fill", 43.0), ("warm", 16.89))]
    (summary,) = stream_share.summarise(rows)
    assert summary["share"]["warm"] < 0 and "| 60 % | 0 % |" in stream_share.markdown([summary])
