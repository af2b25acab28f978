"""British <-> American spelling pairs for the ``uk_us_spelling_approx`` shift (Shirnin et al. Sec. IV-C, "U.K. -> USA").

The pairs are generated from hand-written stem lists by the standard spelling rules and shipped as
``uk_us_spelling.tsv`` (columns ``us``, ``uk``, ``rule``); ``python -m tta.tools.spelling_table`` rewrites it, and a test
checks that the shipped file equals the generated one. Rules (US -> UK), each with the suffixes a stem takes:

* ``our``: -or -> -our (color -> colour, favorite -> favourite, neighborhood -> neighbourhood);
* ``ise``: -ize -> -ise, with -ization -> -isation (organize -> organise); ``yse``: -yze -> -yse (analyze);
* ``re``: -er -> -re, -ered/-ering -> -red/-ring (center -> centre, centered -> centred);
* ``ogue``: -og -> -ogue (catalog -> catalogue, cataloged -> catalogued);
* ``ll``: a final l doubles before -ed/-ing/-er in British spelling (traveled -> travelled, modeling -> modelling);
* ``l``: the reverse, US -ll where British has one l (fulfill -> fulfil, enrollment -> enrolment);
* ``word``: irregular pairs listed one by one (gray -> grey, airplane -> aeroplane, maneuver -> manoeuvre).

:data:`NEVER` lists words the rules would wrongly touch or whose variant depends on meaning (advise, size,
honorary, meter (device) vs metre, tire vs tyre, check vs cheque, program vs programme); generation fails if any
rule produces one of them, and the shift never changes them.
"""

from __future__ import annotations

import csv
from pathlib import Path

from tta.shifts.text.shirnin import SPELLING_TABLE

