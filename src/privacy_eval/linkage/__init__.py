"""The linkage (re-identification) attack, on Spark: how often an attacker holding the
original records finds, for each synthetic record, the original it was generated from
(docs/metrics.md, Linkage attack).

How it runs and its deliberate deviations from the reference are described in
:mod:`privacy_eval.linkage.attack`. The modules follow the attack's steps:
:mod:`.prepare` (configuration against the data, complete records, per-side
statistics), :mod:`.whitening`, :mod:`.blocking`, :mod:`.scoring` (the ``mapInArrow``
pass, imported by the workers), :mod:`.evaluation` (rates, baselines, top-k,
precision-recall, warnings) and :mod:`.results`; :mod:`.kernel` is the numpy/scipy
part the workers run.
"""

from privacy_eval.linkage.attack import linkage_attack
from privacy_eval.linkage.evaluation import PR_EXACT_LIMIT, SINGLE_COLUMN_LIMIT
from privacy_eval.linkage.prepare import (
    METHODS,
    check_linkage_inputs,
    complete_targets,
    side_statistics,
)
from privacy_eval.linkage.results import (
    LinkageMethodResult,
    LinkageResult,
    PrecisionRecallSummary,
)

__all__ = [
    "METHODS",
    "PR_EXACT_LIMIT",
    "SINGLE_COLUMN_LIMIT",
    "LinkageMethodResult",
    "LinkageResult",
    "PrecisionRecallSummary",
    "check_linkage_inputs",
    "complete_targets",
    "linkage_attack",
    "side_statistics",
]
