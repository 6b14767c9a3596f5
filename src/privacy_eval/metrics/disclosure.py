"""Identity and attribute disclosure: what an attacker who knows a person's key variables
learns from the release, as synthpop's `disclosure()` measures it (repU, DiSCO,
DCAP/TCAP), with SDMetrics' CategoricalCAP and DisclosureProtection from the same
tables (docs/metrics.md, "Identity and attribute disclosure").

Rows: `replicated_uniques` (repU) and `attribute_disclosure` (the largest DiSCO over the
targets, every measure per target in its details). Neither trusts the row key.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from privacy_eval.config import DisclosureConfig
from privacy_eval.formatting import code, numeric_items
from privacy_eval.frames import (
    INTERNAL_PREFIX,
    N_ORIGINAL,
    N_SYNTHETIC,
    counts_per_column_value,
    persist_aggregate,
    qcol,
    whole_row_shuffles,
)
from privacy_eval.metrics.contract import Metric, Shared, require_compared, require_numeric
from privacy_eval.metrics.quantile_groups import Grouping, quantile_groups
from privacy_eval.results import AT_MOST, ColumnRow, MetricRow

if TYPE_CHECKING:
    from privacy_eval.inputs import EvaluationInputs

# Percentages of the original records disclosed (risks: a target bounds them from above).
REPLICATED_UNIQUES = "replicated_uniques"
ATTRIBUTE_DISCLOSURE = "attribute_disclosure"
FIGURE = "disclosure.png"
_TARGET = INTERNAL_PREFIX + "target"          # the target's position in `targets`
_DISCO = INTERNAL_PREFIX + "disco"            # a key's DiSCO records (after the cut)
_LEVEL = INTERNAL_PREFIX + "level"            # the one target value the release shows for a key

# Per target, in details["per_target"]: the figures the report prints, in this order.
TARGET_KEYS = (
    "Dorig", "DiSCO", "DiSDiO", "iS", "DiS", "Dsyn", "DCAPd", "DCAPs", "DCAPb", "TCAP", "TCAPs", "TCAPb",
    "baseCAPd", "CAPd", "CAPs", "max_denom", "mean_denom",
    "sdmetrics_categorical_cap", "sdmetrics_disclosure_protection",
)
IDENTITY_KEYS = ("UiO", "UiS", "UiOiS", "repU")


@dataclass(frozen=True)
class Check:
    """synthpop's one-way or two-way check of one target (counts only, never a level)."""

    flagged: bool
    figures: dict


def _pct(x: float, n: int) -> float | None:
    """x / n in percent; None when n is 0 (a measure over no records)."""
    return x / n * 100 if n else None


@dataclass(frozen=True)
class TargetDisclosure:
    """The counts of one target; the measures are these over N_d (or N_s, N_b...)."""

    target: str
    identity: dict[str, int]     # UiO, UiS, UiOiS, repU as record counts
    counts: dict[str, int]       # Dorig, Dsyn, iS, DiS, DiSCO, DiSDiO, n_both, denom_TCAP, TCAP_num, ...
    sums: dict[str, float]       # CAPd, CAPs, DCAP numerators; SDMetrics' numerator
    max_denom: int
    mean_denom: float | None
    one_way: Check
    two_way: Check

    def measures(self, n_original: int, n_synthetic: int) -> dict:
        """Every measure in percent as synthpop computes it (count / N * 100), and
        SDMetrics' two figures (0-1)."""
        c, s = self.counts, self.sums
        nd, ns, nb, tden = n_original, n_synthetic, c["n_both"], c["denom_TCAP"]
        cap = 1.0 - s["sdm_num"] / c["sdm_den"] if c["sdm_den"] else 0.0
        baseline = 1.0 - 1.0 / c["levels_original"] if c["levels_original"] else 0.0
        protection = (0.0 if cap == 0 else 1.0) if baseline == 0 else min(cap / baseline, 1.0)
        return {
            "Dorig": _pct(c["Dorig"], nd), "Dsyn": _pct(c["Dsyn"], ns), "iS": _pct(c["iS"], nd),
            "DiS": _pct(c["DiS"], nd), "DiSCO": _pct(c["DiSCO"], nd), "DiSDiO": _pct(c["DiSDiO"], nd),
            "DCAPd": _pct(s["DCAP"], nd), "DCAPs": _pct(s["DCAP"], ns), "DCAPb": _pct(s["DCAP"], nb),
            "TCAPb": _pct(c["TCAP_num"], nb), "TCAPs": _pct(c["TCAP_num"], ns), "TCAP": _pct(c["TCAP_num"], tden),
            "baseCAPd": s["base"] / nd**2 * 100 if nd else None, "CAPd": _pct(s["CAPd"], nd), "CAPs": _pct(s["CAPs"], ns),
            "max_denom": self.max_denom, "mean_denom": self.mean_denom,
            "sdmetrics_categorical_cap": cap, "sdmetrics_disclosure_protection": protection,
        }


