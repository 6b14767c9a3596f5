"""What a Spark worker runs in a pass over the blocks: both sides' rows, sorted by
block (``scoring.stacked_blocks``), arrive as Arrow batches; they are cut into
(sub-)blocks, one block's slices are buffered at a time, handed to a per-block function
(:mod:`.block_scoring`), and its outputs go back to Spark as Arrow batches, with one
meta row per block in the unsplit pass.

Imported by the workers: numpy, pyarrow and the internal names only, nothing of the
driver's modules.

See docs/metrics.md, Linkage attack: candidates and blocking.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from privacy_eval.linkage import names as N

__all__ = ["BlockFn", "BlockSide", "block_sides", "stream_blocks"]


@dataclass(frozen=True)
class BlockSide:
    """One side of a (sub-)block as arrays: row keys and targets (records x columns)."""

    ids: np.ndarray
    x: np.ndarray

    def __len__(self) -> int:
        return len(self.ids)


#: A per-block function: (originals, synthetic records, candidate pairs of the whole
#: block) -> output columns.
BlockFn = Callable[[BlockSide, BlockSide, float], dict[str, np.ndarray]]
#: Output rows a task buffers before handing them to Spark.
FLUSH_ROWS = 1 << 16


def stream_blocks(
    fn: BlockFn, out_schema: Any, names: Sequence[str], integral_key: bool, split_rows: int | None, flush_rows: int
) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The function ``mapInArrow`` runs: ``fn`` on every (sub-)block of the batches it
    is given, the outputs as batches of the Arrow schema ``out_schema``. With
    ``split_rows``, the unsplit pass (see :class:`_BlockStream`)."""

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        stream = _BlockStream(fn, out_schema, list(names), integral_key, split_rows, flush_rows)
        for batch in batches:
            yield from stream.feed(batch)
        yield from stream.close()

    return run


@dataclass
class _Run:
    """What the rows of one (sub-)block have shown so far, while the stream reads them:
    its sizes, the first check hash, whether another one came (two blocks share the id)
    and whether it is too big for the unsplit pass."""

    key: tuple[int, int]  # (block id, sub-block)
    n_o: int = 0
    n_s: int = 0
    check: int | None = None
    shared: bool = False
    big: bool = False


class _BlockStream:
    """One task: cuts the sorted Arrow batches into (sub-)blocks, buffers one block's
    slices at a time, scores it, and hands out the outputs and meta rows every
    ``flush_rows`` output rows.

    In the unsplit pass (``split_rows`` given) every block also gets one meta row with
    its id and sizes, from which the driver computes the block figures. A block with
    more than ``split_rows`` synthetic records is neither buffered nor scored: its meta
    row marks it big, for a second pass over it, split. An id whose rows carry
    different check hashes belongs to two blocks: it is not scored either, and its meta
    row tells the driver to hash again with another seed.
    """

    _META_NAMES = (N.META, N.M_BLOCK, N.M_NO, N.M_NS)

    def __init__(
        self, fn: BlockFn, out_schema: Any, names: list[str], integral_key: bool, split_rows: int | None, flush_rows: int
    ):
        import pyarrow as pa

        self.pa = pa
        self.fn, self.out_schema, self.names, self.integral_key = fn, out_schema, names, integral_key
        self.split_rows, self.flush_rows = split_rows, flush_rows
        self.unsplit_pass = split_rows is not None
        self.out: list[dict[str, np.ndarray]] = []
        self.out_rows = 0
        self.meta: list[tuple[int, int, int, int]] = []
        self.pending: list[Any] = []  # slices of the current (sub-)block
        self.group: _Run | None = None

    def feed(self, batch: Any) -> Iterator[Any]:
        bid = batch.column(N.BLOCK_ID).to_numpy()
        salt = batch.column(N.SALT).to_numpy() if N.SALT in batch.schema.names else np.zeros_like(bid)
        synthetic = batch.column(N.SIDE).to_numpy()
        check = batch.column(N.CHECK_HASH).to_numpy() if self.unsplit_pass else None
        cuts = np.flatnonzero((bid[1:] != bid[:-1]) | (salt[1:] != salt[:-1])) + 1
        for start, stop in zip([0, *cuts.tolist()], [*cuts.tolist(), len(bid)]):
            key = (int(bid[start]), int(salt[start]))
            if self.group is None or key != self.group.key:
                if self.group is not None:
                    self._finish(self.group)
                    self.pending = []
                    if self.out_rows >= self.flush_rows:
                        yield from self._flushed()
                self.group = _Run(key)
            group = self.group
            n_s = int(synthetic[start:stop].sum())
            group.n_s += n_s
            group.n_o += stop - start - n_s
            if self.unsplit_pass:
                assert check is not None and self.split_rows is not None
                if group.check is None:
                    group.check = int(check[start])
                group.shared = group.shared or bool((check[start:stop] != group.check).any())
                group.big = group.n_s > self.split_rows
            if group.shared or group.big:
                self.pending = []  # not scored: nothing to keep
            else:
                self.pending.append(batch.slice(start, stop - start))

    def close(self) -> Iterator[Any]:
        if self.group is not None:
            self._finish(self.group)
        yield from self._flushed()

    def _finish(self, g: _Run) -> None:
        if g.shared:
            self.meta.append((N.SHARED_ID, g.key[0], g.n_o, g.n_s))
            return
        if not g.n_s:
            return  # nobody attacks these originals
        if g.big:
            self.meta.append((N.BIG_BLOCK, g.key[0], g.n_o, g.n_s))
            return
        o, s, bp = block_sides(self.pa.Table.from_batches(self.pending), self.names, self.integral_key)
        cols = self.fn(o, s, float(len(o)) * float(len(s)) if bp is None else float(bp))
        self.out.append(cols)
        self.out_rows += len(next(iter(cols.values()), ()))
        if self.unsplit_pass:
            self.meta.append((N.SCORED_BLOCK, g.key[0], g.n_o, g.n_s))

    def _flushed(self) -> Iterator[Any]:
        pa, out_schema, meta_names = self.pa, self.out_schema, self._META_NAMES
        if self.out:
            yield pa.RecordBatch.from_arrays([
                pa.nulls(self.out_rows, f.type) if f.name in meta_names
                else pa.array(np.concatenate([c[f.name] for c in self.out]), type=f.type)
                for f in out_schema
            ], schema=out_schema)
        if self.meta:
            columns = dict(zip(meta_names, zip(*self.meta)))
            yield pa.RecordBatch.from_arrays([
                pa.array(columns[f.name], type=f.type) if f.name in meta_names else pa.nulls(len(self.meta), f.type)
                for f in out_schema
            ], schema=out_schema)
        self.out, self.out_rows, self.meta = [], 0, []


def block_sides(table: Any, names: Sequence[str], integral_key: bool) -> tuple[BlockSide, BlockSide, float | None]:
    """A block's originals, its synthetic records, and its pairs if it was split."""
    synthetic = table.column(N.SIDE).to_numpy().astype(bool)
    ids = table.column(N.KEY).to_numpy()
    ids = ids.astype(np.int64) if integral_key else ids.astype(object)
    x = np.column_stack([table.column(c).to_numpy() for c in names]).astype(np.float64, copy=False)
    x = x.reshape(len(ids), len(names))
    first_s = int(np.argmax(synthetic))
    split = N.BLOCK_PAIRS in table.column_names and synthetic[first_s]
    pairs = table.column(N.BLOCK_PAIRS)[first_s].as_py() if split else None
    return BlockSide(ids[~synthetic], x[~synthetic]), BlockSide(ids[synthetic], x[synthetic]), pairs
