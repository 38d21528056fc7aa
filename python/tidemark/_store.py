"""The pipeline's store, read-only: ``tidemark.Store(path).query(...)``."""

from __future__ import annotations

import datetime as _dt
import os
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from ._tidemark import (  # type: ignore[import-not-found]  # the compiled extension
    Estimate,
    _format_time,
    _parse_duration,
    _parse_time,
    _Store,
)

Duration = Union[str, int, _dt.timedelta]
When = Union[str, int, float, _dt.datetime]


@dataclass(frozen=True)
class Row:
    """One key's window answer."""

    key: str
    #: The window's answer (what ``top`` ranks by): a count, a distinct count, a frequency
    #: metric's most frequent item's count, a quantile metric's highest quantile asked.
    estimate: Estimate
    buckets: int
    #: The window's labelled answers, under ``part``: a frequency metric's heavy items
    #: (largest first), a quantile metric's quantiles (in the order asked); empty otherwise.
    parts: List[Tuple[Union[str, float], Estimate]] = field(default_factory=list)
    #: What the labels are: ``"item"``, ``"quantile"``, or None for kinds without parts.
    part: Optional[str] = None
    #: The key's events in the window (exact), for a frequency or quantile metric; None
    #: otherwise.
    events: Optional[int] = None
    #: Whether the window holds a bucket still open (a run left it open for more input): the
    #: answer so far, as of that run's last checkpoint.
    partial: bool = False

    @property
    def items(self) -> List[Tuple[str, Estimate]]:
        """A frequency metric's heavy items in the window, largest first (empty otherwise)."""
        return [(str(i), e) for i, e in self.parts] if self.part == "item" else []

    @property
    def quantiles(self) -> Dict[float, Estimate]:
        """A quantile metric's quantiles in the window (empty otherwise)."""
        return {float(q): e for q, e in self.parts} if self.part == "quantile" else {}


@dataclass(frozen=True)
class Answer:
    """The answer to a window query: rows by estimate descending, then key."""

    metric: str
    kind: str
    #: Window start, epoch ms (inclusive).
    start_ms: int
    #: Window end, epoch ms (exclusive).
    end_ms: int
    rows: List[Row]

    @property
    def start(self) -> str:
        """Window start as RFC 3339."""
        return str(_format_time(self.start_ms))

    @property
    def end(self) -> str:
        """Window end as RFC 3339."""
        return str(_format_time(self.end_ms))

    def __iter__(self) -> Iterator[Row]:
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int) -> Row:
        return self.rows[i]

    def to_pandas(self) -> Any:
        """A DataFrame with the columns of ``tidemark query --json``: one row per key (per
        heavy item for a frequency metric). Needs pandas."""
        import pandas as pd  # type: ignore[import-untyped]  # optional

        records: List[Dict[str, Any]] = []
        for r in self.rows:
            # "from" and "to" as the CLI names them (docs/output.md): RFC 3339 strings.
            common: Dict[str, Any] = {
                "metric": self.metric,
                "key": r.key,
                "from": self.start,
                "to": self.end,
                "partial": r.partial,
            }
            counts: Dict[str, Any] = {"buckets": r.buckets}
            if r.events is not None:
                counts = {"events": r.events, "buckets": r.buckets}
            if r.part is not None and r.parts:
                for label, e in r.parts:
                    records.append(dict(common, **{r.part: label}, **_fields(e), **counts))
            else:
                # No label (a sketch naming no item bounds its most frequent one).
                records.append(dict(common, **_fields(r.estimate), **counts))
        return pd.DataFrame.from_records(records)


def _fields(e: Estimate) -> Dict[str, Any]:
    return dict(
        estimate=e.value, low=e.low, high=e.high, confidence=e.confidence, method=e.method
    )