@dataclass(frozen=True)
class DisclosureResult:
    keys: tuple[str, ...]
    n_original: int
    n_synthetic: int
    targets: tuple[TargetDisclosure, ...]
    groupings: tuple[Grouping, ...]

    def identity(self, t: TargetDisclosure) -> dict:
        """UiO, UiOiS, repU over N_d and UiS over N_s, in percent (None over no records)."""
        i, nd = t.identity, self.n_original
        return {"UiO": _pct(i["UiO"], nd), "UiS": _pct(i["UiS"], self.n_synthetic),
                "UiOiS": _pct(i["UiOiS"], nd), "repU": _pct(i["repU"], nd)}

    @property
    def replicated(self) -> TargetDisclosure:
        """The target whose tables give the largest repU (all give the same one unless
        cells are cut at denom_lim); the first on ties."""
        return max(self.targets, key=lambda t: (t.identity["repU"], -self.targets.index(t)))

    @property
    def headline(self) -> TargetDisclosure:
        """The target with the largest DiSCO; the first on ties."""
        return max(self.targets, key=lambda t: (t.counts["DiSCO"], -self.targets.index(t)))


def disclosure_measures(
    original: DataFrame,
    synthetic: DataFrame,
    keys: Sequence[str],
    targets: Sequence[str],
    n_original: int,
    n_synthetic: int,
    groupings: Sequence[Grouping] = (),
    denom_lim: int | None = None,
    thresh_1way: Sequence[float] = (50, 90),
    thresh_2way: Sequence[float] = (4, 80),
) -> DisclosureResult:
    """synthpop's disclosure measures of every target from one grouped pass.

    With q a combination of the keys, t a target value, d_tq and s_tq the original and
    synthetic counts, d_.q = sum_t d_tq (s_.q likewise) and N_d, N_s all records:

        UiO   = 100 * #{q : d_.q = 1} / N_d         UiS = 100 * #{q : s_.q = 1} / N_s
        UiOiS = 100 * #{q : d_.q = 1, s_.q > 0} / N_d
        repU  = 100 * #{q : d_.q = 1, s_.q = 1} / N_d
        Dorig = 100 * sum(d_tq : d_tq = d_.q) / N_d  (the key has one target value)
        iS    = 100 * sum(d_.q : s_.q > 0) / N_d
        DiS   = 100 * sum(d_.q : the key has one target value in the release) / N_d
        DiSCO = 100 * sum(d_tq : s_tq = s_.q > 0) / N_d   (... and that value is theirs)
        DCAPd = 100 * sum(d_tq * s_tq / s_.q) / N_d, DCAPs over N_s, DCAPb over
                N_b = sum(s_.q : d_.q > 0); TCAPb, TCAPs: DiSCO's sum over N_b, N_s;
        TCAP  = DiSCO's sum / sum(d_.q : s_tq = s_.q > 0 for some t)

    and Dsyn, DiSDiO, baseCAPd, CAPd, CAPs, max_denom, mean_denom as synthpop computes them
    (docs/metrics.md). `denom_lim` (synthpop's exclude_ov_denom_lim) sets every cell
    count above it to 0, table by table, before the sums, as synthpop does; `groupings`
    replace their columns by group numbers first. The counts come from one aggregation
    of both tables with the targets unpivoted (frames.counts_per_column_value): one row
    per (target, key, value) with d_tq and s_tq, for every target at once.
    """
    by_column = {g.column: g for g in groupings}
    grouped = [by_column[c].column_expr() if c in by_column else qcol(c) for c in (*keys, *targets)]
    cells, slots = counts_per_column_value(
        original.select(*grouped), synthetic.select(*grouped), keys, targets, _TARGET
    )

    def cut(x: Column) -> Column:
        return x if denom_lim is None else F.when(x <= denom_lim, x).otherwise(0)

    # One row per record and target in the first shuffle, and as many cells at worst
    # (near-unique keys or values): its tasks are sized as for whole rows of that width.
    with whole_row_shuffles(cells.sparkSession, (n_original + n_synthetic) * len(targets), len(cells.columns)):
        cells = persist_aggregate(cells)
        per_key = persist_aggregate(_per_key(cells, keys, slots, cut))
    try:
        sums = {int(r[_TARGET]): r.asDict() for r in _per_target(per_key, denom_lim).collect()}
        levels = {int(r[_TARGET]): r.asDict() for r in _per_level(cells, per_key, slots, cut).collect()}
        checked = [i for i, q in sums.items() if (q["max_denom"] or 0) > thresh_2way[0]]  # others: no pair
        pairs = _two_way_pairs(cells, per_key, keys, slots, thresh_2way, checked) if checked else {}
    finally:
        per_key.unpersist()
        cells.unpersist()
    return DisclosureResult(
        keys=tuple(keys), n_original=n_original, n_synthetic=n_synthetic, groupings=tuple(groupings),
        targets=tuple(
            _target_result(name, sums[i], levels[i], pairs.get(i), keys, thresh_1way)
            for i, name in enumerate(targets)
        ),
    )


