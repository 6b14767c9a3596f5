"""The distance searches in cells of space against brute force (every pair scored), with
cells forced tiny: points on the split planes, ties at the radius across cells,
duplicates, empty cells, one cell holding every record; and the distance metrics with
cells against the brute-force oracle of the figures."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from pyspark.sql import functions as F
from scipy.spatial.distance import cdist

from privacy_eval.columns import KEY
from privacy_eval.distance import distance_metrics, search
from privacy_eval.distance.kernel import CITY_BLOCK, EUCLIDEAN, TIE, coordinate_names, kd_planes
from privacy_eval.distance.search import (
    CELL,
    ID,
    OWN,
    PART,
    RADIUS,
    TASK,
    _searched,
    cloaking_counts,
    cut_into_cells,
    cut_together,
    nearest_distances,
)
from privacy_eval.inputs import prepare_inputs
from tests.spark.test_distance import ALL, CLOSE, _assert_agrees, _figures
from tests.support.distance_oracle import distance_reference, tie_fixture

NAMES = coordinate_names(3)


def lattice(rng: np.random.Generator, n: int) -> np.ndarray:
    """Points of a small integer lattice: many on every split plane, many exact ties."""
    return rng.integers(0, 4, size=(n, len(NAMES))).astype(float)


def frame(spark, points: np.ndarray, **columns):
    data = pd.DataFrame(points, columns=NAMES).assign(**columns)
    return spark.createDataFrame(data).repartition(3)


def brute_distances(queries: np.ndarray, index: np.ndarray, p: float = EUCLIDEAN) -> np.ndarray:
    return cdist(queries, index, "minkowski", p=p)


INDEXES = {
    "lattice": lambda rng: lattice(rng, 120),
    # one point copied more often than a cell holds: its copies share one cell
    "duplicated": lambda rng: np.vstack([lattice(rng, 40), np.full((30, 3), 2.0)]),
    "one point": lambda rng: np.ones((25, 3)),
    "one record": lambda rng: np.ones((1, 3)),
}


@pytest.mark.parametrize("p", [EUCLIDEAN, CITY_BLOCK])
@pytest.mark.parametrize("cell_records", [1, 7])
@pytest.mark.parametrize("case", sorted(INDEXES))
def test_nearest_two_over_cells_match_brute_force(spark, case, cell_records, p, monkeypatch):
    if cell_records == 7:  # the partitioning of Spark before 4.1: tasks hashed into partitions
        monkeypatch.setattr(search, "DIRECT_PARTITIONS", False)
    rng = np.random.default_rng(len(case) + cell_records + int(p))
    index = INDEXES[case](rng)
    queries = np.vstack([lattice(rng, 50), rng.normal(1.5, 1.5, size=(20, 3))])
    asked = frame(spark, queries, **{ID: np.arange(len(queries))})
    cut = cut_into_cells(frame(spark, index), NAMES, len(index), cell_records, asked, len(queries))
    cells = cut.cells
    found, cost = nearest_distances(cut, asked, NAMES, 2, 2, len(queries), p)
    got = found.toPandas().sort_values(ID)
    want = np.sort(brute_distances(queries, index, p), axis=1)
    want = np.hstack([want, np.full((len(queries), 2), np.inf)])[:, :2]
    assert np.allclose(got[["d1", "d2"]].to_numpy(), want, rtol=CLOSE, atol=CLOSE)
    assert len(got) == len(queries) and cost.cells == cells.n_cells and cost.cells_per_query >= 1
    assert cut.homes.sum() == len(queries) and len(cut.homes) == cells.n_cells
    assert found.rdd.getNumPartitions() == 2  # one per core, not one per cell: the figures pay per partition
    if case == "one point":  # every record in one cell, the others empty
        assert cells.n_cells > 1 and (cells.counts[cells.n_cells:] > 0).sum() == 1
    if case == "lattice" and cell_records < 10:
        assert (cells.counts[cells.n_cells:] == 0).any() or cost.cells_per_query > 1


@pytest.mark.parametrize("cell_records", [1, 3])
@pytest.mark.parametrize("case", ["lattice", "duplicated", "one point"])
def test_cloaking_counts_over_cells_match_brute_force(spark, case, cell_records):
    rng = np.random.default_rng(7 * len(case) + cell_records)
    index = INDEXES[case](rng)
    queries = np.vstack([lattice(rng, 60), rng.normal(1.5, 1.0, size=(20, 3))])
    own = rng.integers(0, len(index), len(queries))
    radius = np.sqrt(((queries - index[own]) ** 2).sum(axis=1))
    cut = cut_into_cells(frame(spark, index), NAMES, len(index), cell_records, frame(spark, queries), len(queries))
    cells = cut.cells
    owns = {f"own{c}": index[own, j] for j, c in enumerate(NAMES)}
    placed = frame(spark, queries, **{ID: np.arange(len(queries)), RADIUS: radius}, **owns)
    placed = placed.withColumn(OWN, cells.of([F.col(f"own{c}") for c in NAMES])).drop(*owns)
    cap = 5
    counts, cost = cloaking_counts(cut, placed, NAMES, cap, 2)
    assert counts.rdd.getNumPartitions() == 2
    got = counts.toPandas().sort_values(ID)
    d = brute_distances(queries, index)
    tau = TIE * np.maximum(1.0, radius)[:, None]
    hidden = (d < radius[:, None] - tau).any(axis=1)
    others = (d <= radius[:, None] + tau).sum(axis=1) - 1
    assert (got["hidden"].to_numpy() == hidden).all()
    assert (np.minimum(got["others"], cap) == np.minimum(others, cap)).all()
    assert (got["others"].to_numpy()[~hidden] == others[~hidden]).all()  # the hit needs the exact tie count
    assert (others > 1).any() and (~hidden).any()  # ties at the radius are there
    numbered = frame(spark, index, position=np.arange(len(index)))
    leaf = numbered.select("position", cells.of([F.col(c) for c in NAMES]).alias("cell")).toPandas()
    cell_of_record = leaf.sort_values("position")["cell"].to_numpy()
    homes = placed.select(ID, cells.of([F.col(c) for c in NAMES]).alias("home")).toPandas().sort_values(ID)["home"]
    at_home = cell_of_record[None, :] == homes.to_numpy()[:, None]
    settled = (at_home & (d < radius[:, None] - tau)).any(axis=1) & ((at_home & (d <= radius[:, None] + tau)).sum(
        axis=1) - (cell_of_record[own] == homes.to_numpy()) >= cap)
    if case == "duplicated":  # some queries are settled in their home cell, at the cap ...
        assert settled.any() and (others[settled] >= cap).all()
        # ... and go no further: with a cap nothing reaches, every query visits more cells
        _, uncapped = cloaking_counts(cut, placed, NAMES, 10**6, 2)
        assert uncapped.cells_per_query > cost.cells_per_query
    if cell_records == 1 and case == "lattice":
        assert cost.cells_per_query > 1  # balls reach across cells
        # ... and some query has records tied with its radius in two cells or more
        tied = np.abs(d - radius[:, None]) <= tau
        assert max(len(set(cell_of_record[row])) for row in tied) > 1


@pytest.mark.parametrize("apart", [0.0, 50.0])
def test_two_sides_cut_together_share_planes_and_keep_their_own_boxes(spark, apart):
    """Each side's cells hold exactly its records, in exact boxes, and count the other
    side's as queries at home; the nearest two from either side match brute force, the
    sides mixed or lying apart."""
    rng = np.random.default_rng(5 + int(apart))
    a, b = lattice(rng, 90), lattice(rng, 60) + apart
    of_a, of_b = cut_together(frame(spark, a, **{ID: np.arange(90)}), 90, frame(spark, b, **{ID: np.arange(60)}),
                              60, NAMES, 9)
    assert of_a.cells.n_cells == of_b.cells.n_cells == 16  # depth from the larger side: ceil(log2(90 / 9))
    assert (of_a.cells.dims, of_a.cells.splits) == (of_b.cells.dims, of_b.cells.splits)
    for cut, points, other in ((of_a, a, b), (of_b, b, a)):
        leaves = cut.cells.n_cells
        placed = cut.records.toPandas()
        assert len(placed) == len(points)
        for leaf in range(leaves):
            members = placed.loc[placed[CELL] == leaf, NAMES].to_numpy()
            assert cut.cells.counts[leaves + leaf] == len(members)
            if len(members):
                axes = list(cut.cells.axes)
                assert (cut.cells.lo[leaves + leaf] == members[:, axes].min(axis=0)).all()
                assert (cut.cells.hi[leaves + leaf] == members[:, axes].max(axis=0)).all()
        other_cells = frame(spark, other).select(cut.cells.of([F.col(c) for c in NAMES]).alias(CELL)).toPandas()
        assert (cut.homes == np.bincount(other_cells[CELL], minlength=leaves)).all()
    for cut, points, other in ((of_a, a, b), (of_b, b, a)):
        asked = frame(spark, other, **{ID: np.arange(len(other))})
        found, _ = nearest_distances(cut, asked, NAMES, 2, 2, len(other))
        got = found.toPandas().sort_values(ID)[["d1", "d2"]].to_numpy()
        assert np.allclose(got, np.sort(brute_distances(other, points), axis=1)[:, :2], rtol=CLOSE, atol=CLOSE)


def test_every_part_of_a_cell_is_a_task_of_its_own_the_largest_first(spark):
    rng = np.random.default_rng(11)
    index, queries = rng.normal(size=(300, 3)), rng.normal(size=(200, 3))
    asked = frame(spark, queries, **{ID: np.arange(len(queries))})

    def seen(idx: pd.DataFrame, qry: pd.DataFrame) -> pd.DataFrame:
        """Per call: how many distinct cells, parts and tasks its rows carry, and which."""
        both = pd.concat([idx[[CELL, PART, TASK]], qry[[CELL, PART, TASK]]])
        return pd.DataFrame({"keys": [len(both.drop_duplicates())], "cell": [both[CELL].iloc[0]],
                             "part": [both[PART].iloc[0]], "task": [both[TASK].iloc[0]], "records": [len(idx)],
                             "queries": [len(qry)]})

    schema = "keys long, cell int, part int, task int, records long, queries long"
    cut = cut_into_cells(frame(spark, index), NAMES, len(index), 40, asked, len(queries))
    routed = asked.withColumn(CELL, cut.cells.of([F.col(c) for c in NAMES]))
    # 40 cores to keep busy: parts of about 5 queries (drawn by a hash), several per cell
    calls = _searched(cut, NAMES, routed, cut.homes, 40, seen, schema)
    got = calls.withColumn("partition", F.spark_partition_id()).toPandas().sort_values("task")
    records = cut.cells.counts[cut.cells.n_cells:]
    assert (got["keys"] == 1).all()  # one (cell, part, task) a call
    assert len(got[["cell", "part"]].drop_duplicates()) == len(got) == got["task"].nunique()
    assert (got["partition"] == got["task"]).all() and got["task"].tolist() == list(range(len(got)))
    assert got["queries"].sum() == len(queries)
    assert (got["records"].to_numpy() == records[got["cell"]]).all()
    assert len(got) > cut.cells.n_cells  # cells cut into parts
    homes = cut.homes[got["cell"]]
    share = homes / -(-homes // 5)  # a part's share of its cell's queries
    assert (np.diff(got["records"].to_numpy() + share) <= 1e-9).all()  # the most rows first


@pytest.mark.parametrize(("components", "cell_records"), [("all", 2), (3, 5)])
def test_ties_fixture_with_tiny_cells_matches_brute_force(spark, components, cell_records):
    original, synthetic, holdout = tie_fixture()
    columns = [c for c in original.columns if c != "id"]
    expected = distance_reference(original, synthetic, columns=columns, components=components, holdout=holdout, key="id")
    inputs = prepare_inputs(spark.createDataFrame(original), spark.createDataFrame(synthetic), row_key="id")
    result = distance_metrics(inputs.original, inputs.synthetic, KEY, list(inputs.columns), inputs.numeric, list(ALL),
                              components=components, holdout=spark.createDataFrame(holdout), cell_records=cell_records)
    _assert_agrees(_figures(result), expected, len(synthetic))
    assert {name: cost.cells > 1 for name, cost in result.costs.items()} == {"closest": True, "holdout": True, "cloaking": True}


@pytest.mark.parametrize("chosen", [("hidden_rate", "local_cloaking"),
                                    ("distance_to_closest_record", "holdout_distance_share")])
def test_one_search_alone_with_tiny_cells_matches_brute_force(spark, chosen):
    """A search run without the other cuts only its own side (`cut_into_cells`)."""
    original, synthetic, holdout = tie_fixture()
    columns = [c for c in original.columns if c != "id"]
    expected = distance_reference(original, synthetic, columns=columns, components=3, holdout=holdout, key="id")
    inputs = prepare_inputs(spark.createDataFrame(original), spark.createDataFrame(synthetic), row_key="id")
    result = distance_metrics(inputs.original, inputs.synthetic, KEY, list(inputs.columns), inputs.numeric, list(chosen),
                              components=3, holdout=spark.createDataFrame(holdout), cell_records=3)
    got = _figures(result)
    assert (result.cloaking is None) == ("hidden_rate" not in chosen)
    assert (result.closest is None) == ("distance_to_closest_record" not in chosen)
    _assert_agrees(got, expected, len(synthetic))
    assert all(cost.cells > 1 for cost in result.costs.values()) and result.costs


@pytest.mark.parametrize("depth", [3, 7])
def test_cells_of_follow_the_planes_as_numpy_does(spark, depth):
    """`Cells.of` (a CASE expression for the first levels, a loop below them) against the
    planes followed in numpy: points on the planes go left, and a node that cannot split
    (+inf) sends everything left."""
    rng = np.random.default_rng(depth)
    points = np.vstack([lattice(rng, 300), np.full((40, 3), 1.0)])
    dims, splits = kd_planes(points[rng.permutation(len(points))[:200]], depth)
    assert np.isin(points, splits[1:]).any() and (depth < 7 or np.isinf(splits[1:]).any())
    node = np.ones(len(points), dtype=np.int64)
    for _ in range(depth):
        node = node * 2 + (points[np.arange(len(points)), dims[node]] > splits[node])
    nodes = 2 ** (depth + 1)
    cells = search.Cells(depth, tuple(int(d) for d in dims), tuple(float(v) for v in splits), (0, 1, 2),
                         np.zeros((nodes, 3)), np.zeros((nodes, 3)), np.zeros(nodes, dtype=np.int64))
    placed = frame(spark, points, position=np.arange(len(points)))
    got = placed.select("position", cells.of([F.col(c) for c in NAMES]).alias("cell")).toPandas()
    assert (got.sort_values("position")["cell"].to_numpy() == node - 2**depth).all()
    assert (depth > search.CASE_LEVELS) == (depth == 7)
