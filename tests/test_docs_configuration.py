"""docs/configuration.md against conf/: every choice of a config group is documented, and no documented choice
is missing, so the page cannot fall behind a new adapter, dataset or shift."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import tta
from tta.utils.config import CONF_DIR as CONF

DOCS = Path(tta.__file__).resolve().parent.parent / "docs"
#: choices that come from an installed Hydra plugin, not from a file in conf/
PLUGIN_CHOICES = {"hydra/launcher": {"submitit_local"}}
GROUPS = ("model", "data", "scenario", "task", "adapter", "posthoc", "trainer", "logger", "callbacks",
          "hydra/launcher", "paths")


def stems(group: str) -> set[str]:
    return {p.stem for p in (CONF / group).glob("*.yaml") if not p.stem.startswith("_")}


def documented_choices(page: str) -> dict[str, set[str]]:
    """{group: the backticked names of its 'choices' cell} from the group table of ``page``."""
    out = {}
    for line in page.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and re.fullmatch(r"`[\w/]+`", cells[0]):
            out[cells[0].strip("`")] = set(re.findall(r"`([\w/]+)`", cells[1]))
    return out


def test_the_parser_reads_a_constructed_table():
    assert documented_choices("| group | choices |\n|---|---|\n| `task` | `v2t`, `t2v` | which side |") == {
        "task": {"v2t", "t2v"}}


@pytest.mark.parametrize("group", GROUPS)
def test_every_config_choice_is_documented_and_every_documented_one_exists(group):
    documented = documented_choices((DOCS / "configuration.md").read_text()).get(group)
    assert documented is not None, f"docs/configuration.md has no row for the group {group}"
    assert stems(group) - documented == set(), f"{group} choices missing from docs/configuration.md"
    assert documented - stems(group) - PLUGIN_CHOICES.get(group, set()) == set(), \
        f"docs/configuration.md lists {group} choices that have no config"


def test_every_shift_config_is_documented():
    pages = "\n".join(p.read_text() for p in [DOCS / "configuration.md", DOCS / "text-shifts.md",
                                              *sorted((DOCS / "shifts").glob("*.md"))])
    named = set(re.findall(r"`(?:shift=)?([a-z0-9_]+)`", pages))
    for prefix, names in re.findall(r"`([a-z0-9_]+)\{([a-z0-9_,]+)\}`", pages):  # `schiappa_{a,b}`
        named.update(prefix + n for n in names.split(","))
    assert stems("shift") - named == set(), "shift configs named on no docs page"


def test_real_data_page_names_every_dataset_where_its_reader_says_it_is_published():
    from tta.data.readers import activitynet, didemo, lsmdc, msrvtt, msvd

    page = (DOCS / "real-data.md").read_text()
    for module in (activitynet, didemo, lsmdc, msrvtt, msvd):
        name = module.__name__.rsplit(".", 1)[1]
        help_text = getattr(module, f"{name}_layout_help")("root")
        assert f"`data={name}`" in page or f"| `{name}` |" in page, f"docs/real-data.md misses data={name}"
        for url in re.findall(r"https?://[^\s,;)]+", help_text):
            assert url.rstrip(".") in page, f"{url} ({name}) missing from docs/real-data.md"
    data_with_root = {p.stem for p in (CONF / "data").glob("*.yaml") if "root_env:" in p.read_text()}
    for name in data_with_root:
        assert f"| `{name}` |" in page, f"docs/real-data.md has no row for data={name}"
    for fmt in ("xpool", "clip4clip"):
        assert f"python -m tta.models.convert --format {fmt}" in page
