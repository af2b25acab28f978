"""Rule-based APPROXIMATIONS of the sentence-level text shifts (docs/shifts/text.md: sentence level; code vs paper).

The HAT-VTR benchmark's sentence shifts use models that cannot be obtained here: back-translation through German
with the FAIR WMT19 models, and Styleformer's T5 style transfer (casual↔formal, active↔passive). These rules
imitate them on caption-like sentences and are registered under their own ids — ``back_translation_approx``,
``formal_approx``, ``casual_approx``, ``passive_approx``, ``active_approx`` — never under the original names
(those run real local models: :mod:`tta.shifts.text.seq2seq`). None of this is machine translation or neural
style transfer:

- ``back_translation_approx``: progressive → simple present ("is riding" → "rides", with ``lemminflect``), a small
  fixed lexicon of word and phrase paraphrases, determiner changes ("some" → "a few"), sentence case and a final
  period (as a translation system writes). Deterministic, no filter (like the original).
- ``formal_approx``: contractions expanded, an informal→formal lexicon (kid→child, guy→man, tv→television ...),
  "There is …" for verbless or participle-only captions, sentence case and a final period.
- ``casual_approx``: lower case, no final period, a formal→informal lexicon, contractions ("is" → "'s", "are" →
  "'re" after pronouns); ``drop_article=true`` also drops a leading article.
- ``passive_approx``: "NP₁ (is|are)? V-ing|V-s (particle)? NP₂ REST" → "NP₂ (is|are) (being)? V-pp (particle)? by
  NP₁ REST"; participles from ``lemminflect``.
- ``active_approx``: the inverse of "NP₂ (is|are|was|were|gets) (being)? V-pp by NP₁ REST", and agentless
  passives "NP₂ is|are|was|were|gets (being)? V-pp REST" → "someone V NP₂ REST" (most MSR-VTT passives have no
  agent: "a video game is played" → "someone plays a video game"); the subject may carry prepositional phrases.

Captions that match no rule stay unchanged, as Styleformer output often does; the four style shifts go through the
semantic filter like the originals (docs/shifts/text.md, semantic filter). Noun phrases and verbs come from :mod:`tta.shifts.text.pos`.
"""

from __future__ import annotations

import random
import re

from tta.shifts.text.core import SENTENCE_SEVERITIES, TextOutcome, outcome, text_shift
from tta.shifts.text.pos import is_plural_noun, pos_tag
from tta.shifts.text.similarity import FILTER_BOUNDS, filter_options, semantic_filter

INFORMAL_TO_FORMAL = {
    "kid": "child", "kids": "children", "guy": "man", "guys": "men", "tv": "television", "bike": "bicycle",
    "bikes": "bicycles", "pic": "photograph", "pics": "photographs", "photo": "photograph", "photos": "photographs",
    "mom": "mother", "moms": "mothers", "dad": "father", "dads": "fathers", "cop": "police officer",
    "cops": "police officers", "gonna": "going to", "wanna": "want to", "gotta": "have to", "okay": "acceptable",
    "vid": "video", "vids": "videos", "cool": "impressive", "awesome": "impressive", "stuff": "items",
    "buddy": "friend", "folks": "people", "kinda": "somewhat", "info": "information", "ad": "advertisement",
    "ads": "advertisements", "fridge": "refrigerator", "movie": "film", "movies": "films", "show": "programme",
}
FORMAL_TO_INFORMAL = {
    "child": "kid", "children": "kids", "man": "guy", "men": "guys", "television": "tv", "bicycle": "bike",
    "photograph": "pic", "mother": "mom", "father": "dad", "police officer": "cop", "video": "vid",
    "going to": "gonna", "want to": "wanna", "very": "really", "people": "folks", "film": "movie",
    "information": "info", "advertisement": "ad", "refrigerator": "fridge", "woman": "lady", "women": "ladies",
}
PARAPHRASE = {  # back-translation-like word choices (a fixed list, not a translation model)
    "little": "small", "big": "large", "kid": "child", "kids": "children", "guy": "man", "guys": "men",
    "movie": "film", "talking": "speaking", "talks": "speaks", "talk": "speak", "begins": "starts",
    "tv": "television", "photo": "picture", "someone": "somebody", "some": "a few", "many": "a lot of",
    "each other": "one another", "next to": "beside", "in front of": "before", "near": "close to",
    "a lot of": "many", "clip": "excerpt", "shows": "displays", "video": "video", "game": "game",
}
CONTRACTIONS = [(r"\bcan't\b", "cannot"), (r"\bwon't\b", "will not"), (r"n't\b", " not"), (r"'re\b", " are"),
                (r"'m\b", " am"), (r"'ll\b", " will"), (r"'ve\b", " have"), (r"'d\b", " would"),
                (r"\b(it|that|he|she|there|what|who|here)'s\b", r"\1 is"), (r"\blet's\b", "let us")]
