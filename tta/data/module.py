"""The data stages of a run as a LightningDataModule: pairs -> screening -> layout -> shift resources -> cached
gallery -> query stream.

``setup()`` runs the stages once; afterwards the module holds what scoring needs (``layout``, ``report``,
``num_read``) and ``test_dataloader()`` streams the queries in dataset order, batches of ``batch_size``, one
segment per shift (docs/methods/protocol.md).
"""

from __future__ import annotations

from pathlib import Path

import lightning as L
import torch
from omegaconf import DictConfig
from torch.utils.data import DataLoader

from tta.data.cache import run_frame_cache
from tta.data.gallery import encode_gallery
from tta.data.layout import EvalLayout
from tta.data.registry import load_pairs
from tta.data.screen import BadInputError, InputReport, screen_pairs
from tta.data.segments import SegmentBatchSampler, SegmentCollate, SegmentedStream
from tta.data.settings import DataSettings
from tta.data.stream import Collate, PerturbedCopy, ShiftSpec, TextItems, VideoItems
from tta.media.transforms import clip_transform_batch
from tta.models.encode import transforms_on
from tta.models.retrieval import RetrievalModel
from tta.utils.forking import loader_worker_init


class RetrievalDataModule(L.LightningDataModule):
    """The test split of ``data_cfg`` as a clean gallery and a (shifted) query stream.

    Args:
        data_cfg: the run's ``data`` config.
        settings: what else the stages read from the run's config (:func:`tta.stages.data_settings`).
        shifts: the shifts of the stream, in order (one for the paper's protocol).
        model: the source model (encodes the gallery and the donor pool; tokenises captions).
        cache: the cache root (frames, gallery features, shift resources).
        start_batch: batches already scored by an interrupted run (the stream resumes after them).
        gallery_shift: the gallery's shift (:attr:`tta.scenario.Scenario.gallery_shift`); None = the single shift
            when it is of the gallery's modality, else none.
    """

    def __init__(self, data_cfg: DictConfig, settings: DataSettings, shifts: list[ShiftSpec], model: RetrievalModel,
                 cache: Path, start_batch: int = 0, gallery_shift: ShiftSpec | None = None):
        super().__init__()
        self.data_cfg, self.settings = data_cfg, settings
        self.shifts, self.model, self.cache, self.start_batch = shifts, model, cache, start_batch
        self.gallery_shift = gallery_shift if gallery_shift is not None else (shifts[0] if len(shifts) == 1
                                                                              else ShiftSpec())
        self.query_filter: dict | None = None  # the D_q filter's record (tta/data/shift_effect.py)
        self.query_side = "video" if settings.task == "v2t" else "text"
        self.frames = run_frame_cache(cache, data_cfg.num_frames, settings.inputs.max_side)
        self.layout: EvalLayout | None = None
        self.report: InputReport | None = None
        self.gallery: torch.Tensor | None = None
        self.copy: PerturbedCopy | None = None
        self.num_read = 0

    @property
    def single(self) -> bool:
        return len(self.shifts) == 1

    @property
    def video_pairs(self) -> list:
        """Each test video once: the queries of v2t, the gallery of t2v."""
        return self.layout.queries if self.query_side == "video" else self.layout.gallery

    def setup(self, stage: str | None = None) -> None:
        if self.layout is not None:
            return
        self.layout = self._screened_layout()
        shift = self.shifts[0]
        if self.single and self.settings.from_copy:
            self.copy = PerturbedCopy(self.settings.from_copy, shift, self.frames.max_side)
        self._build_shift_resources()
        self.gallery = encode_gallery(self.model, self.layout.gallery, self.settings.task, self.settings.gallery,
                                      self.gallery_shift, self.frames, self.cache, self.copy)

    def _screened_layout(self) -> EvalLayout:
        """Read the evaluated split's pairs (``data.split``: test, or val for development runs), keep the first
        ``data.subset``, screen bad inputs (counted) and lay them out."""
        data, inputs = self.data_cfg, self.settings.inputs
        split = eval_split(data)
        pairs = load_pairs(data, split, self.cache, drop_missing=False)  # the screen counts missing videos
        if data.subset:
            pairs = pairs[: int(data.subset)]
        if not pairs:
            raise BadInputError(f"the {split} split of data={data.name} is empty; check its annotation files")
        self.num_read = len(pairs)
        duplicates = inputs.duplicates
        if data.get("all_captions") and duplicates == "error":  # every caption of each video: multi-caption
            duplicates = "multi"
        pairs, self.report = screen_pairs(pairs, self.frames, self.model.tokenizer, on_bad=inputs.on_bad,
                                          duplicates=duplicates, min_frames=inputs.min_frames,
                                          missing_ok=bool(data.get("drop_missing")))
        pairs = self._filter_by_similarity(pairs)
        layout = EvalLayout.build(pairs, self.settings.task, multi=duplicates == "multi")
        _check_gallery_size(len(layout.gallery), self.settings.hubness_k)
        return layout

    def _filter_by_similarity(self, pairs: list) -> list:
        """The D_q filter (``options.min_similarity``) of the single shift or the gallery shift, counted in the
        report like screened bad inputs (tta/data/shift_effect.py)."""
        from tta.data.shift_effect import min_similarity_filter

        named = [("shift", self.shifts[0])] if self.single else []
        if not any(self.gallery_shift is s for s in self.shifts):
            named.append(("gallery_shift", self.gallery_shift))
        for key, spec in named:
            pairs, record = min_similarity_filter(pairs, self.report, spec, key, self.cache)
            self.query_filter = record or self.query_filter
        return pairs

    def _build_shift_resources(self) -> None:
        """Occlusion boxes, the flow blurs' motion store and the event-insertion donor pool (MLVP), built before any
        adaptation."""
        if self.copy is not None:
            return
        extra = [] if any(self.gallery_shift is s for s in self.shifts) else [self.gallery_shift]
        for s in [*self.shifts, *extra]:
            if s.kind == "video":
                from tta.data.shift_resources import build_resources

                setting = self.settings.gallery.encode_setting(self.settings.workers)
                s.resources.update(build_resources(s, self.model, self.data_cfg, self.video_pairs, self.frames,
                                                   self.cache, setting, self.settings.motion_store))

    def clean_reference(self) -> torch.Tensor | None:
        """(Q, G) clean scores of the source model when the run shifts anything, else None; call it before any
        adaptation (tta/data/shift_effect.py)."""
        from tta.data.shift_effect import clean_reference

        if all(s.name == "clean" for s in self.shifts) and self.gallery_shift.name == "clean":
            return None
        return clean_reference(self.model, self.layout, self.gallery, self.settings.task, self.settings.gallery,
                               self.gallery_shift.name != "clean", self.frames, self.cache)

    def input_change(self, video_queries: dict | None) -> dict:
        """results.json ``input_change`` per shifted side: captions measured here, the video queries by the
        stream (``video_queries``, :class:`tta.data.shift_effect.InputDistances`); a shifted video gallery is not
        measured."""
        from tta.data.shift_effect import text_change

        out = {}
        if self.query_side == "video" and video_queries is not None:
            out["query"] = video_queries
        if self.query_side == "text" and self.single and self.shifts[0].kind == "text":
            out["query"] = text_change(self.layout.queries, self.shifts[0], cache=self.cache)
        if self.gallery_shift.kind == "text":
            out["gallery"] = text_change(self.layout.gallery, self.gallery_shift, cache=self.cache)
        return out

    def query_segments(self) -> list:
        """One query dataset per shift of the stream (a shift of the other modality leaves the queries clean)."""
        queries, side = self.layout.queries, self.query_side
        copy = self.copy if self.shifts[0].kind == side else None
        if side == "video":
            self.frames.warm([p.video_path for p in queries], "decoding query videos", self.settings.workers)
            native = self.transforms_on_device()
            return [VideoItems(queries, self.frames, self.model.image_size, s if s.kind == "video" else ShiftSpec(), copy,
                               native) for s in self.shifts]
        return [TextItems(queries, s if s.kind == "text" else ShiftSpec(), copy) for s in self.shifts]

    def test_dataloader(self) -> DataLoader:
        stream = SegmentedStream(self.query_segments())
        tokenizer = self.model.tokenizer if self.query_side == "text" else None
        # captions stay in-process: rule-based shifts are cheap, and model-based ones load their model once and
        # cache their outcomes for results.json (tta.shifts.registry.implementation_record)
        workers = self.settings.workers if self.query_side == "video" else 0
        return DataLoader(stream, batch_sampler=SegmentBatchSampler(stream.lengths, self.settings.batch_size,
                                                                    self.start_batch),
                          num_workers=workers, collate_fn=SegmentCollate(Collate(tokenizer)),
                          worker_init_fn=loader_worker_init, pin_memory=self.pins_memory())

    def pins_memory(self) -> bool:
        """Query batches in pinned host memory when the stream runs on CUDA: Lightning then copies them to the
        device without blocking (a no-op elsewhere)."""
        return stream_device(self.trainer).type == "cuda"

    def transforms_on_device(self) -> bool:
        """Whether query videos get the CLIP transform on the model's device (``transform_device``: ``model``, or
        ``auto`` on CUDA) instead of in the loader."""
        return transforms_on(str(stream_device(self.trainer)), self.settings.transform_device)

    def on_after_batch_transfer(self, batch, dataloader_idx: int):
        """The CLIP transform of a batch that crossed as native frames, where the batch now is."""
        if isinstance(batch, dict) and "native" in batch:
            batch["video"] = clip_transform_batch(batch.pop("native"), self.model.image_size)
        return batch

    def num_batches(self) -> int:
        """Batches left to stream (after ``start_batch``)."""
        n = len(self.layout.queries)
        return max(0, len(self.shifts) * -(-n // self.settings.batch_size) - self.start_batch)

    def source_split(self, train_data: DictConfig):
        """A factory of clean training-split data for adapters that ask for it (EATA's Fisher, QB-Norm's bank)."""
        def make(n: int):
            from tta.data.source_split import SourceSplit

            return SourceSplit(self.model, load_pairs(train_data, "train", self.cache), n, self.settings.task,
                               self.frames, self.settings.transform_device)
        return make


def stream_device(trainer) -> torch.device:
    """The device a Trainer streams on (the CPU before one is attached)."""
    return getattr(getattr(trainer, "strategy", None), "root_device", None) or torch.device("cpu")


SPLITS = ("test", "val")


def eval_split(data_cfg: DictConfig) -> str:
    """``data.split``: the split a run streams and retrieves from (test; val for development runs)."""
    split = str(data_cfg.get("split") or "test")
    if split not in SPLITS:
        raise BadInputError(f"data.split={split} is not a split a run evaluates on; use data.split=test or "
                            "data.split=val (the development split)")
    return split


def _check_gallery_size(n: int, k: int) -> None:
    """The k-occurrence of hubness@k needs more gallery items than k (the usable pairs after screening)."""
    if n <= k:
        raise BadInputError(f"only {n} usable test pair(s), but hubness.k={k} needs a gallery of more than {k} "
                            f"items; use more data (data.subset) or a smaller hubness.k (at most {max(1, n - 1)})")
