"""Robustness aggregated severity -> type -> group -> overall against hand-computed values; the reference
option, Schiappa et al.'s categories and RSUM."""

from __future__ import annotations

import pandas as pd
import pytest

from tta.metrics.robustness import aggregate_robustness
from tta.reporting.robustness import robustness_table, shift_group


def _run(adapter, shift, severity, r1, r5=None, r10=None, seed=42):
    return {"data": "synth", "task": "v2t", "scenario": "qs", "model": "xpool", "adapter": adapter,
            "adapter_rank": 0 if adapter == "source" else 1, "shift": shift, "severity": severity, "seed": seed,
            "level": {"clean": "clean", "gaussian": "low", "impulse": "low", "motion_blur": "mid"}.get(shift, "other"),
            "R@1": r1, "R@5": r5 if r5 is not None else r1 + 20, "R@10": r10 if r10 is not None else r1 + 30}


def test_two_types_two_severities_by_hand():
    # clean 40; gaussian (low) s1 30, s5 10; motion_blur (mid) s1 36, s5 20
    rows = aggregate_robustness(40.0, {("low", "gaussian", 1): 30.0, ("low", "gaussian", 5): 10.0,
                                       ("mid", "motion_blur", 1): 36.0, ("mid", "motion_blur", 5): 20.0})
    by = {(r["scope"], r["name"]): r for r in rows}
    assert [r["scope"] for r in rows] == ["overall", "group", "group", "type", "type"]
    # types: gamma_r = 1 - (40 - R)/40 -> gaussian (0.75 + 0.25)/2 = 0.5, motion_blur (0.9 + 0.5)/2 = 0.7
    assert by[("type", "gaussian")]["relative_robustness"] == pytest.approx(0.5)
    assert by[("type", "gaussian")]["relative_robustness_sd"] == pytest.approx(0.3535534, abs=1e-6)  # sd(.75, .25)
    assert by[("type", "motion_blur")]["relative_robustness"] == pytest.approx(0.7)
    # gamma_a = 1 - (40 - R)/100 -> gaussian (0.9 + 0.7)/2 = 0.8, motion_blur (0.96 + 0.8)/2 = 0.88
    assert by[("type", "gaussian")]["absolute_robustness"] == pytest.approx(0.8)
    assert by[("group", "mid")]["absolute_robustness"] == pytest.approx(0.88)
    overall = by[("overall", "overall")]
    assert overall["relative_robustness"] == pytest.approx(0.6)
    assert overall["relative_robustness_sd"] == pytest.approx(0.1414214, abs=1e-6)  # sd(0.5, 0.7)
    assert overall["absolute_robustness"] == pytest.approx(0.84)
    # MMI of the aggregated score: (20 + 28)/2 = 24 -> (40 - 24)/40 = 0.4
    assert overall["score"] == pytest.approx(24.0) and overall["MMI"] == pytest.approx(0.4)


def test_hand_example_overall_over_types_and_flat_mmi():
    # clean 40; low: gaussian s1 30, s5 10, impulse 20; mid: motion_blur 36.
    # gamma_r per type: gaussian (0.75 + 0.25)/2 = 0.5, impulse 0.5, motion_blur 0.9 -> overall over the three
    # types 1.9/3 = 0.633 (a mean over levels would give (0.5 + 0.9)/2 = 0.700); MMI over every perturbed score:
    # (30 + 10 + 20 + 36)/4 = 24 -> (40 - 24)/40 = 0.400 (a mean of level means would give 0.300)
    rows = aggregate_robustness(40.0, {("low", "gaussian", 1): 30.0, ("low", "gaussian", 5): 10.0,
                                       ("low", "impulse", 5): 20.0, ("mid", "motion_blur", 3): 36.0})
    by = {(r["scope"], r["name"]): r for r in rows}
    overall = by[("overall", "overall")]
    assert round(overall["relative_robustness"], 3) == 0.633 and round(overall["MMI"], 3) == 0.400
    assert overall["relative_robustness_sd"] == pytest.approx(0.2309401, abs=1e-6)  # sd(0.5, 0.5, 0.9), over types
    assert overall["n"] == 3 and overall["score"] == pytest.approx(24.0)
    low = by[("group", "low")]
    assert low["relative_robustness"] == pytest.approx(0.5) and low["MMI"] == pytest.approx((40 - 20) / 40)
    assert by[("group", "mid")]["relative_robustness"] == pytest.approx(0.9)


