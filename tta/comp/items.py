"""The probe's videos and their ordered events, read from a dataset that annotates them.

* the embedded ``synth_comp`` benchmark: ``events.json`` written by the renderer (exact time spans, the motion
  phrase of every event and the phrases of motions the clip never shows);
* ActivityNet Captions: the annotation file's timestamps and sentences, events sorted by start time; the key action
  of a sentence is its first main verb and its alternatives are WordNet verbs of the same lexicographer file
  (e.g. ``verb.motion``), inflected like the original (:func:`verb_alternatives`). The paper rewrites the action
  with a language model; this is the documented approximation (docs/methods/videocomp.md).
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path

from omegaconf import DictConfig

from tta.comp.disrupt import EVENTS_FILE, CompItem, Event, join_events

# verbs that introduce the action rather than name it (ActivityNet's "is seen", "begins to", "continues")
LIGHT_VERBS = frozenset({"see", "show", "begin", "start", "continue", "seem", "appear", "be", "get", "go"})
MAX_ALTERNATIVES = 20  # the most frequent verbs of the lexicographer file (SemCor counts): plausible, common words


def load_comp_items(data_cfg: DictConfig, split: str, cache: Path) -> list[CompItem]:
    """The items of ``split`` with at least two events, in the split's order (one per caption)."""
    from tta.data.registry import load_pairs

    pairs = load_pairs(data_cfg, split=split, cache=cache)
    return [item for item in items_of_pairs(data_cfg, split, cache, pairs) if len(item.events) >= 2]


def items_of_pairs(data_cfg: DictConfig, split: str, cache: Path, pairs: list) -> list[CompItem]:
    """The events behind each (video, caption) pair of ``split``, aligned with ``pairs``."""
    from tta.data.readers.activitynet import ACTIVITYNET_SPLIT_FILES, read_activitynet_events
    from tta.data.registry import dataset_root

    root = dataset_root(data_cfg, cache)
    if str(data_cfg.reader.get("_target_", "")).endswith("read_activitynet_split"):
        annotated = read_activitynet_events(root / ACTIVITYNET_SPLIT_FILES[split])
        return [activitynet_item(p.video_id, p.video_path, *annotated[p.video_id]) for p in pairs]
    if (root / EVENTS_FILE).is_file():
        events = json.loads((root / EVENTS_FILE).read_text())
        return [synth_item(p.video_id, p.video_path, described_caption(events[p.video_id], p.caption)) for p in pairs]
    raise ValueError(f"data={data_cfg.name} has no per-event annotations, which the VideoComp probe and CompLoss "
                     f"need; use data=synth_comp (the embedded multi-event benchmark) or data=activitynet")


def described_caption(described: list[dict], caption: str) -> dict:
    """The events of the video's caption ``caption`` (its first caption's when none joins to it)."""
    return next((d for d in described if join_events([e["text"] for e in d["events"]], d["prefix"]) == caption),
                described[0])


def synth_item(video_id: str, video_path: str, described: dict) -> CompItem:
    events = tuple(Event(e["text"], e["start"], e["end"], e["action"], tuple(e["alternatives"]))
                   for e in described["events"])
    return CompItem(video_id, video_path, events[-1].end, events, described["prefix"])


def activitynet_item(video_id: str, video_path: str, duration: float,
                     annotated: list[tuple[float, float, str]]) -> CompItem:
    events = []
    for start, end, sentence in sorted(annotated, key=lambda e: (e[0], e[1])):
        if not sentence:
            continue
        action, alternatives = key_action(sentence)
        events.append(Event(sentence, max(0.0, start), min(duration, end), action, alternatives))
    return CompItem(video_id, video_path, duration, tuple(events))


def key_action(sentence: str) -> tuple[str, tuple[str, ...]]:
    """The sentence's first main verb with WordNet alternatives, or ("", ()) when it has none."""
    from tta.shifts.text.pos import AUX_BE, AUX_HAVE_DO, pos_tag
    from tta.shifts.text.wordnet import wordnet

    words = re.findall(r"[A-Za-z]+", sentence)
    for word, tag in zip(words, pos_tag(words), strict=True):
        if tag != "VERB" or word.lower() in AUX_BE | AUX_HAVE_DO:
            continue
        if wordnet().morphy(word.lower(), "v") in LIGHT_VERBS:  # "is seen standing": the action is "standing"
            continue
        alternatives = verb_alternatives(word)
        if alternatives:
            return word, alternatives
    return "", ()


def verb_alternatives(word: str) -> tuple[str, ...]:
    """Verbs of the lexicographer file of ``word``'s most frequent verb sense, excluding its own synonyms,
    inflected like ``word`` (-ing, -ed, -s or the base form)."""
    from tta.shifts.text.wordnet import wordnet

    wn = wordnet()
    lemma = wn.morphy(word.lower(), "v")
    synsets = wn.synsets(lemma, "v") if lemma else []
    if not synsets:
        return ()
    own = {name for s in synsets for name in s.lemma_names()}
    return tuple(inflect(v, word) for v in frequent_verbs(synsets[0].lexname()) if v not in own)[:MAX_ALTERNATIVES]


def frequent_verbs(lexname: str) -> tuple[str, ...]:
    """One-word verbs of a lexicographer file, most frequent first (SemCor counts of their lemmas)."""
    return _verbs_by_lexname().get(lexname, ())


@lru_cache(maxsize=1)
def _verbs_by_lexname() -> dict[str, tuple[str, ...]]:
    from tta.shifts.text.wordnet import wordnet

    counts: dict[str, dict[str, int]] = {}
    for synset in wordnet().all_synsets("v"):
        table = counts.setdefault(synset.lexname(), {})
        for lemma in synset.lemmas():
            if lemma.name().isalpha():
                table[lemma.name()] = table.get(lemma.name(), 0) + lemma.count()
    return {lex: tuple(sorted(t, key=lambda v: (-t[v], v))[: 4 * MAX_ALTERNATIVES]) for lex, t in counts.items()}


def inflect(verb: str, like: str) -> str:
    """``verb`` in the form of ``like`` by regular English suffix rules (an approximation for irregular verbs)."""
    low = like.lower()
    stem = verb[:-1] if verb.endswith("e") and not verb.endswith("ee") else verb
    if re.fullmatch(r"[^aeiou]*[aeiou][^aeiouwxy]", verb):  # one syllable ending consonant-vowel-consonant
        stem = verb + verb[-1]  # put -> putting, sit -> sitting
    if low.endswith("ing"):
        return stem + "ing"
    if low.endswith("ed"):
        return stem + "ed"
    if low.endswith("s") and not low.endswith("ss"):
        return verb + ("es" if verb.endswith(("s", "sh", "ch", "x", "z", "o")) else "s")
    return verb
