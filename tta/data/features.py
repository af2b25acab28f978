"""Precomputed query and gallery features (``data=features``), written by ``python -m tta.export``.

A features file holds what the similarity head and the scoring need (the queries of every stream segment, the
gallery, the head's weights, the layout's relevance and the exporting run's config and screening report;
docs/features.md has the table), so that gradient-free methods (``source``, ``hsm``, ``qbnorm``, ``dsl``, any
``posthoc=`` refiner) run on a CPU over features encoded once on a GPU. Two containers, the same content: a ``.pt``
file (one ``torch.save`` dict) or a directory of ``.npy`` arrays plus ``features.json``, readable without torch.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import lightning as L
import numpy as np
import torch
from omegaconf import DictConfig
from torch.utils.data import DataLoader, Dataset

from tta.data.layout import EvalLayout
from tta.data.readers.msrvtt import VideoTextPair
from tta.data.screen import InputReport
from tta.data.segments import SegmentBatchSampler, SegmentCollate, SegmentedStream
from tta.data.stream import Collate
from tta.models.retrieval import FeatureModel

FORMAT = "tta-features/1"
META_FILE = "features.json"
#: the keys of the exporting run a features run takes over (what the features were computed from)
EXPORTED_KEYS = ("model", "data", "task", "scenario", "shift", "shift_seed", "inputs")


@dataclass
class FeatureSet:
    """The content of a features file (module docstring)."""

    queries: torch.Tensor
    gallery: torch.Tensor
    head: dict[str, torch.Tensor]
    layout: EvalLayout
    report: InputReport
    meta: dict

    def arrays(self) -> dict[str, torch.Tensor]:
        out = {"queries": self.queries, "gallery": self.gallery, "gt": self.layout.gt}
        if self.layout.gallery_class is not None:
            out["gallery_class"] = self.layout.gallery_class
        out.update({f"head.{k}": v for k, v in self.head.items()})
        return {k: v.detach().cpu() for k, v in out.items()}

    def meta_record(self) -> dict:
        lay = self.layout
        return {**self.meta, "format": FORMAT, "layout": {
            "queries": [asdict(p) for p in lay.queries], "gallery": [asdict(p) for p in lay.gallery],
            "query_rows": list(lay.query_rows), "multi": lay.multi},
            "report": {"skipped": self.report.skipped, "notes": self.report.notes, "kept": self.report.kept}}


def write_features(path: str | Path, features: FeatureSet) -> Path:
    """``path`` ending in ``.pt``: one torch file; any other path: a directory of ``.npy`` arrays + features.json."""
    from tta.utils.io import atomic_torch_save, atomic_write_bytes, atomic_write_json

    path = Path(path)
    if path.suffix == ".pt":
        return atomic_torch_save(path, {"meta": features.meta_record(), **features.arrays()})
    path.mkdir(parents=True, exist_ok=True)
    for name, value in features.arrays().items():
        buffer = _npy_bytes(value)
        atomic_write_bytes(path / f"{name}.npy", buffer)
    atomic_write_json(path / META_FILE, features.meta_record())  # last: a directory with it is complete
    return path


def _npy_bytes(value: torch.Tensor) -> bytes:
    import io

    out = io.BytesIO()
    np.save(out, value.numpy())
    return out.getvalue()


def read_features(path: str | Path) -> FeatureSet:
    """A features file or directory; every problem with it is a ValueError / FileNotFoundError of one line."""
    path = Path(path)
    hint = "write one with python -m tta.export (same options as tta.run) and pass it as data.path=<file or dir>"
    if not path.exists():
        raise FileNotFoundError(f"data.path={path} does not exist; {hint}")
    try:
        meta, arrays = _read_pt(path) if path.is_file() else _read_npy_dir(path)
    except Exception as e:  # noqa: BLE001 - a torn, foreign or hand-edited file: the same user error
        why = f"{type(e).__name__}: {str(e)[:120]}".replace("\n", " ")
        raise ValueError(f"data.path={path} is not a readable features file ({why}); {hint}") from None
    if meta.get("format") != FORMAT:
        raise ValueError(f"data.path={path} is not a tta features file (format {meta.get('format')!r}, expected "
                         f"{FORMAT!r}); {hint}")
    return _assemble(path, meta, arrays)


def _read_pt(path: Path) -> tuple[dict, dict]:
    blob = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(blob, dict) or "meta" not in blob:
        raise ValueError("no 'meta' entry")
    return blob.pop("meta"), blob


def _read_npy_dir(path: Path) -> tuple[dict, dict]:
    meta_file = path / META_FILE
    if not meta_file.is_file():
        raise ValueError(f"{META_FILE} is missing from the directory")
    arrays = {f.stem: torch.from_numpy(np.load(f, allow_pickle=False)) for f in sorted(path.glob("*.npy"))}
    return json.loads(meta_file.read_text()), arrays


def _assemble(path: Path, meta: dict, arrays: dict) -> FeatureSet:
    missing = [k for k in ("queries", "gallery", "gt") if k not in arrays]
    if missing:
        raise ValueError(f"data.path={path} lacks the arrays {missing}; export it again with python -m tta.export")
    lay = meta["layout"]
    layout = EvalLayout([VideoTextPair(**p) for p in lay["queries"]], [VideoTextPair(**p) for p in lay["gallery"]],
                        arrays["gt"].long(), arrays["gallery_class"].long() if "gallery_class" in arrays else None,
                        list(lay["query_rows"]), bool(lay["multi"]))
    queries, gallery = arrays["queries"].float(), arrays["gallery"].float()
    task = meta["config"]["task"]
    want_q, want_g = (4, 2) if task == "v2t" else (3, 3)
    if queries.dim() != want_q or gallery.dim() != want_g or queries.shape[1] != len(layout.queries) \
            or gallery.shape[0] != len(layout.gallery) or queries.shape[-1] != gallery.shape[-1]:
        raise ValueError(f"data.path={path}: {task} features of shapes queries {tuple(queries.shape)}, gallery "
                         f"{tuple(gallery.shape)} do not match its layout ({len(layout.queries)} queries, "
                         f"{len(layout.gallery)} gallery items); export it again with python -m tta.export")
    if not (torch.isfinite(queries).all() and torch.isfinite(gallery).all()):
        raise ValueError(f"data.path={path} holds NaN/inf features; export it again with python -m tta.export")
    report = InputReport(**meta["report"])
    head = {k.removeprefix("head."): v for k, v in arrays.items() if k.startswith("head.")}
    return FeatureSet(queries, gallery, head, layout, report, meta)


def feature_model(features: FeatureSet) -> FeatureModel:
    """The exporting model's similarity head with its weights."""
    model = FeatureModel(features.meta["head"], int(features.gallery.shape[-1]))
    model.pool.load_state_dict(features.head)
    return model.eval()


