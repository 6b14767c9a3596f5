"""What tests compare of an evaluation."""

from __future__ import annotations

from privacy_eval.evaluation import Evaluation


def snapshot(evaluation: Evaluation) -> dict:
    """Everything a results row holds that comes from the data."""
    return {
        "metrics": {
            m.metric: {
                "value": m.value, "status": m.status, "numerator": m.numerator,
                "denominator": m.denominator, "details": m.details,
            }
            for m in evaluation.metrics
        },
        "columns": [
            (c.column_name, c.matches, c.distinct_synthetic, c.protection, c.risk_rank)
            for c in evaluation.columns
        ],
        "counts": (evaluation.n_original, evaluation.n_synthetic),
        "fingerprint": evaluation.input_fingerprint,
        "warnings": evaluation.warnings,
    }
