"""Gender word lists for Schiappa et al.'s Bias perturbations (Sec. 3.2 "Bias", Sec. 4 "Bias", Fig. 7).

Each row is (male, female, neutral); an empty neutral form deletes the word ("a female singer" → "a singer").
Pronoun "her" is resolved by context in :mod:`tta.shifts.text.schiappa` (possessive "his"/"their" before a noun
phrase, object "him"/"them" otherwise).
"""

from __future__ import annotations

_ROWS = """
man woman person|men women people|boy girl child|boys girls children|guy gal person|guys gals people
he she they|him her them|his her their|himself herself themselves|male female |males females people
father mother parent|fathers mothers parents|dad mom parent|dads moms parents|daddy mommy parent
son daughter child|sons daughters children|brother sister sibling|brothers sisters siblings
husband wife spouse|husbands wives spouses|boyfriend girlfriend partner|boyfriends girlfriends partners
uncle aunt relative|uncles aunts relatives|nephew niece relative|nephews nieces relatives
grandfather grandmother grandparent|grandfathers grandmothers grandparents|grandpa grandma grandparent
king queen monarch|kings queens monarchs|prince princess royal|princes princesses royals
actor actress actor|actors actresses actors|waiter waitress server|waiters waitresses servers
host hostess host|hosts hostesses hosts|gentleman lady person|gentlemen ladies people|sir madam
mr mrs |chairman chairwoman chairperson|spokesman spokeswoman spokesperson|businessman businesswoman businessperson
businessmen businesswomen businesspeople|policeman policewoman police officer|policemen policewomen police officers
fireman firewoman firefighter|firemen firewomen firefighters|salesman saleswoman salesperson
cameraman camerawoman camera operator|sportsman sportswoman athlete|monk nun monastic|groom bride spouse
hero heroine hero|heroes heroines heroes|god goddess deity|masculine feminine |schoolboy schoolgirl student
"""


def _parse() -> list[tuple[str, str, str]]:
    rows = []
    for cell in _ROWS.replace("\n", "|").split("|"):
        parts = cell.strip().split(" ", 2)
        if len(parts) >= 2:
            rows.append((parts[0], parts[1], parts[2].strip() if len(parts) == 3 else ""))
    return rows


ROWS = _parse()
TO_FEMALE = {m: f for m, f, _ in ROWS}
TO_MALE = {f: m for m, f, _ in ROWS if f != "her"}  # "her" needs context
TO_NEUTRAL = {w: n for m, f, n in ROWS for w in (m, f) if w != "her"}
MALE_WORDS = frozenset(TO_FEMALE)
FEMALE_WORDS = frozenset(f for _, f, _ in ROWS)
# extra words that are already gendered: "lady" also pairs with "man" in captions ("a lady is cooking")
TO_MALE.update({"lady": "man", "ladies": "men"})
