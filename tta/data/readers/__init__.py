"""Dataset annotation readers (``hatvtr.md`` §4). MSR-VTT: :mod:`tta.data.readers.msrvtt`."""

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

__all__ = [
    "JSFUSION_COLUMNS",
    "VIDEO_EXTENSIONS",
    "VideoTextPair",
    "read_jsfusion_test_csv",
    "read_msrvtt_data_json",
    "read_msrvtt_split",
    "read_msrvtt_train_csv",
    "resolve_video_path",
    "validate_pairs",
    "write_jsfusion_test_csv",
    "write_msrvtt_data_json",
    "write_msrvtt_train_csv",
]
