"""Real MSR-VTT test captions for the text-shift tests (../shared/data beside the repository) and WordNet."""

from __future__ import annotations

import csv
from functools import lru_cache
from pathlib import Path

import pytest

from tests.fixtures import MSRVTT_CSV_NAME, find_msrvtt_csv

# beside the repository, or beside an ancestor folder (a worktree /work/wt/<name> finds /work/shared), or $TTA_MSRVTT_CSV
MSRVTT_CSV = find_msrvtt_csv() or Path(__file__).resolve().parents[3].parent / "shared" / "data" / MSRVTT_CSV_NAME


@lru_cache(maxsize=1)
def _rows() -> tuple[tuple[str, str], ...]:
    with open(MSRVTT_CSV, newline="") as f:
        return tuple((r["key"], r["sentence"]) for r in csv.DictReader(f))


def msrvtt_captions(n: int | None = None) -> list[tuple[str, str]]:
    """(caption id, caption) of the 1,000 MSR-VTT 1k-A test captions; skips when the file is absent."""
    if not MSRVTT_CSV.is_file():
        pytest.skip(f"real MSR-VTT captions not found at {MSRVTT_CSV} (the shared/ folder beside the repository)")
    rows = list(_rows())
    return rows if n is None else rows[:n]


def need_wordnet() -> None:
    from tta.shifts.text.wordnet import WordNetMissingError, find_wordnet_dir

    try:
        find_wordnet_dir()
    except WordNetMissingError as e:
        pytest.skip(f"WordNet missing ({e}); `make setup` as root installs wordnet-base wordnet-sense-index")