PRONOUN_OBJECT = {"i": "me", "he": "him", "she": "her", "we": "us", "they": "them"}
PRONOUN_SUBJECT = {v: k for k, v in PRONOUN_OBJECT.items()}
PARTICLES = {"up", "down", "out", "off", "away", "back", "over", "on", "in"}
BE = {"is", "are", "was", "were"}


def _inflect(verb: str, tag: str) -> str:
    from lemminflect import getInflection, getLemma

    lemma = (getLemma(verb, upos="VERB") or (verb,))[0]
    return (getInflection(lemma, tag=tag) or (verb,))[0]


def _lexicon(text: str, table: dict[str, str]) -> str:
    for src in sorted(table, key=len, reverse=True):  # phrases before words
        text = re.sub(rf"\b{re.escape(src)}\b", table[src], text)
    return text


def _sentence_case(text: str) -> str:
    text = text.strip()
    text = text[:1].upper() + text[1:]
    return text if text.endswith((".", "!", "?")) else text + "."


def _np_end(tags: list[str], i: int) -> int:
    """End (exclusive) of a noun phrase starting at ``i``; ``i`` when none. NP = PRON | (DET|NUM)? (ADJ|NOUN|NUM)*
    NOUN, optionally coordinated with "and"."""
    if i < len(tags) and tags[i] == "PRON":
        return i + 1
    j = i + (1 if i < len(tags) and tags[i] in ("DET", "NUM") else 0)
    last_noun = -1
    while j < len(tags) and tags[j] in ("ADJ", "NOUN", "NUM", "ADV"):
        if tags[j] == "NOUN" or (tags[j] == "NUM" and last_noun == j - 1 >= 0):  # "grand theft auto 5"
            last_noun = j
        j += 1
    return last_noun + 1 if last_noun >= 0 else i


def _np(words: list[str], tags: list[str], i: int) -> int:
    """Noun phrase with "of NP" complements and "and NP" coordination."""
    end = _np_end(tags, i)
    while end > i and end < len(words) - 1 and words[end] in ("and", "of"):
        more = _np_end(tags, end + 1)
        if more == end + 1:
            break
        end = more
    return end


def _has_finite_verb(words: list[str], tags: list[str]) -> bool:
    return any(t in ("AUX", "MD") or (t == "VERB" and not w.endswith(("ing", "ed", "en")))
               for w, t in zip(words, tags, strict=True))


def _plural(np_words: list[str]) -> bool:
    return "and" in np_words or np_words[-1] in ("they", "we", "you") or is_plural_noun(np_words[-1])


def passive_rewrite(text: str) -> str:
    """Active → passive for "NP₁ (is|are)? V-ing|V-s (particle)? NP₂ REST"; unchanged otherwise."""
    words = text.split()
    tags = pos_tag([w.lower() for w in words])
    s_end = _np(words, tags, 0)
    if s_end == 0:
        return text
    j, aux = s_end, None
    if j < len(words) and words[j] in ("is", "are"):
        aux, j = words[j], j + 1
    if j >= len(words) or tags[j] != "VERB" or words[j] in BE:
        return text
    verb, progressive = words[j], words[j].endswith("ing")
    if aux and not progressive or not aux and not (progressive or words[j].endswith("s")):
        return text
    j += 1
    particle = [words[j]] if j < len(words) and words[j] in PARTICLES and tags[j] == "ADV" else []
    j += len(particle)
    o_end = _np(words, tags, j)
    if o_end == j or (o_end < len(words) and words[o_end] == "and"):  # "playing guitar and singing": no rule
        return text
    subj = [PRONOUN_OBJECT.get(w, w) for w in words[:s_end]]
    obj = [PRONOUN_SUBJECT.get(w, w) for w in words[j:o_end]]
    be = "are" if _plural(obj) else "is"
    head = [be, "being"] if progressive and aux else (["being"] if progressive else [be])
    return " ".join([*obj, *head, _inflect(verb, "VBN"), *particle, "by", *subj, *words[o_end:]])


