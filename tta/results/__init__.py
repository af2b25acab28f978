"""What a run leaves behind (docs/outputs.md), one job per module:

* :mod:`~tta.results.record`: the typed run record (``results.json``) and the per-query outcome;
* :mod:`~tta.results.scoring`: a finished stream's scored rows -> that record;
* :mod:`~tta.results.segments`: retrieval, hubness and collapse of one stream segment;
* :mod:`~tta.results.environment`: provenance (code revision, versions, device) and cost (time, peak memory);
* :mod:`~tta.results.identity`: which config keys name a run, and the complete results a re-run skips;
* :mod:`~tta.results.files`: writing and reading the run directory, atomically.
"""

from tta.results.environment import (
    code_revision,
    cost_record,
    device_name,
    git_revision,
    provenance,
    reset_peak_memory,
    versions,
)
from tta.results.files import QUERY_RANKS_FILE, read_query_ranks, write_query_ranks, write_run
from tta.results.identity import NOT_IDENTITY, complete_results, identity_keys, same_identity
from tta.results.record import RunResults, ScoredRows
from tta.results.scoring import StreamContext, evaluation_record, score_stream, shift_record
from tta.results.segments import (
    K_OCCURRENCE_FILE_K,
    collapse_check,
    hubness_record,
    hubness_summary,
    neighbour_width,
    row_ranks,
    segment_metrics,
    segment_summary,
    top1_collapse,
)

__all__ = ["K_OCCURRENCE_FILE_K", "NOT_IDENTITY", "QUERY_RANKS_FILE", "RunResults", "ScoredRows", "StreamContext",
           "code_revision", "collapse_check", "complete_results", "cost_record", "device_name", "evaluation_record",
           "git_revision", "hubness_record", "hubness_summary", "identity_keys", "neighbour_width", "provenance",
           "read_query_ranks", "reset_peak_memory", "row_ranks", "same_identity", "score_stream", "segment_metrics",
           "segment_summary", "shift_record", "top1_collapse", "versions", "write_query_ranks", "write_run"]
