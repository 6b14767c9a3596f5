"""The distance-based metrics, exactly: hidden rate, local cloaking, distance to closest
record, nearest-neighbour distance ratio and the holdout DCR share (docs/metrics.md,
"Distance-based metrics").

The pipeline: fit the space on the original (space.py), project every side into it,
run the exact searches (search.py), reduce their per-record results to the figures
(figures.py). `distance_metrics` runs it.
"""

from privacy_eval.distance.figures import CloakingFigures, ClosestFigures, HoldoutFigures
from privacy_eval.distance.pipeline import DistanceResult, distance_metrics
from privacy_eval.distance.space import Space

__all__ = ["CloakingFigures", "ClosestFigures", "DistanceResult", "HoldoutFigures", "Space", "distance_metrics"]
