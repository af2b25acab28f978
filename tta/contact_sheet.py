"""Contact sheet of the video shifts: one PNG per dataset, a frame of every shift at severities 1, 3, 5.

``python -m tta.contact_sheet data=synth out=docs/shifts/`` writes ``docs/shifts/synth.png``, like the
MLVP paper's Figs. 14-16: one row per registered video shift (:func:`tta.shifts.video_shift_names`, so new shifts
appear without changing this file), a clean column, then one column per severity; each cell is the middle frame of
the same test video. Every cell goes through the same frame path as a run (docs/shifts/mlvp.md: frames): group-A shifts get
the clip's uniform native frames; group-B shifts get every decoded frame of the video and the uniform frame rule
is applied to what they return. Seeds are :func:`tta.shifts.item_seed` of (seed, video id, shift, severity), as in
a run. Every cell gets the context a run gives it (:class:`tta.shifts.video.common.ShiftContext`): the sampled
frame indices, the frame rate, the caption and, when the sheet shows them, the dataset's main-object boxes
(occlusion) and the event-insertion donor pool, built by the run's own code with the fine-tuned backbone
(``model=``). A shift that still cannot run (e.g. real AdaIN without weights) gets a grey ``n/a (...)`` cell
carrying the start of its error message; the log lists them.
"""

from __future__ import annotations

import importlib
import io
import logging
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import hydra
import numpy as np
import torch
from omegaconf import DictConfig

from tta.media.frames import uniform_frame_indices
from tta.media.transforms import pad_frames
from tta.media.video import read_all_frames, read_frames, video_frame_count
from tta.shifts import item_seed, perturb_video, video_shift_names
from tta.shifts.registry import get_shift
from tta.shifts.video.common import ShiftContext
from tta.utils.cli import exit_on_user_error, run_command
from tta.utils.config import CONF_DIR
from tta.utils.io import atomic_write_bytes

log = logging.getLogger(__name__)

LABEL_WIDTH = 230
HEADER_HEIGHT = 28
GAP = 4
MAX_CELL_WIDTH = 256


@dataclass
class ContactSheet:
    """The rendered sheet and what could not be shown."""

    image: object  # PIL.Image.Image
    rows: list[str]
    unavailable: dict[tuple[str, int], str] = field(default_factory=dict)  # (shift, severity) -> reason


