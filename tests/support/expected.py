"""What the job must report for the bundled examples, from the independent references."""

from __future__ import annotations

import pandas as pd
import pytest

from tests.support import reference
from tests.support.distance_oracle import distance_reference
from tests.support.paths import DATA
from tests.support.reference_linkage import linkage_reference


def expected_wbcd() -> dict:
    original = pd.read_csv(DATA / "wbcd" / "original.csv").drop(columns="Sample_code_number")
    synthetic = pd.read_csv(DATA / "wbcd" / "avatar_k20.csv")
    targets = ["Clump_Thickness", "Uniformity_of_Cell_Size", "Uniformity_of_Cell_Shape", "Marginal_Adhesion",
               "Single_Epithelial_Cell_Size", "Bare_Nuclei", "Bland_Chromatin", "Normal_Nucleoli", "Mitoses"]
    expected = expected_for(original, synthetic, ["Clump_Thickness", "Bare_Nuclei", "Class"],
                            ["Clump_Thickness", "Bare_Nuclei"], targets, ["Class"])
    # The example runs `distance: {}`: every sub-metric but the holdout share, 5 components.
    expected["distance"] = distance_reference(original, synthetic, columns=list(synthetic.columns),
                                              categorical=["Class"], components=5)
    return expected


def expected_aids() -> dict:
    original = pd.read_csv(DATA / "aids" / "original.csv", sep=";", na_values=["NA"]).drop(columns="pidnum")
    synthetic = pd.read_csv(DATA / "aids" / "avatar_k20.csv")
    targets = ["age", "wtkg", "karnof", "preanti", "cd40", "cd420", "cd80", "cd820", "days"]
    return expected_for(original, synthetic, ["age", "wtkg", "gender", "race"], ["age", "wtkg"],
                        targets, ["gender", "race"])


def expected_for(original, synthetic, known, numeric, targets, blocking) -> dict:
    columns = list(synthetic.columns)
    original = original.assign(_id=range(len(original)))
    synthetic = synthetic.assign(_id=range(len(synthetic)))
    linkage = {
        method: linkage_reference(original, synthetic, "_id", targets, blocking, method=method)["success"]
        for method in ("mahalanobis", "weighted")
    }
    return {
        "row_direct_match_protection": reference.row_direct_match(original, synthetic, columns),
        "column_direct_match_protection": reference.column_direct_match(original, synthetic, columns, "_id"),
        "knowledge_protection_rate": reference.knowledge_protection(original, synthetic, columns, known, numeric),
        "linkage": linkage,
    }


# The distance rows of a run and the oracle's names of their values.
DISTANCE_FIGURES = {"hidden_rate": "hidden_rate", "local_cloaking": "local_cloaking",
                    "distance_to_closest_record": "dcr", "nearest_neighbour_distance_ratio": "nndr"}


def check_run(rows: list[dict], columns: list[dict], expected: dict) -> None:
    by_metric = {r["metric"]: r for r in rows}
    linkage = expected.pop("linkage")
    distance = expected.pop("distance", None)
    names = {f"linkage_success_rate{suffix}" for suffix in ("", "_mahalanobis", "_weighted")}
    if distance is not None:
        names |= set(DISTANCE_FIGURES)
        for metric, figure in DISTANCE_FIGURES.items():
            assert by_metric[metric]["value"] == pytest.approx(distance[figure], rel=1e-12, abs=1e-12), metric
    assert set(by_metric) == set(expected) | names
    for method, success in linkage.items():
        row = by_metric[f"linkage_success_rate_{method}"]
        assert row["value"] == pytest.approx(success, abs=1e-12), method
        assert row["unit"] == "fraction" and row["denominator"] == row["n_synthetic"]
    assert by_metric["linkage_success_rate"]["value"] == max(
        by_metric[f"linkage_success_rate_{method}"]["value"] for method in linkage)
    for metric, want in expected.items():
        assert by_metric[metric]["value"] == pytest.approx(want["protection"], abs=1e-9), metric
        assert by_metric[metric]["unit"] == "percent" and by_metric[metric]["status"] == "ok"
    assert by_metric["row_direct_match_protection"]["numerator"] == expected["row_direct_match_protection"]["reproduced"]
    assert by_metric["knowledge_protection_rate"]["numerator"] == expected["knowledge_protection_rate"]["exposed"]
    per_column = expected["column_direct_match_protection"]["per_column"]
    assert {c["column_name"]: c["matches"] for c in columns} == {k: v["matches"] for k, v in per_column.items()}
    assert sorted(c["risk_rank"] for c in columns) == list(range(1, len(per_column) + 1))