GET = {"get": "is", "gets": "is", "got": "was", "getting": "being"}  # "gets kicked" = "is kicked"
PREPOSITIONS = {"in", "on", "at", "with", "from", "of", "inside", "near", "under", "behind", "during"}
#: participles read as adjectives after "be" ("is involved in", "is dressed in"): no agentless voice change
ADJECTIVAL = {"involved", "interested", "scared", "excited", "tired", "located", "based", "married", "supposed",
              "used", "born", "done", "gone", "finished", "surprised", "shocked", "bored", "worried", "amazed",
              "pleased", "confused", "frightened", "dressed", "covered", "filled", "made", "seated", "related",
              "called", "named", "known", "set", "stuck", "lost", "determined", "prepared", "equipped"}
AGENTLESS_SUBJECT = "someone"  # Styleformer's usual subject for an agentless passive


def _passive_subject_end(words: list[str], tags: list[str]) -> int:
    """End of the subject NP of a passive, including prepositional phrases before the auxiliary ("a girl in a
    horror movie is haunted")."""
    end = _np(words, tags, 0)
    probe = end
    while end and probe < len(words) and words[probe] in PREPOSITIONS:
        more = _np(words, tags, probe + 1)
        if more == probe + 1:
            break
        probe = more
        if probe < len(words) and (words[probe] in BE or words[probe] in GET or words[probe] == "being"):
            end = probe
    return end


def _is_participle(word: str, tag: str) -> bool:
    if tag not in ("VERB", "ADJ") or not word.isalpha():
        return False
    return _inflect(word, "VBN") == word and (tag == "VERB" or word.endswith(("ed", "en", "wn", "ung", "lt")))


def active_rewrite(text: str) -> str:
    """Passive → active; unchanged when no rule matches.

    * agentive: "NP₂ (is|are|was|were|gets|got)? (being)? V-pp (particle)? by NP₁ REST" → "NP₁ V NP₂ REST";
    * agentless (needs an auxiliary or "being"): "NP₂ (is|are|was|were|gets|got|getting)? (being)? V-pp
      (particle)? REST" → "someone V NP₂ REST" ("a video game is played" → "someone plays a video game"), except
      after adjectival participles ("is involved in", "is dressed in"; :data:`ADJECTIVAL`).

    The subject NP may carry prepositional phrases before the auxiliary.
    """
    words = text.split()
    tags = pos_tag([w.lower() for w in words])
    o_end = _passive_subject_end(words, tags)
    if o_end == 0:
        return text
    j, aux, being = o_end, None, False
    if j < len(words) and (words[j] in BE or words[j] in GET):
        aux, j = GET.get(words[j], words[j]), j + 1
        if aux == "being":
            aux, being = None, True
    if j < len(words) and words[j] == "being":
        being, j = True, j + 1
    if j >= len(words) or not _is_participle(words[j], tags[j]):
        return text
    verb, j = words[j], j + 1
    particle = ([words[j]] if j < len(words) and words[j] in PARTICLES - PREPOSITIONS and tags[j] == "ADV"
                and (j + 1 == len(words) or tags[j + 1] != "DET") else [])  # "dressed up", not "filtered in a"
    j += len(particle)
    obj = [PRONOUN_OBJECT.get(w, w) for w in words[:o_end]]
    if j < len(words) and words[j] == "by" and _np(words, tags, j + 1) > j + 1:
        s_end = _np(words, tags, j + 1)
        subj = [PRONOUN_SUBJECT.get(w, w) for w in words[j + 1: s_end]]
    elif (aux or being) and verb.lower() not in ADJECTIVAL:
        subj, s_end = [AGENTLESS_SUBJECT], j
    else:
        return text
    plural = _plural(subj)
    if being or aux is None:
        vg = ([("are" if plural else "is") if aux in (None, "is", "are") else ("were" if plural else "was")]
              if aux else []) + [_inflect(verb, "VBG")]
    elif aux in ("was", "were"):
        vg = [_inflect(verb, "VBD")]
    else:
        vg = [_inflect(verb, "VBP" if plural else "VBZ")]
    return " ".join([*subj, *vg, *particle, *obj, *words[s_end:]])


def progressive_to_simple(text: str) -> str:
    """"NP is|are V-ing" → "NP V-s|V" (back-translation's usual tense change)."""
    words = text.split()
    tags = pos_tag([w.lower() for w in words])
    out, i, form = [], 0, None
    while i < len(words):
        if words[i] in ("is", "are") and i + 1 < len(words) and tags[i + 1] == "VERB" and words[i + 1].endswith("ing"):
            form = "VBZ" if words[i] == "is" else "VBP"
            out.append(_inflect(words[i + 1], form))
            i += 2
            continue
        if form and words[i] == "and" and i + 1 < len(words) and tags[i + 1] == "VERB" and words[i + 1].endswith(
                "ing"):  # "is singing and standing" -> "sings and stands"
            out += ["and", _inflect(words[i + 1], form)]
            i += 2
            continue
        form = form if tags[i] in ("ADV", "ADP", "DET", "NOUN", "ADJ", "PRON", "NUM") else None
        out.append(words[i])
        i += 1
    return " ".join(out)