def _per_key(cells: DataFrame, keys: Sequence[str], slots: Sequence[str], cut) -> DataFrame:
    """Per target and key q: the counts of its cells the measures need, the DiSCO records
    (d_tq of the one target value the release shows for q, if it shows one) and that
    value (`_LEVEL`, its value fields)."""
    d_cell, s_cell = F.col(N_ORIGINAL), F.col(N_SYNTHETIC)
    dc, sc = cut(d_cell), cut(s_cell)
    q = cells.groupBy(_TARGET, *(qcol(k) for k in keys)).agg(
        F.sum(d_cell).alias("d"), F.sum(s_cell).alias("s"), F.sum(dc).alias("dc"), F.sum(sc).alias("sc"),
        F.count(F.when(d_cell > 0, 1)).alias("nd"), F.count(F.when(sc > 0, 1)).alias("nsc"),
        F.max(s_cell).alias("smax"), F.sum(F.when(s_cell > 0, d_cell).otherwise(0)).alias("d_at_s"),
        F.first(F.when(s_cell > 0, F.struct(*slots)), ignorenulls=True).alias(_LEVEL),
        F.sum(F.when(sc > 0, dc).otherwise(0)).alias("dsc"),
        F.sum(dc.cast("double") * dc).alias("d2"), F.sum(sc.cast("double") * sc).alias("s2"),
        F.sum(dc.cast("double") * sc).alias("ds"), F.sum(d_cell.cast("double") * s_cell).alias("ds_all"),
    )
    # The release shows one target value for q: d_at_s is then the d_tq of that value.
    one_synthetic = (F.col("smax") == F.col("s")) & (F.col("s") > 0)
    return q.withColumn("one_synthetic", one_synthetic).withColumn(
        _DISCO, F.when(one_synthetic, cut(F.col("d_at_s"))).otherwise(0)
    )


def _per_target(q: DataFrame, denom_lim: int | None) -> DataFrame:
    """Per target: the sums over the keys q of each measure's count."""
    d, s, dcq, scq = F.col("d"), F.col("s"), F.col("dc"), F.col("sc")

    def ok(x: Column) -> Column:  # a cell over denom_lim counts 0 in every table
        return F.lit(True) if denom_lim is None else x <= denom_lim

    one_synthetic = F.col("one_synthetic")
    one_original = F.col("nd") == 1
    one_cut = F.col("nsc") == 1
    count = F.count_if
    total = F.sum
    return q.groupBy(_TARGET).agg(
        count(dcq == 1).alias("UiO"), count(scq == 1).alias("UiS"),
        count((dcq == 1) & (s > 0)).alias("UiOiS"), count((dcq == 1) & (scq == 1)).alias("repU"),
        total(F.when(one_original & ok(d), d).otherwise(0)).alias("Dorig"),
        total(F.when(one_synthetic & ok(s), s).otherwise(0)).alias("Dsyn"),
        total(F.when(s > 0, dcq).otherwise(0)).alias("iS"),
        total(F.when(one_synthetic, dcq).otherwise(0)).alias("DiS"),
        total(_DISCO).alias("DiSCO"),
        total(F.when(one_synthetic & one_original & (F.col("d_at_s") == d) & ok(d), d).otherwise(0)).alias("DiSDiO"),
        total(F.when(dcq > 0, scq).otherwise(0)).alias("n_both"),
        total(F.when(one_cut, F.col("dsc")).otherwise(0)).alias("TCAP_num"),
        total(F.when(one_cut, dcq).otherwise(0)).alias("denom_TCAP"),
        total(F.when(s > 0, d).otherwise(0)).alias("sdm_den"),
        total(F.when(dcq > 0, F.col("d2") / dcq)).alias("CAPd"),
        total(F.when(scq > 0, F.col("s2") / scq)).alias("CAPs"),
        total(F.when(scq > 0, F.col("ds") / scq)).alias("DCAP"),
        total(F.when(s > 0, F.col("ds_all") / s)).alias("sdm_num"),
        F.max(_DISCO).alias("max_denom"), F.avg(F.when(F.col(_DISCO) > 0, F.col(_DISCO))).alias("mean_denom"),
    )