def _window_ms(window: Duration) -> int:
    if isinstance(window, _dt.timedelta):
        ms = round(window.total_seconds() * 1000)
    elif isinstance(window, bool):
        raise TypeError("window: expected a duration like '5m', a timedelta or ms")
    elif isinstance(window, int):
        ms = window
    elif isinstance(window, str):
        return int(_parse_duration(window))
    else:
        raise TypeError(f"window: expected a duration like '5m', a timedelta or ms, got {type(window).__name__}")
    if ms <= 0:
        raise ValueError(f"window: expected a positive duration, got {window!r}")
    return ms


def _at_ms(at: When) -> int:
    if isinstance(at, _dt.datetime):
        if at.tzinfo is None:
            raise ValueError("at: expected an aware datetime (with a tzinfo), got a naive one")
        ms = round(at.timestamp() * 1000)
    elif isinstance(at, str):
        return int(_parse_time(at))
    elif isinstance(at, (int, float)) and not isinstance(at, bool):
        ms = round(at * 1000)
    else:
        raise TypeError(f"at: expected RFC 3339, epoch seconds or a datetime, got {type(at).__name__}")
    if ms < 0:
        raise ValueError(f"at: expected a time after 1970, got {at!r}")
    return ms


class Store:
    """A store written by ``tidemark run``, read-only; a running ``tidemark run`` may hold it.

    >>> import tidemark                                          # doctest: +SKIP
    >>> store = tidemark.Store("fanout.db")                      # doctest: +SKIP
    >>> store.query("fanout", window="5m", top=10).to_pandas()   # doctest: +SKIP
    """

    def __init__(self, path: Union[str, "os.PathLike[str]"]) -> None:
        self._inner = _Store(str(path))

    @property
    def path(self) -> str:
        return str(self._inner.path)

    def query(
        self,
        metric: str,
        window: Duration,
        key: Optional[Union[str, bytes]] = None,
        top: Optional[int] = None,
        at: Optional[When] = None,
        quantiles: Optional[Sequence[float]] = None,
    ) -> Answer:
        """The window of length ``window`` (``"5m"``, a timedelta, or ms; a multiple of the
        metric's bucket width) ending at ``at`` (RFC 3339, epoch seconds or an aware datetime;
        default: the metric's watermark), for one ``key`` (fields joined by ``,``, a value
        holding ``,`` or ``"`` in double quotes, as in CSV) or every key, or the ``top`` keys by
        estimate — as ``tidemark query``. A window reaching before the metric's retention
        horizon starts there (``start_ms`` says so); one wholly before it is a ValueError.
        ``quantiles`` (a quantile metric's): the quantiles each row answers, default the
        metric's ``quantiles``."""
        if key is not None and top is not None:
            raise ValueError("key: not with top (one key, or the top keys)")
        if top is not None and (isinstance(top, bool) or not isinstance(top, int)):
            raise TypeError("top: expected an int")
        if top is not None and top < 1:
            raise ValueError(f"top: expected at least 1, got {top}")
        k = key.encode() if isinstance(key, str) else key
        qs = None if quantiles is None else [float(q) for q in quantiles]
        if qs is not None:
            if not qs or len(qs) > 16:
                raise ValueError(f"quantiles: expected 1 to 16 quantiles, got {len(qs)}")
            bad = [q for q in qs if not 0.0 < q <= 1.0]
            if bad:
                raise ValueError(f"quantiles: expected quantiles in (0, 1], got {bad[0]}")
        kind, part, start, end, rows = self._inner.query(
            metric, _window_ms(window), k, top, None if at is None else _at_ms(at), qs
        )
        return Answer(
            metric=metric,
            kind=kind,
            start_ms=start,
            end_ms=end,
            rows=[
                Row(
                    key=r[0],
                    estimate=r[1],
                    buckets=r[2],
                    parts=r[3],
                    part=part,
                    events=r[4],
                    partial=r[5],
                )
                for r in rows
            ],
        )

    def __repr__(self) -> str:
        return f"Store({self.path!r})"
