"""Dataset annotation readers (HAT-VTR App. B.1; docs/methods/protocol.md, "Datasets"), one module per official format.

MSR-VTT 1k-A: :mod:`~tta.data.readers.msrvtt`; ActivityNet Captions val1: :mod:`~tta.data.readers.activitynet`;
LSMDC public test: :mod:`~tta.data.readers.lsmdc`; MSVD test: :mod:`~tta.data.readers.msvd`; DiDeMo test:
:mod:`~tta.data.readers.didemo`. Shared helpers: :mod:`~tta.data.readers.common`.
"""

from tta.data.readers.activitynet import read_activitynet_json, read_activitynet_split
from tta.data.readers.didemo import read_didemo_json, read_didemo_split
from tta.data.readers.lsmdc import XPOOL_EXCLUDED_CLIPS, lsmdc_movie, read_lsmdc_csv, read_lsmdc_split
from tta.data.readers.msrvtt import (
    JSFUSION_COLUMNS,
    VIDEO_EXTENSIONS,
    VideoTextPair,
    read_jsfusion_test_csv,
    read_msrvtt_data_json,
    read_msrvtt_split,
    read_msrvtt_train_csv,
    resolve_video_path,
    validate_pairs,
    write_jsfusion_test_csv,
    write_msrvtt_data_json,
    write_msrvtt_train_csv,
)
from tta.data.readers.msvd import read_msvd_captions, read_msvd_split

__all__ = [
    "JSFUSION_COLUMNS",
    "VIDEO_EXTENSIONS",
    "XPOOL_EXCLUDED_CLIPS",
    "VideoTextPair",
    "lsmdc_movie",
    "read_activitynet_json",
    "read_activitynet_split",
    "read_didemo_json",
    "read_didemo_split",
    "read_jsfusion_test_csv",
    "read_lsmdc_csv",
    "read_lsmdc_split",
    "read_msrvtt_data_json",
    "read_msrvtt_split",
    "read_msrvtt_train_csv",
    "read_msvd_captions",
    "read_msvd_split",
    "resolve_video_path",
    "validate_pairs",
    "write_jsfusion_test_csv",
    "write_msrvtt_data_json",
    "write_msrvtt_train_csv",
]