def _disclosed_values(q: DataFrame, columns: Sequence[str], slots: Sequence[str]) -> DataFrame:
    """The DiSCO records of each key (over 0) at the target value the release shows:
    `columns`, the value fields, N_ORIGINAL = 0 and _DISCO."""
    return q.filter(F.col(_DISCO) > 0).select(
        *(qcol(c) for c in columns), *(F.col(f"{_LEVEL}.{slot}").alias(slot) for slot in slots),
        F.lit(0).cast("long").alias(N_ORIGINAL), _DISCO,
    )


def _per_level(cells: DataFrame, q: DataFrame, slots: Sequence[str], cut) -> DataFrame:
    """Per target: the target's margins (baseCAPd, SDMetrics' baseline) and the one-way
    check's counts: the value with the most disclosive records (on ties, the one with
    more original records), and its share."""
    d_cell = F.col(N_ORIGINAL)
    original = cells.select(_TARGET, *slots, N_ORIGINAL, F.lit(0).cast("long").alias(_DISCO))
    level = original.unionByName(_disclosed_values(q, [_TARGET], slots)).groupBy(_TARGET, *slots).agg(
        F.sum(d_cell).alias("dt"), F.sum(cut(d_cell)).alias("dct"), F.sum(_DISCO).alias("dis")
    )
    return level.groupBy(_TARGET).agg(
        F.sum(F.col("dt") * F.col("dt")).alias("base"), F.count_if(F.col("dt") > 0).alias("levels_original"),
        F.sum("dct").alias("all"), F.sum("dis").alias("disclosive"),
        F.max(F.struct(F.col("dis"), F.col("dct"))).alias("top"),
    )


def _two_way_pairs(
    cells: DataFrame, q: DataFrame, keys: Sequence[str], slots: Sequence[str], thresh: Sequence[float],
    checked: Sequence[int],
) -> dict:
    """Per target of `checked`: synthpop's two-way check. Pairs (one key's level, a target
    value) from the DiSCO cells over thresh[0] records, where over thresh[1] % of the
    original records with that key level have that target value: how many, and the
    largest. Only the cells whose key level is in such a pair are read again."""
    over = q.filter(F.col(_TARGET).isin(list(checked)) & (F.col(_DISCO) > thresh[0]))
    found = None
    for i, key in enumerate(keys):
        levels = over.select(F.col(_TARGET).alias("t"), qcol(key).alias("level")).distinct()
        wanted = cells.join(levels, (cells[_TARGET] == levels["t"]) & qcol(key, cells).eqNullSafe(levels["level"]),
                            "left_semi")
        both = wanted.select(_TARGET, qcol(key), *slots, N_ORIGINAL, F.lit(None).cast("long").alias(_DISCO))
        per_pair = both.unionByName(_disclosed_values(over, [_TARGET, key], slots)).groupBy(
            _TARGET, qcol(key), *slots
        ).agg(F.sum(N_ORIGINAL).alias("kt"), F.sum(_DISCO).alias("np"))
        with_total = per_pair.withColumn("k", F.sum("kt").over(Window.partitionBy(_TARGET, qcol(key))))
        # np is null where no DiSCO cell is over thresh[0]; k is 0 only there (a key level
        # of the release alone), and CASE keeps ANSI mode from dividing by it.
        share = F.when(F.col("np").isNotNull(), F.col("kt") * 100.0 / F.col("k"))
        flagged = with_total.filter(share > thresh[1])
        part = flagged.select(_TARGET, F.struct(F.col("np"), F.lit(-i).alias("key"), "kt", "k").alias("pair"))
        found = part if found is None else found.unionByName(part)
    rows = found.groupBy(_TARGET).agg(F.count(F.lit(1)).alias("n"), F.max("pair").alias("top")).collect()
    return {int(r[_TARGET]): r for r in rows}