# US stem (ending in -or) : suffixes ("" = the bare word)
OUR = {
    "color": " s ed ing ful less", "flavor": " s ed ing ful less", "honor": " s ed ing able", "humor": " s ed ing less",
    "labor": " s ed ing er ers", "neighbor": " s ing hood hoods ly", "behavior": " s al", "favor": " s ed ing able ite ites",
    "harbor": " s ed ing", "rumor": " s ed", "vapor": " s", "odor": " s less", "armor": " s ed y", "savor": " s ed ing y",
    "valor": "", "vigor": "", "rigor": " s", "parlor": " s", "splendor": " s", "clamor": " s ed ing", "candor": "",
    "fervor": "", "tumor": " s", "endeavor": " s ed ing", "ardor": "", "demeanor": "", "arbor": " s", "rancor": "",
    "savior": " s",
}
# US verb stem of -ize/-yze : suffixes after "iz"/"yz" ("e" = -ize itself)
IZE = {
    "organ": "e es ed ing ation ations er ers", "real": "e es ed ing ation", "recogn": "e es ed ing",
    "apolog": "e es ed ing", "emphas": "e es ed ing", "critic": "e es ed ing", "summar": "e es ed ing",
    "memor": "e es ed ing", "categor": "e es ed ing", "custom": "e es ed ing", "priorit": "e es ed ing",
    "minim": "e es ed ing", "maxim": "e es ed ing", "optim": "e es ed ing ation", "util": "e es ed ing",
    "visual": "e es ed ing ation", "final": "e es ed ing", "symbol": "e es ed ing", "sympath": "e es ed ing",
    "harmon": "e es ed ing", "hypnot": "e es ed ing", "mesmer": "e es ed ing", "modern": "e es ed ing ation",
    "special": "e es ed ing", "standard": "e es ed ing", "stabil": "e es ed ing", "steril": "e es ed ing",
    "synchron": "e es ed ing", "vapor": "e es ed ing", "character": "e es ed ing", "author": "e es ed ing ation",
    "civil": "ation ations ed", "colon": "e es ed ing", "legal": "e es ed ing", "local": "e es ed", "mobil": "e es ed ing",
    "neutral": "e es ed ing", "normal": "e es ed ing", "penal": "e es ed ing", "personal": "e es ed ing",
    "public": "e es ed ing", "social": "e es ed ing", "tantal": "e es ed ing", "theor": "e es ed ing",
    "energ": "e es ed ing", "fertil": "e es ed ing er ers", "moistur": "e es ed ing er ers", "pasteur": "e ed",
    "patron": "e es ed ing", "scrutin": "e es ed ing", "jeopard": "e es ed ing", "glamor": "e es ed",
    "agon": "e es ed ing", "fantas": "e es ed ing", "familiar": "e es ed ing", "immun": "e es ed ing ation",
    "initial": "e es ed ing", "item": "e es ed", "magnet": "e es ed", "material": "e es ed ing", "motor": "e ed",
    "pressur": "e es ed", "privat": "e es ed ing ation", "rational": "e es ed ing", "revolution": "e es ed ing",
    "sanit": "e es ed ing er", "satir": "e es ed", "stigmat": "e es ed", "subsid": "e es ed ing",
    "terror": "e es ed ing", "vandal": "e es ed ing", "western": "e es ed", "winter": "e ed", "global": "e ation",
    "dramat": "e es ed ing ation", "hospital": "e es ed", "caramel": "e es ed",
}
YZE = {"anal": "e es ed ing er", "paral": "e es ed ing", "catal": "e es ed ing"}
# US stem before -er (UK -re) : suffixes
RE = {
    "cent": " s ed ing", "theat": " s", "kilomet": " s", "centimet": " s", "millimet": " s", "lit": " s",
    "fib": " s", "calib": " s", "sab": " s", "somb": "", "meag": "", "lust": "", "spect": " s", "scept": " s",
    "sepulch": " s", "goit": "", "och": "", "mit": " s", "saltpet": "",
}
# US stem before -og (UK -ogue) : suffixes
# (dialog, monolog, prolog: American usage mostly keeps -ogue, so they are not converted)
OGUE = {"catal": " s ed ing", "anal": " s"}
# US verb ending in a single l (UK doubles it before these suffixes)
LL = {
    "travel": "ed ing er ers", "cancel": "ed ing", "label": "ed ing", "model": "ed ing er ers", "level": "ed ing er",
    "signal": "ed ing", "fuel": "ed ing", "dial": "ed ing", "duel": "ing ist ists", "marvel": "ed ing ous ously",
    "quarrel": "ed ing", "shovel": "ed ing", "snorkel": "ing er ers", "tunnel": "ed ing", "total": "ed ing",
    "counsel": "ed ing or ors", "channel": "ed ing", "funnel": "ed ing", "grovel": "ed ing", "rival": "ed ing",
    "yodel": "ed ing er", "swivel": "ed ing", "chisel": "ed ing", "barrel": "ed ing", "revel": "ed ing er ers",
    "unravel": "ed ing", "equal": "ed ing", "pedal": "ed ing", "panel": "ed ing ist ists", "jewel": "er ers",
    "carol": "ing er ers", "enamel": "ed ing", "gravel": "ed", "initial": "ed ing", "pummel": "ed ing",
    "spiral": "ed ing", "stencil": "ed ing", "towel": "ed ing", "bevel": "ed ing", "libel": "ed ing ous",
    "marshal": "ed ing", "cudgel": "ed", "drivel": "ed ing", "refuel": "ed ing", "remodel": "ed ing",
}
# US word with -ll where British has one l
L = {
    "fulfill": "fulfil", "fulfills": "fulfils", "fulfillment": "fulfilment", "enroll": "enrol", "enrolls": "enrols",
    "enrollment": "enrolment", "enrollments": "enrolments", "installment": "instalment",
    "installments": "instalments", "skillful": "skilful", "skillfully": "skilfully", "willful": "wilful",
    "willfully": "wilfully", "distill": "distil", "distills": "distils", "instill": "instil", "instills": "instils",
}
WORDS = {
    "gray": "grey", "grays": "greys", "grayish": "greyish", "grayscale": "greyscale", "grayer": "greyer",
    "aluminum": "aluminium", "mom": "mum", "moms": "mums", "pajamas": "pyjamas", "plow": "plough", "plows": "ploughs",
    "plowed": "ploughed", "plowing": "ploughing", "mold": "mould", "molds": "moulds", "moldy": "mouldy",
    "molded": "moulded", "molding": "moulding", "smolder": "smoulder", "smoldering": "smouldering", "donut": "doughnut",
    "donuts": "doughnuts", "defense": "defence", "defenses": "defences", "offense": "offence", "offenses": "offences",
    "pretense": "pretence", "jewelry": "jewellery", "woolen": "woollen", "skeptic": "sceptic", "skeptics": "sceptics",
    "skeptical": "sceptical", "artifact": "artefact", "artifacts": "artefacts", "maneuver": "manoeuvre",
    "maneuvers": "manoeuvres", "maneuvered": "manoeuvred", "maneuvering": "manoeuvring", "cozy": "cosy",
    "math": "maths", "airplane": "aeroplane", "airplanes": "aeroplanes", "aging": "ageing", "judgment": "judgement",
    "judgments": "judgements", "acknowledgment": "acknowledgement", "pediatric": "paediatric",
    "pediatrician": "paediatrician", "encyclopedia": "encyclopaedia", "anesthesia": "anaesthesia",
    "anemia": "anaemia", "diarrhea": "diarrhoea", "estrogen": "oestrogen", "fetus": "foetus",
    "hemorrhage": "haemorrhage", "leukemia": "leukaemia", "orthopedic": "orthopaedic", "mustache": "moustache",
    "mustaches": "moustaches", "licorice": "liquorice", "sulfur": "sulphur", "yogurt": "yoghurt", "omelet": "omelette",
    "omelets": "omelettes", "tidbit": "titbit", "tidbits": "titbits", "fiberglass": "fibreglass",
    "behoove": "behove", "mollusk": "mollusc", "mollusks": "molluscs", "pudgy": "podgy", "whiskey": "whisky",
}
#: words no rule may produce: the same in both varieties, or a variant that depends on the meaning
NEVER = frozenset("""advertise advise arise chastise circumcise comprise compromise concise demise despise devise
disguise enterprise excise exercise expertise franchise improvise incise merchandise precise premise promise reprise
revise rise supervise surmise surprise televise treatise wise noise raise praise poise cruise bruise guise paradise
otherwise likewise clockwise size sizes prize prizes seize seized capsize baize maize actor doctor error mirror
horror terror motor tremor stupor pallor languor liquor manor minor major tutor donor author editor sensor razor
mayor tenor glamour honorary humorous laborious vigorous rigorous odorous vaporous glamorous meter meters tire
tires tyre check checks cheque curb kerb program programs programme practice practise license licence story
storey draft draught ax axe dialogue dialog monologue prologue travels models labels""".split())


