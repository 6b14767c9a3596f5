"""Knowledge Protection Rate: an attacker who knows some variables, numeric ones only to
within a bin of 5 % of their mean, singles out an original record when its binned
profile matches exactly one synthetic profile (docs/metrics.md, "Knowledge Protection
Rate")."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from privacy_eval.columns import INTERNAL_PREFIX
from privacy_eval.config import KnowledgeProtectionConfig
from privacy_eval.errors import InputError
from privacy_eval.frames import N_ORIGINAL, N_SYNTHETIC, occurring_once, qcol, shuffle_partitions
from privacy_eval.metrics.binning import BinGrid, bin_grids, profiles
from privacy_eval.metrics.contract import Metric, Shared, require_compared, require_numeric
from privacy_eval.results import AT_LEAST, MetricRow

if TYPE_CHECKING:
    from privacy_eval.inputs import EvaluationInputs

NAME = "knowledge_protection_rate"

_SINGLETONS = INTERNAL_PREFIX + "singletons"  # U rows with a given profile
_BEYOND = INTERNAL_PREFIX + "beyond"  # a value whose bin is infinite (binning.beyond_grid)


@dataclass(frozen=True)
class KnowledgeProtectionResult:
    n_original: int
    n_singletons: int             # |U|
    exposed: int                  # |S|: singletons whose profile is a unique synthetic one
    unique_synthetic_profiles: int  # |B_1|
    known_variables: tuple[str, ...]
    grids: tuple[BinGrid, ...]

    @property
    def protection(self) -> float:
        return 100.0 * (1.0 - self.exposed / self.n_original)

    def details(self) -> dict:
        return {
            "n": self.n_original,
            "n_singletons": self.n_singletons,
            "exposed": self.exposed,
            "unique_synthetic_profiles": self.unique_synthetic_profiles,
            "known_variables": list(self.known_variables),
            "bins": {g.variable: g.published() for g in self.grids},
        }


def knowledge_protection_rate(
    occurrences: DataFrame,
    known: Sequence[str],
    numeric: Sequence[str],
    n_original: int,
    n_singletons: int,
    bin_width: Mapping[str, float] | None = None,
) -> KnowledgeProtectionResult:
    """KPR = 100 * (1 - |S| / n), S = singletons whose binned profile is in B_1.

    `occurrences` is frames.occurrence_counts of the two tables, shared with Row Direct
    Match Protection: each distinct row with its count on each side. Its rows with
    N_ORIGINAL == 1 are U. Grouped by binned profile, the N_SYNTHETIC counts add up to
    how often the profile occurs in the synthetic table (B_1 where that is 1), and the
    U rows in the group are the singletons it exposes: neither table is read again.
    `numeric` names the known variables to bin; the others are compared as they are.
    """
    if n_singletons == 0:
        # Everybody has a twin in the original: nobody can be singled out.
        return KnowledgeProtectionResult(n_original, 0, 0, 0, tuple(known), ())
    numeric_known = [v for v in known if v in set(numeric)]
    grids = bin_grids(occurring_once(occurrences), numeric_known, bin_width or {})
    # The aggregate has a task per share of memory (frames.cached_row_occurrences), many
    # at large sizes, and a profile recurs in most of them: grouped in as many map tasks,
    # each task's partial counts repeat the others', so fewer tasks read it.
    grouped = occurrences.coalesce(shuffle_partitions(occurrences.sparkSession))
    # Per grid, whether some value's bin is infinite (binning.beyond_grid): counted in
    # the same passes, refused below.
    beyond = [f"{_BEYOND}{j}" for j in range(len(grids))]
    per_profile = profiles(grouped, known, grids, keep=(N_ORIGINAL, N_SYNTHETIC), flags=beyond).groupBy(
        *(qcol(v) for v in known)
    ).agg(
        F.sum(N_SYNTHETIC).alias(N_SYNTHETIC),
        F.count(F.when(F.col(N_ORIGINAL) == 1, 1)).alias(_SINGLETONS),
        *(F.max(F.col(flag)).alias(flag) for flag in beyond),
    )
    unique = F.col(N_SYNTHETIC) == 1
    counts = per_profile.agg(
        F.count(F.when(unique, 1)).alias("unique_profiles"),
        F.coalesce(F.sum(F.when(unique, F.col(_SINGLETONS))), F.lit(0)).alias("exposed"),
        *(F.max(F.col(flag)).alias(flag) for flag in beyond),
    ).collect()[0]
    for grid, flag in zip(grids, beyond):
        if counts[flag]:
            raise InputError(
                f"knowledge_protection: known variable '{grid.variable}' has values more than the largest double "
                "(1.8e308) in bin widths from its grid's origin, whose bins could not be told apart; give a wider "
                f"'metrics.knowledge_protection.bin_width.{grid.variable}' or declare it under 'categorical'"
            )
    return KnowledgeProtectionResult(
        n_original=n_original,
        n_singletons=n_singletons,
        exposed=int(counts["exposed"]),
        unique_synthetic_profiles=int(counts["unique_profiles"]),
        known_variables=tuple(known),
        grids=grids,
    )


def _check(inputs: EvaluationInputs, config: KnowledgeProtectionConfig) -> None:
    for name in config.known_variables:
        require_compared(inputs, "knowledge_protection: known variable", name)
    for name in config.bin_width:
        require_numeric(inputs, f"knowledge_protection: 'bin_width.{name}'", name, "its values are compared as they are")


def _compute(shared: Shared, config: KnowledgeProtectionConfig) -> KnowledgeProtectionResult:
    inputs = shared.inputs
    assert shared.occurrences is not None
    return knowledge_protection_rate(
        shared.occurrences, config.known_variables, sorted(inputs.numeric),
        inputs.n_original, shared.n_singletons, config.bin_width,
    )


def _rows(shared: Shared, config: KnowledgeProtectionConfig, result: KnowledgeProtectionResult) -> list[MetricRow]:
    return [MetricRow(
        metric=NAME, value=result.protection, unit="percent", target=config.target,
        numerator=result.exposed, denominator=result.n_original, details=result.details(), comparison=AT_LEAST,
    )]


METRIC = Metric(
    key="knowledge_protection",
    phase=NAME,
    check=_check,
    compute=_compute,
    rows=_rows,
    report_keys={NAME: ("n", "n_singletons", "exposed", "unique_synthetic_profiles")},
    occurrence_columns=lambda config: config.known_variables,
)