def _target_result(name: str, q: dict, level: dict, pairs, keys: Sequence[str], thresh_1way) -> TargetDisclosure:
    top = level["top"]
    disclosive = int(level["disclosive"])
    share = top["dis"] / disclosive * 100 if disclosive else None
    one_way = Check(
        flagged=share is not None and top["dis"] > thresh_1way[0] and share > thresh_1way[1],
        figures={"disclosive_records": disclosive, "top_level_disclosive": int(top["dis"]),
                 "top_level_share_of_disclosive": share,
                 "top_level_share_of_all": top["dct"] / level["all"] * 100 if level["all"] else None},
    )
    largest = pairs["top"] if pairs is not None else None
    two_way = Check(
        flagged=pairs is not None,
        figures={"pairs": int(pairs["n"]) if pairs is not None else 0} | ({
            "largest_key": keys[-largest["key"]], "largest_disclosive_records": int(largest["np"]),
            "largest_key_level_records": int(largest["k"]), "largest_key_level_target_records": int(largest["kt"]),
        } if largest is not None else {}),
    )
    ints = ("Dorig", "Dsyn", "iS", "DiS", "DiSCO", "DiSDiO", "n_both", "TCAP_num", "denom_TCAP", "sdm_den")
    return TargetDisclosure(
        target=name,
        identity={k: int(q[k]) for k in IDENTITY_KEYS},
        counts={k: int(q[k]) for k in ints} | {"levels_original": int(level["levels_original"])},
        sums={"CAPd": q["CAPd"] or 0.0, "CAPs": q["CAPs"] or 0.0, "DCAP": q["DCAP"] or 0.0,
              "sdm_num": q["sdm_num"] or 0.0, "base": float(level["base"])},
        max_denom=int(q["max_denom"] or 0),
        mean_denom=q["mean_denom"],
        one_way=one_way,
        two_way=two_way,
    )


def _check(inputs: EvaluationInputs, config: DisclosureConfig) -> None:
    for role, names in (("keys", config.keys), ("targets", config.targets)):
        for name in names:
            require_compared(inputs, f"key 'metrics.disclosure.{role}': column", name)
    for name in config.bins:
        require_numeric(inputs, f"key 'metrics.disclosure.bins.{name}'", name, "its values cannot be grouped")


def _compute(shared: Shared, config: DisclosureConfig) -> DisclosureResult:
    inputs = shared.inputs
    groupings = quantile_groups(inputs.original, inputs.synthetic, config.bins)
    return disclosure_measures(
        inputs.original, inputs.synthetic, config.keys, config.targets, inputs.n_original, inputs.n_synthetic,
        groupings, config.denom_lim if config.exclude_ov_denom_lim else None,
        config.thresh_1way, config.thresh_2way,
    )


def _rows(shared: Shared, config: DisclosureConfig, result: DisclosureResult) -> list[MetricRow]:
    common = {
        "keys": list(result.keys), "n_original": result.n_original, "n_synthetic": result.n_synthetic,
        "bins": {g.column: g.published() for g in result.groupings},
        "exclude_ov_denom_lim": config.exclude_ov_denom_lim, "denom_lim": config.denom_lim,
    }
    per_target = {}
    checks = []
    for t in result.targets:
        per_target[t.target] = {
            **t.measures(result.n_original, result.n_synthetic),
            "records": {k: t.counts[k] for k in ("Dorig", "Dsyn", "iS", "DiS", "DiSCO", "DiSDiO")}
            | {"N_b": t.counts["n_both"], "denom_TCAP": t.counts["denom_TCAP"]},
            "check_1way": {"flagged": t.one_way.flagged, **t.one_way.figures},
            "check_2way": {"flagged": t.two_way.flagged, **t.two_way.figures},
        }
        checks += _check_warnings(t, config)
    identity = result.replicated
    ident_details = {**common, **result.identity(identity), **{f"{k}_records": v for k, v in identity.identity.items()}}
    if config.exclude_ov_denom_lim:  # cells cut per target table: the identity measures differ by target
        ident_details["per_target"] = {t.target: result.identity(t) for t in result.targets}
        ident_details["from_target"] = identity.target
    headline = result.headline
    attrib_details = {**common, "target_column": headline.target, "per_target": per_target}
    for message in (g.warning() for g in result.groupings):
        if message:  # about both rows
            shared.warn(attrib_details, message)
            ident_details.setdefault("warnings", []).append(message)
    for message in checks:
        shared.warn(attrib_details, message)
    return [
        MetricRow(metric=REPLICATED_UNIQUES, value=result.identity(identity)["repU"], unit="percent", target=None,
                  numerator=identity.identity["repU"], denominator=result.n_original, details=ident_details,
                  comparison=AT_MOST),
        MetricRow(metric=ATTRIBUTE_DISCLOSURE, value=per_target[headline.target]["DiSCO"], unit="percent",
                  target=config.target, numerator=headline.counts["DiSCO"], denominator=result.n_original,
                  details=attrib_details, comparison=AT_MOST),
    ]


