"""tidemark: streaming summaries that forget.

Windowed sketches whose every answer is an :class:`Estimate` — a value and a bracket
``[low, high]`` that is guaranteed or holds with a stated confidence — built by the same
Rust library as the ``tidemark`` command line, over the same bytes:

- :class:`ExpHistogram`: ones in a sliding window (DGIM);
- :class:`HyperLogLog` (Redis mode and ``HYLL`` values too), :class:`ExaLogLog` (the same
  answers in about 60% fewer bytes at rest), :class:`RingWindow`, :class:`SlidingHyperLogLog`:
  distinct items, over all time or a window;
- :class:`CountMin`, :class:`DyadicCountMin`, :class:`HeavyHitters`, :class:`TopK`:
  frequencies, ranges, quantiles, heavy hitters;
- :class:`Quantiles`: quantiles of numbers within a relative error (DDSketch), over all time
  or a window;
- :class:`QuotientFilter`, :class:`StackedFilter`: "seen before?";
- :class:`Store`: read what ``tidemark run`` wrote.

Items hash as the bytes the command line reads for them on a line: ``str`` as UTF-8,
``bytes`` as themselves, ``int`` as its decimal text, ``float`` as ``repr``; so the same
data gives the same sketch in Python and on the command line.

>>> import tidemark
>>> h = tidemark.HyperLogLog(12)
>>> h.update_many(["alice", "bob", "alice"])
>>> h.estimate()
Estimate(value=2.0, low=2.0, high=2.0, bracket='guaranteed', method='exact')
"""

from ._tidemark import (
    CapacityError,
    CountMin,
    DecodeError,
    DyadicCountMin,
    Estimate,
    ExaLogLog,
    ExpHistogram,
    HeavyHitters,
    HyperLogLog,
    MergeError,
    Quantiles,
    QuotientFilter,
    RingWindow,
    SlidingHyperLogLog,
    StackedFilter,
    TopK,
    item_bytes,
    load,
)
from ._store import Answer, Row, Store

__all__ = [
    "Answer",
    "CapacityError",
    "CountMin",
    "DecodeError",
    "DyadicCountMin",
    "Estimate",
    "ExaLogLog",
    "ExpHistogram",
    "HeavyHitters",
    "HyperLogLog",
    "MergeError",
    "Quantiles",
    "QuotientFilter",
    "RingWindow",
    "Row",
    "SlidingHyperLogLog",
    "StackedFilter",
    "Store",
    "TopK",
    "item_bytes",
    "load",
]

__version__ = "0.1.0"


def _restore(data: bytes):
    """Unpickles a summary: its envelope, loaded as its class."""
    return load(data)
