"""Every registered text shift on a few real MSR-VTT test captions (fast tier): a non-empty string out, the same
string for the same item seed, some caption changed; plus the samples page of ``python -m tta.tools.text_samples``
rendered from synthetic rows. Shift-specific behaviour: tests/test_shift_text_*.py."""

from __future__ import annotations

import pytest

from tests.fixtures import real_captions
from tests.shifts.text.text_captions import need_wordnet
from tta.shifts import item_seed, perturb_text, shift_kind, text_shift_names
from tta.shifts.registry import get_shift
from tta.shifts.text import HATVTR_TEXT_SHIFTS, requires_model
from tta.tools.text_samples import render

NAMES = [n for n in text_shift_names() if not requires_model(n)]
# these draw on WordNet (skipped with a clear message where it is not installed)
WORDNET_LEVELS = {"word", "sentence"}
# rewrites that are legitimately a no-op on captions already in the target form (the first captions are active) or
# without a word that has a British/American variant (tests/shifts/text/test_shift_text_shirnin.py covers it)
MAY_KEEP = {"active_approx", "uk_us_spelling_approx"}


@pytest.fixture(scope="module")
def captions():
    return real_captions(4)


def test_registry_covers_the_hatvtr_shifts():
    names = set(text_shift_names())
    assert all(n in names or f"{n}_approx" in names for n in HATVTR_TEXT_SHIFTS)
    assert all(shift_kind(n) == "text" for n in names)


@pytest.mark.parametrize("name", NAMES)
def test_text_shift_contract(name, captions):
    info = get_shift(name)
    if info.level in WORDNET_LEVELS:
        need_wordnet()
    severity = info.severities[-1]
    changed = 0
    for cid, caption in captions:
        seed = item_seed(42, cid, name, severity)
        out = perturb_text(caption, name, severity, seed)
        assert isinstance(out, str) and out.strip(), f"{name} returned {out!r} for {caption!r}"
        assert perturb_text(caption, name, severity, seed) == out, f"{name} is not deterministic per item seed"
        changed += out != caption
    assert changed or name in MAY_KEEP, f"{name} changed none of {[c for _, c in captions]}"


def test_samples_page_renders_rows():
    rows = [{"choice": "char_swap", "name": "char_swap", "level": "character", "severity": 7, "hatvtr": True,
             "text": "a mna | rides", "tries": 1, "cosine": None, "passed": True},
            {"choice": "formal", "name": "formal_approx", "level": "sentence", "severity": 1, "hatvtr": True,
             "text": "A man rides.", "tries": 3, "cosine": 0.93, "passed": False}]
    page = render("a man rides", "video1", rows)
    assert "**a man rides**" in page and "a mna \\| rides" in page
    assert "| `formal` | `formal_approx` | sentence | 1 | yes | A man rides. | 3, 0.930 (failed) |" in page


def test_the_changed_shares_are_written_as_row_files_tta_report_renders(tmp_path):
    from tta.reporting.pages import render_tables
    from tta.tools.text_samples import write_share_rows

    floor = {"changed_share": 1.0, "mean_edits": 1.03, "same_as_s1_share": 0.97}
    shares = {"num_captions": 2, "mean_words": 9.44,
              "word": {"word_swap": dict.fromkeys(range(1, 8), floor),
                       "word_delete": dict.fromkeys(range(1, 8), {"changed_share": 0.35})},
              "sentence": {"formal_approx": {"changed_share": 1.0, "changed_share_beyond_case": 0.346}}}
    files = write_share_rows(shares, tmp_path, "captions.csv", command="python -m tta.tools.text_samples")
    word, sentence = (t.to_markdown() for t in render_tables(files, layout="measurements"))
    assert "2 captions of captions.csv, 9.4 words per caption on average" in word
    assert "| `word_swap` | " + " | ".join(["changed 100 %, edits 1.03, = s1 97 %"] * 7) + " |" in word
    assert "| `word_delete` | " + " | ".join(["changed 35 %"] * 7) + " |" in word
    assert "| `formal_approx` | 100.0 % | 34.6 % |" in sentence