def _check_warnings(t: TargetDisclosure, config: DisclosureConfig) -> list[str]:
    out = []
    name = f"'{t.target}'"
    if t.one_way.flagged:
        f = t.one_way.figures
        out.append(
            f"attribute_disclosure: target {name}: one of its values accounts for {f['top_level_disclosive']} of the "
            f"{f['disclosive_records']} disclosive records ({f['top_level_share_of_disclosive']:.1f} %): the disclosure "
            "may come from how common that value is (synthpop's check_1way)"
        )
    if t.two_way.flagged:
        f = t.two_way.figures
        out.append(
            f"attribute_disclosure: target {name}: {f['pairs']} pair(s) of one key's value and a target value drive "
            f"disclosures, each target value held by over {config.thresh_2way[1]:g} % of the original records with "
            f"that key value; the largest: key '{f['largest_key']}', {f['largest_disclosive_records']} disclosive "
            "records (synthpop's check_2way)"
        )
    return out


def _report_section(out: Path, metrics: Sequence[MetricRow], columns: Sequence[ColumnRow]) -> list[str]:
    from privacy_eval import plots  # matplotlib: only when a report is asked for

    attrib = next((m for m in metrics if m.metric == ATTRIBUTE_DISCLOSURE), None)
    ident = next((m for m in metrics if m.metric == REPLICATED_UNIQUES), None)
    per_target = attrib.details.get("per_target") if attrib is not None else None
    if not isinstance(per_target, dict) or not per_target:
        return []
    figures = {name: dict(numeric_items(values, TARGET_KEYS)) for name, values in per_target.items()
               if isinstance(values, dict)}
    points = [(name, _number(per_target[name], "Dorig"), _number(per_target[name], "DiSCO")) for name in figures]
    identity = None
    if ident is not None:
        identity = (_number(ident.details, "UiO"), _number(ident.details, "repU"))
    plots.disclosure_figure(out / FIGURE, points, identity, attrib.target)
    names = list(figures)
    lines = ["## Identity and attribute disclosure", "",
             "Percent of the original records (SDMetrics' two figures: 0-1, higher protects more). "
             "Keys: " + ", ".join(code(k) for k in attrib.details.get("keys", []) if isinstance(k, str)) + ".", "",
             f"![Attribute disclosure per target]({FIGURE})", ""]
    if ident is not None:
        items = numeric_items(ident.details, IDENTITY_KEYS)
        lines += ["Identity: " + ", ".join(f"{k} = {v}" for k, v in items), ""]
    lines += ["| per target | " + " | ".join(code(n) for n in names) + " |", "|---|" + "---:|" * len(names)]
    for key in TARGET_KEYS:
        lines.append(f"| {key} | " + " | ".join(figures[n].get(key, "—") for n in names) + " |")
    for check in ("check_1way", "check_2way"):
        cells = [_flag(per_target[n].get(check)) for n in names]
        lines.append(f"| {check} | " + " | ".join(cells) + " |")
    return lines + [""]


def _number(details: object, key: str) -> float:
    value = details.get(key) if isinstance(details, dict) else None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0.0


def _flag(check: object) -> str:
    if not isinstance(check, dict) or not isinstance(check.get("flagged"), bool):
        return "—"
    return "flagged" if check["flagged"] else "no"


METRIC = Metric(
    key="disclosure",
    phase="disclosure",
    check=_check,
    compute=_compute,
    rows=_rows,
    report_keys={REPLICATED_UNIQUES: ("UiO", "UiS", "UiOiS", "repU"), ATTRIBUTE_DISCLOSURE: ()},
    report_section=_report_section,
    figures=(FIGURE,),
)