def formal_rewrite(text: str) -> str:
    t = text
    for pat, rep in CONTRACTIONS:
        t = re.sub(pat, rep, t, flags=re.IGNORECASE)
    t = _lexicon(t, INFORMAL_TO_FORMAL)
    words = t.split()
    tags = pos_tag([w.lower() for w in words])
    end = _np(words, tags, 0)
    if end and words[0].lower() not in ("there", "this", "it") and not _has_finite_verb(words, tags):
        article = [] if tags[0] in ("DET", "NUM", "PRON") or _plural(words[:end]) else ["a"]
        t = " ".join(["there", "are" if _plural(words[:end]) else "is", *article, *words])
    return _sentence_case(t)


def casual_rewrite(text: str, drop_article: bool = False) -> str:
    t = text.strip().rstrip(".").lower()
    t = _lexicon(t, FORMAL_TO_INFORMAL)
    t = re.sub(r"\b(he|she|it|that|there|what|who|guy|man|kid|lady|girl|boy|person) is\b", r"\1's", t)
    t = re.sub(r"\b(they|we|you) are\b", r"\1're", t)
    t = re.sub(r"\b(is|are|do|does|did|was|were) not\b", r"\1n't", t).replace("cannot", "can't")
    if drop_article:
        t = re.sub(r"^(a|an|the) ", "", t)
    return t


def back_translation_rewrite(text: str) -> str:
    return _sentence_case(_lexicon(progressive_to_simple(text.strip().rstrip(".")), PARAPHRASE))


@text_shift("back_translation_approx", SENTENCE_SEVERITIES, "sentence", approximates="back_translation",
            note="rule-based paraphrase (progressive -> simple present, a fixed lexicon, sentence case), not "
                 "en->de->en machine translation")
def back_translation_approx(text: str, severity: int, rng: random.Random, model_path=None,
                            reverse_model_path=None) -> TextOutcome:
    """APPROXIMATION of back-translation en→de→en: paraphrase rules, deterministic, no filter (docs/shifts/text.md: sentence level; code vs paper)."""
    _no_model("back_translation", model_path)
    return outcome(text, back_translation_rewrite(text) if text.strip() else text)


def _styled(name: str, rewrite, doc: str, note: str) -> None:
    def fn(text: str, severity: int, rng: random.Random, model_path=None, **options) -> TextOutcome:
        _no_model(name.removesuffix("_approx"), model_path)
        extra = {k: options.pop(k) for k in ("drop_article",) if k in options}
        filt = filter_options(options)
        if options:
            raise TypeError(f"unknown options for {name}: {sorted(options)}")
        if not text.strip():
            return TextOutcome(text, 0, 1.0, False, True)
        return semantic_filter(text, lambda: rewrite(text, **extra), stochastic=False, **filt)

    fn.__name__, fn.__doc__ = name, doc
    text_shift(name, SENTENCE_SEVERITIES, "sentence", approximates=name.removesuffix("_approx"), note=note,
               bounds=FILTER_BOUNDS)(fn)


def _no_model(real: str, model_path) -> None:
    if model_path:
        raise ValueError(f"shift.options.model_path is set but the shift is the rule-based approximation "
                         f"'{real}_approx'; to run the model use shift={real} (set shift.name={real})")


_styled("formal_approx", lambda t: formal_rewrite(t), "APPROXIMATION of Styleformer casual→formal (rules).",
        "rule-based casual->formal rewrite (contractions, lexicon, 'There is ...'), not Styleformer")
_styled("casual_approx", casual_rewrite, "APPROXIMATION of Styleformer formal→casual (rules).",
        "rule-based formal->casual rewrite (lower case, lexicon, contractions), not Styleformer")
_styled("passive_approx", lambda t: passive_rewrite(t), "APPROXIMATION of Styleformer active→passive (rules).",
        "rule-based active->passive voice change of 'NP V NP' clauses, not Styleformer")
_styled("active_approx", lambda t: active_rewrite(t), "APPROXIMATION of Styleformer passive→active (rules).",
        "rule-based passive->active voice change of 'NP be V-pp by NP' clauses, not Styleformer")
