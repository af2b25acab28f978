"""One real MSR-VTT caption under every text shift, as a Markdown table: ``python -m tta.tools.text_samples``.

Writes ``docs/text-shifts.md`` (``--out``) from the MSR-VTT 1k-A test list (``--csv``, default
``../shared/data/MSRVTT_JSFUSION_test.csv`` beside the repository). Each row uses the shift's Hydra default
severity (``conf/shift/<name>.yaml``; HAT-VTR App. B.4: character 7, word 2, sentence 1) and the item seed of the
caption (base seed 42), with the semantic filter on, exactly as ``python -m tta.run task=t2v shift=<name>`` would
perturb that caption. Measured over all captions of the list, as row files for docs/results/ (``--rows-dir``): the
word-level severity floor (changed share and edits per severity) and how often each sentence-level approximation
changes a caption.
"""

from __future__ import annotations

import argparse
import csv
import logging
import sys
from pathlib import Path

from tta.shifts import item_seed, text_shift_names
from tta.shifts.registry import get_shift
from tta.shifts.text import APPROXIMATION, HATVTR_TEXT_SHIFTS, perturb_text_detailed, requires_model
from tta.utils.config import CONF_DIR

log = logging.getLogger(__name__)
REPO = Path(__file__).resolve().parents[2]
CONF = CONF_DIR / "shift"
DEFAULT_CSV = REPO.parent / "shared" / "data" / "MSRVTT_JSFUSION_test.csv"


def _choice(name: str) -> tuple[str, int, dict]:
    """(Hydra choice, default severity, options) of a registered shift, from conf/shift/<choice>.yaml."""
    from omegaconf import OmegaConf

    choice = name  # every Hydra choice is its shift's name
    cfg = OmegaConf.load(CONF / f"{choice}.yaml")
    options = cfg.get("options")
    return choice, int(cfg.severity), (OmegaConf.to_container(options, resolve=True) if options is not None else {})


def sample_rows(caption: str, caption_id: str, seed: int = 42) -> list[dict]:
    rows = []
    order = list(HATVTR_TEXT_SHIFTS)
    approximated = {v: k for k, v in APPROXIMATION.items()}
    names = sorted(text_shift_names(), key=lambda n: order.index(approximated.get(n, n))
                   if approximated.get(n, n) in order else len(order))
    for name in names:
        if requires_model(name):
            continue  # the originals need a local model; their *_approx rows stand for them
        choice, severity, options = _choice(name)
        options.pop("model_path", None)
        options.pop("reverse_model_path", None)
        out = perturb_text_detailed(caption, name, severity, item_seed(seed, caption_id, name, severity), **options)
        rows.append({"choice": choice, "name": name, "level": get_shift(name).level, "severity": severity,
                     "hatvtr": approximated.get(name, name) in HATVTR_TEXT_SHIFTS, "text": out.text, "tries": out.tries,
                     "cosine": out.cosine, "passed": out.passed})
    return rows


FLOOR_SHIFTS = ("synonym_replace", "word_insert", "word_swap", "insert_punctuation", "word_delete")
SENTENCE_APPROX = ("back_translation_approx", "formal_approx", "casual_approx", "passive_approx", "active_approx")


def edits(n_words: int, severity: int) -> int:
    """Words SR / WI / WS edit and marks IP inserts (vtr_tta): n = max(1, ⌊0.05·s·n_words⌋) (docs/shifts/text.md, word level)."""
    return max(1, int(0.05 * severity * n_words))


def _norm(t: str) -> str:
    return " ".join(t.lower().rstrip(" .!?").split())


def changed_shares(captions: list[tuple[str, str]], seed: int = 42) -> dict:
    """Measured on real captions [(caption, id)]: per word shift and severity 1..7 the changed share and the share
    whose edit count equals severity 1's (the floor), and per sentence approximation the changed share (also
    ignoring case and final punctuation). The semantic filter is off here: it picks among candidates with the same
    number of edits (word shifts) and keeps the deterministic rewrite anyway (sentence rules, keep_last)."""
    word: dict[str, dict[int, dict]] = {}
    lengths = [len(c.split()) for c, _ in captions]
    for name in FLOOR_SHIFTS:
        word[name] = {}
        for sev in range(1, 8):
            outs = [perturb_text_detailed(c, name, sev, item_seed(seed, cid, name, sev), filter_enabled=False).text
                    for c, cid in captions]
            row = {"changed_share": sum(o != c for o, (c, _) in zip(outs, captions, strict=True)) / len(captions)}
            if name != "word_delete":  # deletion has no floor: each word goes with probability p = 0.05·s
                row["mean_edits"] = sum(edits(n, sev) for n in lengths) / len(lengths)
                row["same_as_s1_share"] = sum(edits(n, sev) == edits(n, 1) for n in lengths) / len(lengths)
            word[name][sev] = row
    sentence = {}
    for name in SENTENCE_APPROX:
        options = {} if name == "back_translation_approx" else {"filter_enabled": False}
        outs = [perturb_text_detailed(c, name, 1, item_seed(seed, cid, name, 1), **options).text for c, cid in captions]
        sentence[name] = {
            "changed_share": sum(o != c for o, (c, _) in zip(outs, captions, strict=True)) / len(captions),
            "changed_share_beyond_case": sum(_norm(o) != _norm(c) for o, (c, _) in zip(outs, captions, strict=True))
            / len(captions)}
    return {"num_captions": len(captions), "mean_words": sum(lengths) / len(lengths), "word": word,
            "sentence": sentence}