def _suffixes(spec: str) -> list[str]:
    return spec.split(" ") if spec else [""]


def generate() -> list[tuple[str, str, str]]:
    """(us, uk, rule) for every pair, sorted by the US form; raises if a rule yields a word of :data:`NEVER`."""
    pairs: dict[str, tuple[str, str]] = {}

    def add(us: str, uk: str, rule: str) -> None:
        if us == uk or " " in us:
            return
        bad = {us, uk} & NEVER
        if bad:
            raise ValueError(f"spelling rule {rule!r} produced {sorted(bad)}, which must never be converted")
        if us in pairs and pairs[us][0] != uk:
            raise ValueError(f"{us!r} has two British spellings: {pairs[us][0]!r} and {uk!r}")
        pairs[us] = (uk, rule)

    for stem, spec in OUR.items():
        for s in _suffixes(spec):
            add(stem + s, stem[:-2] + "our" + s, "our")
    for table, us_mid, uk_mid, rule in ((IZE, "iz", "is", "ise"), (YZE, "yz", "ys", "yse")):
        for stem, spec in table.items():
            for s in _suffixes(spec):
                if s:
                    add(stem + us_mid + s, stem + uk_mid + s, rule)
    for stem, spec in RE.items():
        for s in _suffixes(spec):
            add(stem + "er" + s, stem + ("re" + s if s in ("", "s") else "r" + s), "re")
    for stem, spec in OGUE.items():
        for s in _suffixes(spec):
            uk = {"": "ogue", "s": "ogues", "ed": "ogued", "ing": "oguing"}[s]
            add(stem + "og" + s, stem + uk, "ogue")
    for stem, spec in LL.items():
        for s in _suffixes(spec):
            add(stem + s, stem + "l" + s, "ll")
    for us, uk in L.items():
        add(us, uk, "l")
    for us, uk in WORDS.items():
        add(us, uk, "word")
    ukset = {uk for uk, _ in pairs.values()}
    clash = ukset & set(pairs)
    if clash:
        raise ValueError(f"words that are both a US and a UK form: {sorted(clash)}")
    return sorted((us, uk, rule) for us, (uk, rule) in pairs.items())


def write(path: Path = SPELLING_TABLE) -> Path:
    with open(path, "w", newline="") as f:
        out = csv.writer(f, delimiter="\t", lineterminator="\n")
        out.writerow(("us", "uk", "rule"))
        out.writerows(generate())
    return path


if __name__ == "__main__":
    print(write())