def exported_config(data_cfg: DictConfig, typed: list[str] | None = None) -> dict:
    """The exporting run's :data:`EXPORTED_KEYS`, read from the features file at ``data.path``: a ``data=features``
    run takes them over and keeps its other keys (adapter, posthoc, seed, batch_size, hubness, ...).

    ``typed``: the command-line overrides; one that sets an exported key is refused (the file decides it).
    """
    path = str(data_cfg.get("path") or "")
    if not path:
        raise ValueError("data=features needs data.path=<features file or dir> written by python -m tta.export")
    clashing = [o for o in typed or [] if o.split("=")[0].lstrip("+~").split(".")[0] in EXPORTED_KEYS
                and not o.startswith(("data=", "data.path="))]
    if clashing:
        raise ValueError(f"data=features takes {', '.join(EXPORTED_KEYS)} from the features file; drop "
                         f"{' '.join(clashing)} (export features for that setting with python -m tta.export)")
    exported = read_meta(Path(path))["config"]
    return {key: exported.get(key) for key in EXPORTED_KEYS}


def read_meta(path: Path) -> dict:
    """Only the meta record of a features file (the config a features run takes over)."""
    return read_features(path).meta


def check_feature_adapter(adapter_cfg: DictConfig, comp_probe: bool = False) -> None:
    """Refuse, before anything is built, an adapter that needs the encoders (any gradient-based method) or the
    VideoComp probe (``comp_probe.enabled``), which encodes raw inputs."""
    from tta.utils.config import import_target

    cls = import_target(adapter_cfg.method._target_)
    hooks = cls.needs_encoders()
    if hooks:
        raise ValueError(f"adapter={adapter_cfg.name} needs the model's encoders ({', '.join(hooks)}), which "
                         "data=features does not hold; run it with the dataset (data=<name>), or choose a "
                         "gradient-free method: adapter=source|hsm|qbnorm|dsl, posthoc=qbnorm|dsl")
    if comp_probe:
        raise ValueError("comp_probe.enabled=true encodes the probe's videos and captions, which data=features cannot; "
                         "run the probe with the dataset (data=<name>) or set comp_probe.enabled=false")