#: the row files of the two measured tables (``--rows-dir``), rendered on docs/results/text-shift-statistics.md
WORD_ROWS, SENTENCE_ROWS = "text-shift-word-severity.jsonl", "text-shift-sentence-approx.jsonl"
WORD_COLUMNS = [{"name": "shift"}] + [{"name": f"s{s}"} for s in range(1, 8)]
SENTENCE_COLUMNS = [{"name": "shift"}, {"name": "changed", "format": "{:.1f} %", "align": "right"},
                    {"name": "changed beyond case / final period", "format": "{:.1f} %", "align": "right"}]


def _word_cell(r: dict) -> str:
    cell = f"changed {100 * r['changed_share']:.0f} %"
    if "mean_edits" in r:
        cell += f", edits {r['mean_edits']:.2f}, = s1 {100 * r['same_as_s1_share']:.0f} %"
    return cell


def write_share_rows(m: dict, rows_dir: Path, source: str, seed: int = 42, command: str | None = None) -> list[Path]:
    """The measured shares of :func:`changed_shares` as two row files (``python -m tta.report FILE --layout
    measurements``): per word shift one row of its severities, per sentence approximation its changed shares."""
    from tta.reporting.measurements import write_measurements

    before = [f"{m['num_captions']} captions of {source}, {m['mean_words']:.1f} words per caption on average; item "
              f"seeds from base seed {seed}, semantic filter off"]
    word = [{"cells": {"shift": f"`{name}`", **{f"s{s}": _word_cell(per[s]) for s in range(1, 8)}},
             "measured": {f"s{s}": per[s] for s in range(1, 8)}} for name, per in m["word"].items()]
    sentence = [{"cells": {"shift": f"`{name}`", "changed": 100 * r["changed_share"],
                           "changed beyond case / final period": 100 * r["changed_share_beyond_case"]}, "measured": r}
                for name, r in m["sentence"].items()]
    return [write_measurements(rows_dir / WORD_ROWS, WORD_COLUMNS, word, before=before, command=command,
                               title="Word-level shifts by severity: changed share, mean edits, share as at s1"),
            write_measurements(rows_dir / SENTENCE_ROWS, SENTENCE_COLUMNS, sentence, before=before, command=command,
                               title="Sentence-level approximations: share of captions changed")]


def render(caption: str, caption_id: str, rows: list[dict]) -> str:
    def cell(s: str) -> str:
        return s.replace("|", "\\|")

    lines = [
        "# Text shifts on a real MSR-VTT caption",
        "",
        f"Caption `{caption_id}` of the MSR-VTT 1k-A test list: **{caption}**",
        "",
        "Generated by `python -m tta.tools.text_samples` (default severities of `conf/shift/`, item seed from base "
        "seed 42, semantic filter on: all-MiniLM-L6-v2, cosine ≥ 0.9, ≤ 100 tries). `shift=` is the Hydra choice and "
        "equals the shift's `id`, the name results.json reports. The five sentence-level HAT-VTR shifts (back-"
        "translation, formal, casual, passive, active) need local models (`shift=formal "
        "shift.options.model_path=...`); the rows show their rule-based approximations `*_approx`, which are "
        "reported under those names, never under the originals'. Rows marked HAT-VTR are the 15 t2v query shifts of "
        "the benchmark (or their stand-ins); the others are `keyboard` (Qiu et al.), Schiappa et al.'s "
        "categories and Shirnin et al.'s `uk_us_spelling_approx`, `slang_approx` and `yoda_approx`.",
        "",
        "| shift= | id | level | s | HAT-VTR | perturbed caption | filter (tries, cosine) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        filt = "—" if r["cosine"] is None else f"{r['tries']}, {r['cosine']:.3f}" + ("" if r["passed"] else " (failed)")
        lines.append(f"| `{r['choice']}` | `{r['name']}` | {r['level']} | {r['severity']} | "
                     f"{'yes' if r['hatvtr'] else ''} | {cell(r['text'])} | {filt} |")
    lines += ["", "Measured over all captions of the list by the same command: the word-level severity floor (changed "
              "share and edits per severity) and how often each sentence-level approximation changes a caption, "
              "[results/text-shift-statistics.md](results/text-shift-statistics.md)."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> Path:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--csv", type=Path, default=DEFAULT_CSV, help="MSRVTT_JSFUSION_test.csv")
    p.add_argument("--key", default="ret4", help="caption id (column 'key') to show")
    p.add_argument("--out", type=Path, default=REPO / "docs" / "text-shifts.md")
    p.add_argument("--rows-dir", type=Path, default=REPO / "docs" / "results" / "rows",
                   help="where the changed-share tables over all captions go, as row files (docs/results/pages.yaml "
                        "renders them: python -m tta.report --pages docs/results/pages.yaml --page text-shift-statistics)")
    p.add_argument("--no-shares", action="store_true", help="skip the changed-share tables over all captions")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if not args.csv.is_file():
        raise SystemExit(f"MSR-VTT caption list not found: {args.csv} (pass --csv path/to/MSRVTT_JSFUSION_test.csv)")
    with open(args.csv, newline="") as f:
        found = [r for r in csv.DictReader(f) if r["key"] == args.key]
    if not found:
        raise SystemExit(f"no caption with key {args.key!r} in {args.csv}")
    caption = found[0]["sentence"]
    text = render(caption, args.key, sample_rows(caption, args.key))
    if not args.no_shares:
        with open(args.csv, newline="") as f:
            captions = [(r["sentence"], r["key"]) for r in csv.DictReader(f)]
        command = " ".join(["python -m tta.tools.text_samples", *(sys.argv[1:] if argv is None else argv)])
        for path in write_share_rows(changed_shares(captions), args.rows_dir, args.csv.name, command=command):
            log.info("wrote %s", path)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    log.info("wrote %s", args.out)
    return args.out


if __name__ == "__main__":
    main()