def shift_cell(name: str, severity: int, sampled: torch.Tensor, whole: torch.Tensor | None, seed: int,
               num_frames: int, context: ShiftContext | None = None) -> np.ndarray:
    """The middle frame of the clip a run would see under (shift, severity): uint8 (H, W, 3).

    Args:
        name: a registered video shift.
        severity: its severity.
        sampled: uint8 (num_frames, H, W, 3), the clip's uniform native frames (group A input).
        whole: uint8 (N, H, W, 3), every decoded frame (group B input); required for group-B shifts.
        seed: the item seed.
        num_frames: frames per clip (12 in the protocol).
        context: what a run knows about the clip (indices, fps, caption, boxes, donor pool); None = nothing.
    """
    info = get_shift(name)
    extra = {} if context is None else {"context": context}
    if info.group == "B":
        if whole is None:
            raise ValueError(f"{name} is a group-B shift and needs every decoded frame of the video")
        out = perturb_video(whole, name, severity, seed, **extra)
        out = pad_frames(out[uniform_frame_indices(out.shape[0], num_frames)], num_frames)
    else:
        out = perturb_video(sampled, name, severity, seed, **extra)
        if out.shape[0] != num_frames:  # a shift that changes time: the uniform rule on its output
            out = pad_frames(out[uniform_frame_indices(out.shape[0], num_frames)], num_frames)
    return out[out.shape[0] // 2].cpu().numpy()


def _fit(frame: np.ndarray, width: int):
    from PIL import Image

    img = Image.fromarray(frame)
    height = max(1, round(frame.shape[0] * width / frame.shape[1]))
    return img.resize((width, height), Image.BILINEAR)


def render_sheet(video_path: str, video_id: str, names: Sequence[str] | None = None,
                 severities: Sequence[int] = (1, 3, 5), seed: int = 42, num_frames: int = 12,
                 cell_width: int | None = None, title: str = "", caption: str | None = None,
                 resources: dict | None = None) -> ContactSheet:
    """Render the contact sheet of one video.

    Args:
        video_path: the video file.
        video_id: its id (part of each cell's seed).
        names: shifts to show (default: every registered video shift, in registration order).
        severities: one column each, after the clean column.
        seed: base seed of :func:`tta.shifts.item_seed`.
        num_frames: frames per clip.
        cell_width: width of a cell in pixels (height follows the video's aspect ratio); ``None`` = the video's
            own width, at most :data:`MAX_CELL_WIDTH`.
        title: text of the top-left header cell.
        caption: the video's caption (context of event insertion's fallback query).
        resources: run-level resources (``main_objects``, ``donor_pool``; :mod:`tta.data.shift_resources`).

    Returns:
        A :class:`ContactSheet`.
    """
    names = list(video_shift_names() if names is None else names)
    if not names:
        raise ValueError("no video shift is registered; nothing to draw")
    indices, sampled, whole, fps = _read_clip(video_path, num_frames, any(get_shift(n).group == "B" for n in names))
    resources = dict(resources or {})
    boxes = (resources.get("main_objects") or {}).get(video_id.replace("/", "_"))
    cell_width = min(int(sampled.shape[2]), MAX_CELL_WIDTH) if cell_width is None else cell_width
    if cell_width < 32:
        raise ValueError(f"cell_width must be at least 32 pixels, got {cell_width}")
    clean = _fit(sampled[num_frames // 2].numpy(), cell_width)
    cell_h = clean.height
    sheet, draw, fonts = _blank_sheet(title, names, severities, cell_width, cell_h)
    result = ContactSheet(sheet, names)
    for r, name in enumerate(names):
        y = HEADER_HEIGHT + r * (cell_h + GAP)
        info = get_shift(name)
        draw.text((4, y + cell_h // 2 - 16), name, fill="black", font=fonts[0])
        draw.text((4, y + cell_h // 2 + 2), f"group {info.group}, {info.level}", fill="dimgray", font=fonts[1])
        sheet.paste(clean, (LABEL_WIDTH, y))
        for c, severity in enumerate(severities, start=1):
            x = LABEL_WIDTH + c * (cell_width + GAP)
            if severity not in info.severities:
                reason = f"no severity {severity}"
            else:
                ctx = ShiftContext(video_id=video_id, num_frames=num_frames, caption=caption, main_objects=boxes,
                                   resources=resources, fps=fps,
                                   frame_indices=indices if info.group == "A" else None)
                try:
                    frame = shift_cell(name, severity, sampled, whole,
                                       item_seed(seed, video_id, name, severity), num_frames, ctx)
                    sheet.paste(_fit(frame, cell_width).resize((cell_width, cell_h)), (x, y))
                    continue
                except Exception as err:  # noqa: BLE001 - a cell that cannot run is shown, never fatal
                    reason = f"{type(err).__name__}: {err}".splitlines()[0]
            result.unavailable[(name, severity)] = reason
            log.warning("contact sheet: %s severity %d not shown (%s)", name, severity, reason)
            _draw_unavailable(draw, (x, y, cell_width, cell_h), reason, fonts[1])
    return result


def _read_clip(video_path: str, num_frames: int, needs_whole: bool):
    """(uniform frame indices, the sampled uint8 clip, every frame or None, fps or None) of the video."""
    indices = uniform_frame_indices(video_frame_count(video_path), num_frames)
    sampled = pad_frames(read_frames(video_path, indices), num_frames)
    whole, fps = read_all_frames(video_path) if needs_whole else (None, None)
    return indices, sampled, whole, fps


def _blank_sheet(title: str, names: Sequence[str], severities: Sequence[int], cell_width: int, cell_h: int):
    """The white sheet with its header row drawn; returns (image, its drawing context, (font, small font))."""
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.load_default(size=13)
    small = ImageFont.load_default(size=11)
    cols = 1 + len(severities)
    sheet = Image.new("RGB", (LABEL_WIDTH + cols * (cell_width + GAP), HEADER_HEIGHT + len(names) * (cell_h + GAP)),
                      "white")
    draw = ImageDraw.Draw(sheet)
    draw.text((4, 6), title, fill="black", font=font)
    for c, label in enumerate(["clean"] + [f"severity {s}" for s in severities]):
        draw.text((LABEL_WIDTH + c * (cell_width + GAP) + 4, 6), label, fill="black", font=font)
    return sheet, draw, (font, small)


def _draw_unavailable(draw, box: tuple[int, int, int, int], reason: str, font) -> None:
    """A grey cell at ``box`` = (x, y, width, height) saying why the shift could not be shown."""
    x, y, cell_width, cell_h = box
    draw.rectangle((x, y, x + cell_width - 1, y + cell_h - 1), fill=(200, 200, 200))
    lines = textwrap.wrap(f"n/a ({reason})", width=max(8, cell_width // 7))[: max(1, cell_h // 13)]
    draw.multiline_text((x + 4, y + 4), "\n".join(lines), fill="black", font=font)


def write_png(image, path: str | Path) -> Path:
    """Write a PIL image as PNG atomically."""
    buf = io.BytesIO()
    image.save(buf, format="PNG", optimize=True)
    path = atomic_write_bytes(path, buf.getvalue())
    path.chmod(0o644)  # a docs asset, readable like any checked-in file
    return path


def run_contact_sheet(cfg: DictConfig) -> Path:
    """Render ``<cfg.out>/<data.name>.png`` for the ``cfg.video_index``-th pair of split ``cfg.split``."""
    from tta.data.registry import load_pairs
    from tta.utils.paths import cache_root

    for module in cfg.get("plugins") or []:
        importlib.import_module(module)
    pairs = load_pairs(cfg.data, cfg.split, cache_root(cfg.paths.cache_dir))
    if not pairs:
        raise ValueError(f"split {cfg.split!r} of data={cfg.data.name} is empty")
    if not 0 <= cfg.video_index < len(pairs):
        raise ValueError(f"video_index={cfg.video_index} is out of range: split {cfg.split!r} of data={cfg.data.name} "
                         f"has {len(pairs)} pairs")
    pair = pairs[cfg.video_index]
    names = list(cfg.shifts) if cfg.get("shifts") else None
    shown = set(names if names is not None else video_shift_names())
    resources = sheet_resources(cfg, pairs, shown) if cfg.get("resources", True) else {}
    sheet = render_sheet(pair.video_path, pair.video_id, names, tuple(cfg.severities), int(cfg.seed),
                         int(cfg.data.num_frames), None if cfg.cell_width is None else int(cfg.cell_width),
                         title=f"{cfg.data.name}: {pair.video_id}", caption=pair.caption, resources=resources)
    path = write_png(sheet.image, Path(cfg.out) / f"{cfg.data.name}.png")
    log.info("wrote %s (%d shifts x %d severities; %d cells n/a)", path, len(sheet.rows), len(cfg.severities),
             len(sheet.unavailable))
    return path


def sheet_resources(cfg: DictConfig, pairs, shown: set[str]) -> dict:
    """Main-object boxes and the donor pool for the shown shifts that need them, built as a run builds them.

    The donor pool is embedded by the fine-tuned ``model`` of the dataset (built on first use for the embedded
    benchmark, like a run). A failure leaves those cells n/a with its reason instead of stopping the sheet.
    """
    from tta.data.cache import FrameCache
    from tta.data.shift_resources import build_donor_pool, load_main_objects
    from tta.synth.zoo import load_model
    from tta.utils.paths import cache_root

    if not shown & {"main_object_occlusion", "event_insertion"}:
        return {}
    cache = cache_root(cfg.paths.cache_dir)
    resources: dict = {"main_objects": load_main_objects(cfg.data, cache)}
    if "event_insertion" in shown:
        try:
            model = load_model(cfg.model, cfg.model.checkpoint, cfg.data, cache,
                                      recipe=list(cfg.get("embedded_recipe") or []))
            frames = FrameCache(cache / "frames", int(cfg.data.num_frames))
            resources["donor_pool"] = build_donor_pool(model, cfg.data, pairs, frames, cache, int(cfg.seed), {},
                                                       resources["main_objects"])
            resources["donor_query"] = "caption_text"
        except Exception as err:  # noqa: BLE001 - the sheet still shows every other shift
            log.warning("contact sheet: no donor pool for event insertion (%s: %s)", type(err).__name__, err)
    return resources


@hydra.main(config_path=str(CONF_DIR), config_name="contact_sheet", version_base="1.3")
def main(cfg: DictConfig) -> None:
    try:
        run_contact_sheet(cfg)
    except Exception as e:
        exit_on_user_error(e)


if __name__ == "__main__":
    run_command(main)
