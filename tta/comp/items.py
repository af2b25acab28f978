"""The probe's videos and their ordered events, read from a dataset that annotates them.

* the embedded ``synth_comp`` benchmark: ``events.json`` written by the renderer (exact time spans, the motion
  phrase of every event and the phrases of motions the clip never shows);
* ActivityNet Captions: the annotation file's timestamps and sentences, filtered as the paper's Sec. 3.1.1 does
  (:func:`paragraph_events`: a caption that covers more than two other events is a summary and is dropped; of two
  captions whose temporal IoU exceeds ``IOU_THRESHOLD`` the longer is kept), events sorted by start time; the key
  action of a sentence is its first main verb and its alternatives are WordNet verbs of the same lexicographer
  file (e.g. ``verb.motion``), inflected like the original with lemminflect and kept only when the replacement is
  grammatical (:func:`grammatical_alternative`). The paper rewrites the action with a language model; this is the
  documented approximation (docs/methods/videocomp.md).
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
# Sec. 3.1.1 names no values: a caption covers an event when it holds this share of the event's span, and two
# captions whose temporal IoU exceeds the threshold describe the same event (the longer one is kept)
COVER_SHARE = 0.9
IOU_THRESHOLD = 0.5
# WordNet's generic verb frames (nltk frame ids): 1-2 intransitive ("Somebody ----s"), 8-11 transitive
INTRANSITIVE_FRAMES = frozenset({1, 2})
TRANSITIVE_FRAMES = frozenset({8, 9, 10, 11})
# a word after the verb that opens its object (then the replacement must take an object too)
OBJECT_OPENERS = frozenset({"a", "an", "the", "his", "her", "their", "its", "my", "your", "some", "it", "him",
                            "them", "this", "that", "these", "those", "another", "one", "two", "several"})


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
    for start, end, sentence in paragraph_events(annotated, duration):
        action, alternatives = key_action(sentence)
        events.append(Event(sentence, start, end, action, alternatives))
    return CompItem(video_id, video_path, duration, tuple(events))


def paragraph_events(annotated: list[tuple[float, float, str]], duration: float) -> list[tuple[float, float, str]]:
    """The captions of a positive paragraph (Sec. 3.1.1), sorted by start: spans clipped to the video; a caption
    that covers more than two other captions' events (a summary, e.g. 0-90 s over a 90 s video) is dropped; of
    two captions with temporal IoU above ``IOU_THRESHOLD`` only the longer stays."""
    spans = [(max(0.0, a), min(duration, b), s) for a, b, s in annotated if s]
    spans = [e for i, e in enumerate(spans) if sum(covers(e, o) for j, o in enumerate(spans) if j != i) <= 2]
    kept: list[tuple[float, float, str]] = []
    for e in sorted(spans, key=lambda e: (-(e[1] - e[0]), e[0])):  # longest first: it wins every IoU clash
        if all(iou(e, k) <= IOU_THRESHOLD for k in kept):
            kept.append(e)
    return sorted(kept, key=lambda e: (e[0], e[1]))


def covers(outer: tuple[float, float, str], inner: tuple[float, float, str]) -> bool:
    """Whether ``outer``'s span holds at least ``COVER_SHARE`` of ``inner``'s."""
    overlap = min(outer[1], inner[1]) - max(outer[0], inner[0])
    return overlap >= COVER_SHARE * max(inner[1] - inner[0], 1e-9)


def iou(a: tuple[float, float, str], b: tuple[float, float, str]) -> float:
    """Temporal intersection over union of two spans."""
    inter = max(0.0, min(a[1], b[1]) - max(a[0], b[0]))
    union = max(a[1], b[1]) - min(a[0], b[0])
    return inter / union if union > 0 else 0.0


def key_action(sentence: str) -> tuple[str, tuple[str, ...]]:
    """The sentence's first main verb with grammatical WordNet alternatives, or ("", ()) when it has none."""
    from tta.shifts.text.pos import AUX_BE, AUX_HAVE_DO, pos_tag
    from tta.shifts.text.wordnet import wordnet

    words = re.findall(r"[A-Za-z]+", sentence)
    for k, (word, tag) in enumerate(zip(words, pos_tag(words), strict=True)):
        if tag != "VERB" or word.lower() in AUX_BE | AUX_HAVE_DO:
            continue
        if wordnet().morphy(word.lower(), "v") in LIGHT_VERBS:  # "is seen standing": the action is "standing"
            continue
        alternatives = verb_alternatives(word, words[k + 1] if k + 1 < len(words) else "")
        if alternatives:
            return word, alternatives
    return "", ()