def test_schiappa_grouping_has_no_other_group_and_keeps_natural_text_in_the_overall():
    df = pd.DataFrame([_run("source", "clean", 0, 40.0), _run("source", "gaussian", 5, 20.0),
                       _run("source", "fog", 5, 10.0), _run("source", "ocr", 1, 30.0),
                       _run("source", "drop_nn", 1, 0.0)])
    rob, notes = robustness_table(df, groups="schiappa")
    names = set(rob["name"])
    assert "other" not in names and "fog" not in names and "DropText" in names  # DropText is shown ...
    overall = rob[rob["scope"] == "overall"].iloc[0]
    assert overall["n"] == 2 and overall["relative_robustness"] == pytest.approx((0.5 + 0.75) / 2)  # ... not counted
    assert any("fog" in n for n in notes) and any("DropText" in n for n in notes)


def test_a_gallery_shifted_run_is_scored_apart():
    # "ocr s7" at 30 and "ocr s7 + gallery gaussian s3" at 10 are two benchmarks, not one cell of 20
    df = pd.DataFrame([_run("source", "clean", 0, 40.0), _run("source", "gaussian", 5, 30.0),
                       {**_run("source", "gaussian", 5, 10.0), "gallery_shift": "gaussian s3"}])
    rob, _ = robustness_table(df)
    overall = rob[rob["scope"] == "overall"].set_index("gallery")
    assert overall.loc["none", "score"] == pytest.approx(30.0)
    assert overall.loc["gaussian s3", "score"] == pytest.approx(10.0)


def test_report_table_reference_option_seeds_and_rsum():
    df = pd.DataFrame([_run("source", "clean", 0, 40.0), _run("tent", "clean", 0, 50.0),
                       _run("source", "gaussian", 1, 30.0), _run("source", "gaussian", 5, 10.0),
                       _run("source", "motion_blur", 1, 36.0), _run("source", "motion_blur", 5, 20.0),
                       _run("tent", "gaussian", 5, 24.0, seed=1), _run("tent", "gaussian", 5, 26.0, seed=2)])
    rob, notes = robustness_table(df)
    src = rob[(rob["adapter"] == "source") & (rob["scope"] == "overall")].iloc[0]
    assert src["relative_robustness"] == pytest.approx(0.6) and src["reference"] == "clean source"
    tent = rob[(rob["adapter"] == "tent") & (rob["scope"] == "overall")].iloc[0]
    assert tent["clean"] == 40.0 and tent["score"] == pytest.approx(25.0)  # mean over seeds, source's clean
    own = robustness_table(df, reference="own")[0]
    tent_own = own[(own["adapter"] == "tent") & (own["scope"] == "overall")].iloc[0]
    assert tent_own["clean"] == 50.0 and tent_own["relative_robustness"] == pytest.approx(0.5)
    rsum = robustness_table(df, "RSUM")[0]
    src_rsum = rsum[(rsum["adapter"] == "source") & (rsum["scope"] == "overall")].iloc[0]
    assert src_rsum["clean"] == pytest.approx(40 + 60 + 70)
    assert notes == []


@pytest.mark.parametrize("metric", ["MdR", "MnR", "skewness", "trunc_skewness"])
def test_meaningless_metrics_are_refused(metric):
    with pytest.raises(ValueError, match=f"robustness of {metric} is meaningless"):
        robustness_table(pd.DataFrame([_run("source", "clean", 0, 40.0)]), metric)


def test_schiappa_categories_of_text_and_video_shifts():
    assert shift_group("ocr", "schiappa") == "ChangeChar" and shift_group("typos", "schiappa") == "ChangeChar"
    assert shift_group("add_irrelevant_phrase", "schiappa") == "AddText"
    assert shift_group("gender_swap", "schiappa") == "Bias" and shift_group("drop_nn", "schiappa") == "DropText"
    assert shift_group("drop_first", "schiappa") == "Positional" and shift_group("formal", "schiappa") == "TextStyle"
    assert shift_group("gaussian", "schiappa") == "Noise" and shift_group("schiappa_freeze", "schiappa") == "Temporal"
    assert shift_group("fog", "schiappa") is None
    assert shift_group("gaussian", "level") == "low" and shift_group("word_swap", "level") == "word"
