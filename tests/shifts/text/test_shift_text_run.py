"""Text shifts through the online runner on the tiny embedded benchmark (t2v query shift), and the sample table."""

from __future__ import annotations

import pytest

from tests.conftest import tiny_overrides
from tests.shifts.text.text_captions import msrvtt_captions, need_wordnet
from tta.run import run
from tta.shifts import text_shift_names
from tta.shifts.text import requires_model
from tta.utils.config import compose


@pytest.fixture(scope="module", autouse=True)
def _wordnet(single_thread_torch):
    need_wordnet()


@pytest.mark.parametrize("model", ["clip4clip", "xpool"])
@pytest.mark.parametrize("shift", ["char_swap", "synonym_replace", "passive_approx"])
def test_text_shift_runs_as_query_shift(tiny_cache, tmp_path, model, shift):
    res = run(compose("run", tiny_overrides(tiny_cache, f"model={model}", "task=t2v", f"shift={shift}")), tmp_path)
    assert res["shift"] == shift and res["shifted_side"] == "query"  # the Hydra choice is the shift's name
    assert res["num_queries"] == 40 and 0 <= res["retrieval"]["R@1"] <= 100


def test_text_shift_changes_the_queries(tiny_cache, tmp_path):
    clean = run(compose("run", tiny_overrides(tiny_cache, "task=t2v", "save.sims=true")), tmp_path / "a")
    noisy = run(compose("run", tiny_overrides(tiny_cache, "task=t2v", "shift=char_delete", "save.sims=true")),
                tmp_path / "b")
    import torch

    a, b = torch.load(tmp_path / "a" / "sims.pt"), torch.load(tmp_path / "b" / "sims.pt")
    assert (a.float() - b.float()).abs().max() > 1e-3 and clean["shift"] == "clean" and noisy["severity"] == 7


def test_sample_table_covers_every_shift():
    from tta.tools.text_samples import render, sample_rows

    cid, cap = msrvtt_captions(5)[4]
    rows = sample_rows(cap, cid)
    assert {r["name"] for r in rows} == {n for n in text_shift_names() if not requires_model(n)}
    md = render(cap, cid, rows)
    assert md.count("\n| `") == len(rows) and cap in md
