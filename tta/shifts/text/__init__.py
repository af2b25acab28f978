"""Text shifts (docs/shifts/text.md; Qiu et al. 2024; Schiappa et al. 2022). Importing registers them.

Public interface: :func:`tta.shifts.perturb_text` and :func:`tta.shifts.text_shift_names`; here also
:func:`perturb_text_detailed` (the semantic filter's record per caption), :func:`requires_model` (the
sentence-level originals that need a local model path) and :data:`HATVTR_TEXT_SHIFTS`.
"""

import importlib
import pkgutil

# every module of this package registers its shifts on import: a new shift is one module plus one config
for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")

from tta.shifts.registry import perturb_text_detailed, requires_model  # noqa: E402
from tta.shifts.text.core import TextOutcome  # noqa: E402

# The 15 t2v query shifts of HAT-VTR (App. B.4, Table 10) with their default severities (character 7, word 2,
# sentence 1). The sentence-level ones run as their rule-based approximations unless a model path is given.
HATVTR_TEXT_SHIFTS = {
    "ocr": 7, "char_insert": 7, "char_replace": 7, "char_swap": 7, "char_delete": 7,
    "synonym_replace": 2, "word_insert": 2, "word_swap": 2, "word_delete": 2, "insert_punctuation": 2,
    "back_translation": 1, "formal": 1, "casual": 1, "passive": 1, "active": 1,
}
APPROXIMATION = {name: f"{name}_approx" for name in ("back_translation", "formal", "casual", "passive", "active")}

__all__ = ["TextOutcome", "perturb_text_detailed", "requires_model", "HATVTR_TEXT_SHIFTS", "APPROXIMATION"]