def verb_alternatives(word: str, next_word: str = "") -> tuple[str, ...]:
    """Verbs of the lexicographer file of ``word``'s most frequent verb sense, excluding its own synonyms, in
    ``word``'s inflection; a candidate that fails :func:`grammatical_alternative` is dropped (counted in
    :data:`ALTERNATIVE_COUNTS`)."""
    from tta.shifts.text.wordnet import wordnet

    wn = wordnet()
    lemma = wn.morphy(word.lower(), "v")
    synsets = wn.synsets(lemma, "v") if lemma else []
    if not synsets:
        return ()
    own = {name for s in synsets for name in s.lemma_names()}
    out = []
    for verb in frequent_verbs(synsets[0].lexname()):
        if verb in own:
            continue
        form = grammatical_alternative(word, verb, next_word, synsets[0].lexname())
        ALTERNATIVE_COUNTS["candidates"] += 1
        if form is None:
            ALTERNATIVE_COUNTS["dropped"] += 1
            continue
        out.append(form)
        if len(out) == MAX_ALTERNATIVES:
            break
    return tuple(out)


#: candidates considered and dropped as ungrammatical by :func:`verb_alternatives` in this process (the share
#: dropped is reported by the probe: results.json ``comp.action_candidates``)
ALTERNATIVE_COUNTS = {"candidates": 0, "dropped": 0}


def penn_tag(word: str) -> str | None:
    """The verb form of ``word`` as a Penn tag (VBG, VBD, VBN, VBZ, VBP), preferring the tag of the form's
    commonest reading; None when lemminflect does not know it as a verb form."""
    from lemminflect import getAllLemmas, getInflection

    low = word.lower()
    for lemma in getAllLemmas(low, upos="VERB").get("VERB", ()):
        for tag in ("VBG", "VBZ", "VBD", "VBN", "VBP"):
            if low in getInflection(lemma, tag=tag):
                return tag
    return None


def verb_frames(lemma: str, lexname: str | None = None) -> set[int]:
    """WordNet frame ids of ``lemma``'s verb senses (those of lexicographer file ``lexname`` when given: the
    sense the replacement is drawn for, so "place" as in "come in second" does not license "is seen placing")."""
    from tta.shifts.text.wordnet import wordnet

    return {f for s in wordnet().synsets(lemma, "v") if lexname is None or s.lexname() == lexname
            for lem in s.lemmas() if lem.name() == lemma for f in lem.frame_ids()}


def grammatical_alternative(word: str, verb: str, next_word: str = "", lexname: str | None = None) -> str | None:
    """``verb`` inflected as ``word`` (same Penn tag, so it agrees with the same subject), or None when that is
    not grammatical: an unknown form or lemma (no "carrys"), or a verb that cannot be used as ``word`` is (it must
    take an object when ``next_word`` opens one, and go without one otherwise: "is seen standing" never becomes
    "is seen putting")."""
    from lemminflect import getAllInflections, getInflection

    tag = penn_tag(word)
    if tag is None or not getAllInflections(verb, upos="VERB"):  # dictionary forms only, no rule-made guesses
        return None
    forms = getInflection(verb, tag=tag, inflect_oov=False)
    if not forms:
        return None
    frames = verb_frames(verb, lexname)
    needed = TRANSITIVE_FRAMES if next_word.lower() in OBJECT_OPENERS else INTRANSITIVE_FRAMES
    if not frames & needed:
        return None
    form = forms[0]
    return form[:1].upper() + form[1:] if word[:1].isupper() else form


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
