"""Vocabulary of the embedded benchmark: visual attributes and the words that name them.

Every attribute has a canonical name (used in metadata and object labels) and a list of synonyms; the caption
grammar (:mod:`tta.synth.scene`) picks one synonym per mention, so the same visual content is described with
different words across captions. Word-level text shifts (synonym replacement, word insertion, ...) therefore act
on captions that already vary lexically, as real MSR-VTT captions do.
"""

from __future__ import annotations

# name -> (RGB in [0, 255], synonyms used in captions)
COLOURS: dict[str, tuple[tuple[int, int, int], tuple[str, ...]]] = {
    "red": ((220, 30, 30), ("red", "crimson", "scarlet")),
    "green": ((30, 190, 50), ("green", "emerald")),
    "blue": ((35, 70, 230), ("blue", "azure")),
    "yellow": ((245, 220, 30), ("yellow", "golden")),
    "purple": ((150, 40, 190), ("purple", "violet")),
    "orange": ((250, 140, 20), ("orange", "amber")),
    "white": ((245, 245, 245), ("white", "ivory")),
    "pink": ((250, 120, 190), ("pink", "rosy")),
    "cyan": ((30, 220, 220), ("cyan", "turquoise")),
}

SHAPES: dict[str, tuple[str, ...]] = {
    "circle": ("circle", "ball", "disc"),
    "square": ("square", "box", "block"),
    "triangle": ("triangle", "wedge"),
    "star": ("star",),
    "cross": ("cross", "plus sign"),
    "ring": ("ring", "hoop"),
    "diamond": ("diamond", "rhombus"),
    "bar": ("bar", "stick", "rod"),
}

# name -> (radius in pixels at the 96-pixel-high native frame, synonyms)
SIZES: dict[str, tuple[int, tuple[str, ...]]] = {
    "small": (9, ("small", "tiny", "little")),
    "medium": (13, ("medium", "mid-sized", "medium-sized")),
    "large": (18, ("large", "big", "huge")),
}

# motion name -> phrases (third person singular, present tense)
MOTIONS: dict[str, tuple[str, ...]] = {
    "left": ("moves to the left", "slides left", "drifts leftward", "travels to the left"),
    "right": ("moves to the right", "slides right", "drifts rightward", "travels to the right"),
    "up": ("moves upward", "rises", "floats up", "climbs up"),
    "down": ("moves downward", "falls", "sinks down", "drops down"),
    "circle": ("moves in a circle", "goes around in circles", "circles around", "orbits"),
    "bounce": ("bounces", "bounces up and down", "hops around"),
    "still": ("stays still", "sits motionless", "remains in place", "does not move"),
    "zigzag": ("zigzags across", "moves in a zigzag", "weaves from side to side"),
    "diagonal": ("moves diagonally", "crosses diagonally", "glides along the diagonal"),
}

# event name -> phrases; "{colour}" is filled with the new colour, for colour changes
EVENTS: dict[str, tuple[str, ...]] = {
    "appear": ("appears halfway through", "pops into view", "shows up midway", "suddenly appears"),
    "disappear": ("disappears", "vanishes", "fades out of view", "goes out of sight"),
    "recolour": ("turns {colour}", "becomes {colour}", "changes colour to {colour}", "switches to {colour}"),
    "reverse": ("turns back", "reverses direction", "changes direction", "heads back the other way"),
    "grow": ("grows bigger", "expands", "gets larger", "swells up"),
    "shrink": ("shrinks", "gets smaller", "contracts", "becomes smaller"),
    "stop": ("stops", "comes to a halt", "freezes in place", "stops moving"),
}

# events that need a moving object / that only make sense for some motions
MOVING_ONLY_EVENTS = ("reverse", "stop")
LINEAR_MOTIONS = ("left", "right", "up", "down", "diagonal", "zigzag")

# backgrounds of the two renderer styles: name -> (palette anchor colours, synonyms/phrases)
BACKGROUNDS_A: dict[str, tuple[tuple[tuple[int, int, int], ...], tuple[str, ...]]] = {
    "grass": (((40, 100, 30), (90, 150, 50), (20, 70, 20)), ("on grass", "on a grassy field", "over a lawn")),
    "sand": (((200, 180, 130), (170, 150, 100), (225, 205, 160)), ("on sand", "on a sandy beach", "over the sand")),
    "sky": (((120, 170, 230), (230, 235, 245), (90, 140, 210)), ("against a cloudy sky", "in the sky", "under clouds")),
    "water": (((20, 60, 120), (40, 110, 160), (10, 40, 90)), ("over water", "on the sea", "above the waves")),
    "wood": (((110, 70, 35), (150, 100, 55), (80, 50, 25)), ("on a wooden floor", "on wood", "on a wooden table")),
    "stone": (((110, 110, 110), (150, 150, 145), (80, 80, 85)), ("on stone", "on a rocky surface", "over gravel")),
    "night": (((10, 10, 35), (30, 30, 70), (5, 5, 20)), ("at night", "in the dark", "against a night sky")),
}

BACKGROUNDS_B: dict[str, tuple[tuple[tuple[int, int, int], ...], tuple[str, ...]]] = {
    "checker": (((70, 70, 90), (140, 140, 160)), ("on a checkerboard", "over a chequered pattern")),
    "stripes": (((60, 90, 60), (130, 160, 120)), ("on stripes", "over a striped backdrop")),
    "dots": (((90, 60, 80), (160, 120, 150)), ("on polka dots", "over a dotted backdrop")),
    "gradient": (((30, 40, 80), (160, 120, 60)), ("on a gradient", "over a fading backdrop")),
    "grid": (((40, 40, 40), (110, 110, 110)), ("on a grid", "over a grid of lines")),
}

ARTICLES = ("a", "one")


def colour_rgb(name: str) -> tuple[int, int, int]:
    """RGB triple of a canonical colour name."""
    return COLOURS[name][0]
