"""The data pipeline of a run: annotation readers, pair screening, the evaluation layout, the frame cache and the
:class:`~tta.data.module.RetrievalDataModule` that turns a dataset into a cached gallery and a query stream."""

from tta.data.readers import (
    VideoTextPair,
    read_jsfusion_test_csv,
    read_msrvtt_data_json,
    read_msrvtt_split,
    read_msrvtt_train_csv,
    validate_pairs,
    write_jsfusion_test_csv,
    write_msrvtt_data_json,
    write_msrvtt_train_csv,
)

__all__ = [
    "VideoTextPair",
    "read_jsfusion_test_csv",
    "read_msrvtt_data_json",
    "read_msrvtt_split",
    "read_msrvtt_train_csv",
    "validate_pairs",
    "write_jsfusion_test_csv",
    "write_msrvtt_data_json",
    "write_msrvtt_train_csv",
]
