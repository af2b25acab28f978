"""What a run leaves behind (docs/outputs.md), one job per module:

* :mod:`~tta.results.record`: the typed run record (``results.json``) and the per-query outcome;
* :mod:`~tta.results.scoring`: a finished stream's scored rows -> that record;
* :mod:`~tta.results.segments`: retrieval, hubness and collapse of one stream segment;
* :mod:`~tta.results.environment`: provenance (code revision, versions, device) and cost (time, peak memory);
* :mod:`~tta.results.identity`: which config keys name a run, and the complete results a re-run skips;
* :mod:`~tta.results.files`: writing and reading the run directory, atomically.
"""

import importlib

# name -> the module defining it; imported on first use, so that tta.results.identity (read by a sweep's parent
# process and the callbacks) does not load torch and the data stages
_WHERE = {
    "environment": ("code_revision", "cost_record", "device_name", "git_revision", "provenance", "reset_peak_memory",
                    "versions"),
    "files": ("QUERY_RANKS_FILE", "read_query_ranks", "write_query_ranks", "write_run"),
    "identity": ("NOT_IDENTITY", "complete_results", "identity_keys", "same_identity"),
    "record": ("RunResults", "ScoredRows"),
    "scoring": ("StreamContext", "evaluation_record", "score_stream", "shift_record"),
    "segments": ("K_OCCURRENCE_FILE_K", "collapse_check", "hubness_record", "hubness_summary", "neighbour_width",
                 "row_ranks", "segment_metrics", "segment_summary", "top1_collapse"),
}
_MODULE_OF = {name: module for module, names in _WHERE.items() for name in names}
__all__ = sorted(_MODULE_OF)


def __getattr__(name: str):
    if name in _MODULE_OF:
        return getattr(importlib.import_module(f"tta.results.{_MODULE_OF[name]}"), name)
    raise AttributeError(f"module 'tta.results' has no attribute {name!r}")
