"""Row Direct Match Protection: original rows that occur once and are not reproduced
verbatim in the synthetic table (metric-definitions.md §1)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from pyspark.sql import DataFrame

from privacy_eval.frames import null_safe_semi_join


@dataclass(frozen=True)
class RowDirectMatchResult:
    n_original: int          # n: every original row, duplicated ones included
    n_singletons: int        # |U|: rows that occur once in the original
    reproduced: int          # singletons found verbatim in the synthetic table

    @property
    def n_duplicated(self) -> int:
        """Rows that occur more than once: they protect each other, never exposed."""
        return self.n_original - self.n_singletons

    @property
    def protection(self) -> float:
        return 100.0 * (1.0 - self.reproduced / self.n_original)

    def details(self) -> dict:
        return {
            "n": self.n_original,
            "n_singletons": self.n_singletons,
            "n_duplicated_rows": self.n_duplicated,
            "reproduced_singletons": self.reproduced,
        }


def row_direct_match_protection(
    singletons: DataFrame,
    synthetic: DataFrame,
    columns: Sequence[str],
    n_original: int,
    n_singletons: int,
) -> RowDirectMatchResult:
    """RDMP = 100 * (1 - |{u in U : u in A}| / n).

    `singletons` is U (the original rows that occur once, see frames.occurring_once),
    computed once by the caller because the Knowledge Protection Rate needs it too.
    A semi-join never multiplies rows, so synthetic duplicates need no distinct().
    """
    reproduced = null_safe_semi_join(singletons, synthetic, columns).count()
    return RowDirectMatchResult(n_original=n_original, n_singletons=n_singletons, reproduced=reproduced)