class FeatureItems(Dataset):
    """The precomputed query features of one stream segment, as stream items."""

    def __init__(self, feats: torch.Tensor):
        self.feats = feats

    def __len__(self) -> int:
        return len(self.feats)

    def __getitem__(self, i: int) -> dict:
        return {"index": i, "feats": self.feats[i]}


class FeatureDataModule(L.LightningDataModule):
    """The data stages of a ``data=features`` run: the exported layout, gallery and query stream (the same
    attributes as :class:`tta.data.module.RetrievalDataModule`), and the head as :attr:`model`.

    Args:
        path: the features file or directory (``data.features``).
        task: the exporting run's direction.
        batch_size: queries per stream batch.
        shifts: the shifts of the stream, in order.
        start_batch: batches already scored by an interrupted run.
    """

    def __init__(self, path: str | Path, task: str, batch_size: int, shifts: list, start_batch: int = 0):
        super().__init__()
        self.task, self.batch_size, self.shifts, self.start_batch = task, batch_size, shifts, start_batch
        self.features = read_features(path)
        if len(self.features.queries) != len(shifts):
            raise ValueError(f"data.path={path} holds {len(self.features.queries)} stream segment(s) "
                             f"but its config names {len(shifts)} shift(s); export it again with python -m tta.export")
        self.model = feature_model(self.features)
        self.layout, self.report, self.gallery = self.features.layout, self.features.report, self.features.gallery
        self.num_read = int(self.features.meta["num_read"])
        self.copy = None
        self.query_filter: dict | None = None  # applied, if at all, when the features were exported

    def clean_reference(self) -> None:
        """No consistency record: the file holds the stream's features, not the clean queries' answers."""
        return None

    def input_change(self, video_queries: dict | None) -> dict:
        """No input-change record: the raw inputs stayed with the exporting run."""
        return {}

    @property
    def video_pairs(self) -> list:
        return self.layout.queries if self.task == "v2t" else self.layout.gallery

    def setup(self, stage: str | None = None) -> None:
        """Everything was read in ``__init__``."""

    def test_dataloader(self) -> DataLoader:
        stream = SegmentedStream([FeatureItems(q) for q in self.features.queries])
        return DataLoader(stream, batch_sampler=SegmentBatchSampler(stream.lengths, self.batch_size, self.start_batch),
                          collate_fn=SegmentCollate(Collate()))

    def num_batches(self) -> int:
        n = len(self.layout.queries)
        return max(0, len(self.shifts) * -(-n // self.batch_size) - self.start_batch)

    def source_split(self, train_data: DictConfig):
        def refuse(n: int):
            raise ValueError("this method asks for clean training-split pairs (a train_split bank), which data=features does not "
                             "hold; use the stream bank (e.g. posthoc.bank=stream) or run with the dataset")
        return refuse
