"""How a run's shift is named (tables, figures and the run's own printed title): without pandas, which a run
that only prints its title does not need."""

from __future__ import annotations


def missing(value) -> bool:
    """None, NaN or pandas' NA / NaT (a frame's empty cell), tested without importing pandas."""
    if value is None or type(value).__name__ in ("NAType", "NaTType"):
        return True
    try:
        return bool(value != value)  # NaN of any float type
    except (TypeError, ValueError):
        return False


def shift_label(shift: str, severity) -> str:
    """How a shift is named in tables and figures: "clean" has no severity (a clean run swept together with
    ``shift.severity=5`` is still clean), nor has a shift recorded at severity 0 (streams, mixtures)."""
    if shift == "clean" or not severity or missing(severity):
        return shift
    return f"{shift} s{int(severity)}"


def shifted_side(shift: str, task: str, gallery_shift: str | None = "none") -> str:
    """Which side a run shifted: "query", "gallery", "query and gallery" or "none" (clean), from the shift's
    modality (registry) and the task's query modality (v2t: videos; t2v: texts). A stream shifts its queries."""
    gallery = gallery_shift not in (None, "none") and not missing(gallery_shift)
    if shift == "clean":
        return "gallery" if gallery else "none"
    if shift == "stream":
        side = "query"
    else:
        from tta.shifts.registry import get_shift

        try:
            kind = get_shift(shift).kind
        except KeyError:  # a shift this checkout does not register: say nothing rather than guess
            return "unknown"
        side = "query" if (kind == "video") == (task == "v2t") else "gallery"
    return "query and gallery" if gallery and side == "query" else side


def shift_caption(shift: str, severity, task: str, gallery_shift: str | None = "none") -> str:
    """A run's shift with the side it lands on: "query: gaussian s5", "gallery: gaussian s5" (t2v: the videos are
    the gallery), "query: ocr s7, gallery: gaussian s3", "clean"."""
    side = shifted_side(shift, task, gallery_shift)
    label, gallery = shift_label(shift, severity), str(gallery_shift)
    if side == "none":
        return label
    if side == "query and gallery":
        return f"query: {label}, gallery: {gallery}"
    if side == "gallery" and shift == "clean":
        return f"gallery: {gallery}"
    return label if side == "unknown" else f"{side}: {label}"
