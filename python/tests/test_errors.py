"""Invalid arguments raise ValueError/TypeError naming the parameter; corrupt bytes raise
tidemark.DecodeError; nothing crashes the interpreter."""

import copy
import pickle
import random

import numpy as np
import pytest

import tidemark


@pytest.mark.parametrize(
    "make, name",
    [
        (lambda: tidemark.HyperLogLog(3), "precision"),
        (lambda: tidemark.HyperLogLog(19), "precision"),
        (lambda: tidemark.HyperLogLog(12, redis=True), "precision"),
        (lambda: tidemark.HyperLogLog(12, confidence=1.0), "confidence"),
        (lambda: tidemark.HyperLogLog(12, confidence=float("nan")), "confidence"),
        (lambda: tidemark.RingWindow(0), "window"),
        (lambda: tidemark.RingWindow(100, bucket=0), "bucket"),
        (lambda: tidemark.RingWindow(100, bucket=101), "bucket"),
        (lambda: tidemark.RingWindow(10**9, bucket=1), "bucket"),
        (lambda: tidemark.RingWindow(100, precision=30), "precision"),
        (lambda: tidemark.SlidingHyperLogLog(0), "window"),
        (lambda: tidemark.SlidingHyperLogLog(2**40), "window"),
        (lambda: tidemark.SlidingHyperLogLog(100, precision=2), "precision"),
        (lambda: tidemark.SlidingHyperLogLog(100, confidence=0), "confidence"),
        (lambda: tidemark.CountMin(epsilon=0), "epsilon"),
        (lambda: tidemark.CountMin(epsilon=1.5), "epsilon"),
        (lambda: tidemark.CountMin(delta=0), "delta"),
        (lambda: tidemark.CountMin(epsilon=1e-12), "epsilon"),
        (lambda: tidemark.CountMin(model="bank"), "model"),
        (lambda: tidemark.CountMin(model="general", conservative=True), "conservative"),
        (lambda: tidemark.DyadicCountMin(bits=0), "bits"),
        (lambda: tidemark.DyadicCountMin(bits=99), "bits"),
        (lambda: tidemark.HeavyHitters(0), "phi"),
        (lambda: tidemark.HeavyHitters(1.5), "phi"),
        (lambda: tidemark.TopK(0), "k"),
        (lambda: tidemark.QuotientFilter(0, 0.01), "capacity"),
        (lambda: tidemark.QuotientFilter(100, 0), "fpr"),
        (lambda: tidemark.QuotientFilter(100, 1.0), "fpr"),
        (lambda: tidemark.QuotientFilter(10**18, 1e-9), None),
        (lambda: tidemark.StackedFilter(100, 2.0), "fpr"),
        (lambda: tidemark.ExpHistogram(0), "window"),
        (lambda: tidemark.ExpHistogram(100, 0), "epsilon"),
        (lambda: tidemark.ExpHistogram(100, 1.0), "epsilon"),
    ],
)
def test_invalid_parameters_raise_value_error_naming_them(make, name):
    with pytest.raises(ValueError) as info:
        make()
    if name is not None:
        assert str(info.value).startswith(name), str(info.value)


@pytest.mark.parametrize(
    "make",
    [
        lambda: tidemark.HyperLogLog(-1),
        lambda: tidemark.CountMin("x"),
        lambda: tidemark.QuotientFilter(-5, 0.1),
        lambda: tidemark.ExpHistogram(2**64),
    ],
)
def test_wrong_types_and_out_of_range_integers_raise(make):
    with pytest.raises((TypeError, ValueError, OverflowError)):
        make()


def test_query_arguments():
    d = tidemark.DyadicCountMin(bits=8)
    d.update_many([1, 2, 3])
    with pytest.raises(ValueError, match="q"):
        d.quantile(0)
    with pytest.raises(ValueError):
        d.query(1000)
    with pytest.raises(ValueError):
        d.range(5, 1)
    with pytest.raises(ValueError, match="items"):
        d.update_many([1, 300])
    with pytest.raises(ValueError, match="items"):
        d.update_many([-1])
    s = tidemark.SlidingHyperLogLog(100)
    s.update("a", 50)
    with pytest.raises(ValueError, match="window"):
        s.count(50, 1000)
    with pytest.raises(ValueError, match="ticks"):
        s.update_many(["a", "b"], [1])
    with pytest.raises(ValueError, match="ticks"):
        s.update_many(["a"], [-1])
    with pytest.raises(TypeError, match="ticks"):
        s.update_many(["a"], [1.5])
    h = tidemark.ExpHistogram(10)
    with pytest.raises(ValueError, match=r"values\[1\]"):
        h.update_many([0, 2])


def _samples():
    hll = tidemark.HyperLogLog(8)
    hll.update_many(range(50))
    dense = tidemark.HyperLogLog(6)
    dense.update_many(range(5000))
    cm = tidemark.CountMin(0.2, 0.1)
    cm.update_many(range(100))
    qf = tidemark.QuotientFilter(50, 0.1)
    qf.update_many(range(40))
    st = tidemark.StackedFilter(10, 0.1)
    st.update_many(range(40))
    eh = tidemark.ExpHistogram(50, 0.5)
    eh.update_many([1, 0] * 40)
    ring = tidemark.RingWindow(40, bucket=10, precision=4)
    ring.update_many(range(40), ticks=list(range(40)))
    sl = tidemark.SlidingHyperLogLog(40, precision=4)
    sl.update_many(range(40), ticks=list(range(40)))
    dy = tidemark.DyadicCountMin(0.3, 0.3, bits=4)
    dy.update_many(range(16))
    return [hll, dense, cm, qf, st, eh, ring, sl, dy]


@pytest.mark.parametrize("sketch", _samples(), ids=lambda s: type(s).__name__)
def test_corrupt_bytes_raise_decode_error(sketch):
    cls = type(sketch)
    good = sketch.to_bytes()
    assert cls.from_bytes(good).to_bytes() == good
    for n in range(len(good)):
        with pytest.raises(tidemark.DecodeError):
            cls.from_bytes(good[:n])
        with pytest.raises(tidemark.DecodeError):
            tidemark.load(good[:n])
    for i in range(len(good)):
        for flip in (0x01, 0x80, 0xFF):
            bad = bytearray(good)
            bad[i] ^= flip
            with pytest.raises(tidemark.DecodeError):
                cls.from_bytes(bytes(bad))
    with pytest.raises(tidemark.DecodeError):
        cls.from_bytes(good + b"\x00")
    rng = random.Random(0)
    for _ in range(300):
        junk = bytes(rng.getrandbits(8) for _ in range(rng.randrange(0, 80)))
        with pytest.raises(tidemark.DecodeError):
            cls.from_bytes(b"TDMK" + junk)


def test_wrong_family_is_decode_error():
    cm = tidemark.CountMin(0.1, 0.1).to_bytes()
    with pytest.raises(tidemark.DecodeError):
        tidemark.HyperLogLog.from_bytes(cm)
    with pytest.raises(TypeError):
        tidemark.HyperLogLog.from_bytes("not bytes")
    assert isinstance(tidemark.DecodeError("x"), ValueError)


def test_corrupt_redis_values_raise_or_load_never_crash():
    h = tidemark.HyperLogLog(redis=True)
    h.update_many(range(3000))
    good = h.to_redis()
    rng = random.Random(1)
    for n in range(0, len(good), max(1, len(good) // 300)):
        with pytest.raises(tidemark.DecodeError):
            tidemark.HyperLogLog.from_redis(good[:n])
    for _ in range(2000):
        bad = bytearray(good)
        for _ in range(rng.randrange(1, 4)):
            bad[rng.randrange(len(bad))] = rng.getrandbits(8)
        try:
            tidemark.HyperLogLog.from_redis(bytes(bad)).estimate()
        except tidemark.DecodeError:
            pass


def test_merges_refuse_incompatible_sketches():
    with pytest.raises(tidemark.MergeError, match="differ"):
        tidemark.CountMin(0.01, 0.01).merge(tidemark.CountMin(0.1, 0.01))
    with pytest.raises(tidemark.MergeError):
        tidemark.DyadicCountMin(bits=8).merge(tidemark.DyadicCountMin(bits=16))
    with pytest.raises(tidemark.MergeError):
        tidemark.RingWindow(100, bucket=10).merge(tidemark.RingWindow(100, bucket=20))
    with pytest.raises(TypeError):
        tidemark.HyperLogLog(12).merge(tidemark.CountMin())
    assert issubclass(tidemark.MergeError, ValueError)


def test_update_many_from_another_thread_is_safe():
    import threading

    h = tidemark.HyperLogLog(12)
    arr = np.arange(200_000)
    errors = []

    def work():
        try:
            h.update_many(arr)
        except RuntimeError as e:  # already borrowed: refused, not raced
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert abs(h.estimate().value - 200_000) < 0.1 * 200_000


def test_sliding_query_before_newest_names_now():
    s = tidemark.SlidingHyperLogLog(100)
    s.update("a", 500)
    with pytest.raises(ValueError, match="^now"):
        s.count(now=10, window=10)


def test_long_lists_go_in_chunks_with_global_indices():
    h = tidemark.HyperLogLog(12)
    items = [str(i) for i in range(600_000)]
    items[500_000] = None
    with pytest.raises(TypeError, match=r"items\[500000\]"):
        h.update_many(items)
    cm = tidemark.CountMin(0.01, 0.01)
    counts = [1] * 600_000
    counts[550_000] = -1
    with pytest.raises(ValueError, match=r"counts\[550000\]"):
        cm.update_many([str(i) for i in range(600_000)], counts=counts)
    assert cm.total == 550_000
    # Ones into a Count-Min: the chunks before a bad item stay counted.
    cm = tidemark.CountMin(0.01, 0.01)
    ones = [str(i) for i in range(600_000)]
    ones[500_000] = 1.5j
    with pytest.raises(TypeError, match=r"items\[500000\]"):
        cm.update_many(ones)
    assert cm.total == 2**18  # the first chunk; the bad item's chunk is not counted
    # A long list (three chunks, copied while the previous is hashed) gives the sketch of
    # item-by-item updates.
    items = [f"u{i}" for i in range(700_000)]
    many, one = tidemark.HyperLogLog(12), tidemark.HyperLogLog(12)
    many.update_many(items)
    for x in items:
        one.update(x)
    assert many.to_bytes() == one.to_bytes()
    t = tuple(str(i) for i in range(300_000))
    a, b = tidemark.HyperLogLog(12), tidemark.HyperLogLog(12)
    a.update_many(t)
    b.update_many(list(t))
    assert a.to_bytes() == b.to_bytes()


class _LookAlikeArray:
    """Not a NumPy array, but with an array interface naming memory it does not own."""

    __array_interface__ = {"typestr": "<u8", "shape": (4,), "data": (8, True), "version": 3}

    def __len__(self):
        return 4

    def __iter__(self):
        return iter([1, 2, 3, 4])


def test_only_numpy_arrays_are_read_in_place():
    # A look-alike (or a subclass) is read as the iterable it is; its interface is not
    # trusted (address 8 would crash the interpreter).
    h = tidemark.HyperLogLog()
    h.update_many(_LookAlikeArray())
    g = tidemark.HyperLogLog()
    g.update_many([1, 2, 3, 4])
    assert h == g
    assert h.estimate().value == 4.0


def test_a_reported_length_is_not_trusted_for_memory():
    # One count for "every item" of a range claiming 2^62 items: a clean error, not a panic
    # or an allocation abort.
    cm = tidemark.CountMin()
    with pytest.raises(ValueError, match="counts"):
        cm.update_many(range(2**62), counts=1)


def test_a_sketch_merges_with_itself_as_with_a_copy():
    # One borrow after the other: merging x into x is merging a copy of x (it raised
    # "Already borrowed").
    h, g = tidemark.HyperLogLog(), tidemark.HyperLogLog()
    h.update_many(range(3000))
    g.update_many(range(3000))
    h.merge(h)
    g.merge(copy.copy(g))
    assert h == g
    e = tidemark.ExaLogLog()
    e.update_many(range(3000))
    f = copy.copy(e)
    e.merge(e)
    f.merge(copy.copy(f))
    assert e == f
    cm = tidemark.CountMin(model="turnstile")
    cm.update_many([1, 2, 2])
    cm.merge(cm)
    assert cm.query(2).value >= 4
    cm.subtract(cm)
    assert cm.total == 0


# Arrivals-window histograms (window 10, k = 2) holding three ones at their last arrivals, in
# valid envelopes (checksums included), whose clocks read 2^64 − 1, 2^62 + 1 and 2^62 (the
# arrivals clock's bound). Built by the core's codec::encode, as in its window_encoding tests.
_CLOCK_AT_END = bytes.fromhex(
    "54444d4b01010001746964656d61726b0d0000003e00000000000000"  # header
    "000a0000000000000002000000"  # arrivals, window 10, k 2
    "ffffffffffffffff" "01"  # now, started
    "0000000000000000" "0000000000000000" "fdffffffffffffff"  # merges, worst, span start
    "01" "03000000"  # one class (size 1) of three buckets
    "fdffffffffffffff" "feffffffffffffff" "ffffffffffffffff"
    "b36209fa35d27bab"  # checksum
)
_CLOCK_PAST_BOUND = bytes.fromhex(
    "54444d4b01010001746964656d61726b0d0000003e00000000000000"  # header
    "000a0000000000000002000000"  # arrivals, window 10, k 2
    "0100000000000040" "01"  # now, started
    "0000000000000000" "0000000000000000" "ffffffffffffff3f"  # merges, worst, span start
    "01" "03000000"  # one class (size 1) of three buckets
    "ffffffffffffff3f" "0000000000000040" "0100000000000040"
    "2198142af624d9fc"  # checksum
)
_CLOCK_AT_BOUND = bytes.fromhex(
    "54444d4b01010001746964656d61726b0d0000003e00000000000000"  # header
    "000a0000000000000002000000"  # arrivals, window 10, k 2
    "0000000000000040" "01"  # now, started
    "0000000000000000" "0000000000000000" "feffffffffffff3f"  # merges, worst, span start
    "01" "03000000"  # one class (size 1) of three buckets
    "feffffffffffff3f" "ffffffffffffff3f" "0000000000000040"
    "9a8447bc960f1599"  # checksum
)


@pytest.mark.parametrize("data", [_CLOCK_AT_END, _CLOCK_PAST_BOUND], ids=["2^64-1", "2^62+1"])
def test_an_arrivals_clock_past_its_bound_is_refused_on_load(data):
    """The next arrival of a histogram whose clock read 2^64 − 1 wrapped it to 0, and the
    object could never be saved again: load refuses the clock, by field and offset."""
    now = int.from_bytes(data[41:49], "little")
    # What load, from_bytes and unpickling each read.
    for read in (tidemark.load, tidemark.ExpHistogram.from_bytes, tidemark._restore):
        with pytest.raises(tidemark.DecodeError) as info:
            read(data)
        assert str(info.value) == (
            f"invalid now at byte 41: expected at most 2^62 (the arrivals clock's bound), got {now}"
        )


def test_an_arrivals_clock_at_its_bound_refuses_the_next_arrival():
    """At the bound the histogram loads, answers, refuses every further arrival (a ValueError
    naming the argument, never a wrap) and saves, pickles and loads as it was."""
    h = tidemark.load(_CLOCK_AT_BOUND)
    assert h.now == 2**62 and not h.time
    assert (h.estimate().low, h.estimate().high) == (3.0, 3.0)
    for value in (1, 0, True):
        with pytest.raises(ValueError, match=r"^value: the arrivals clock has reached its bound"):
            h.update(value)
    with pytest.raises(ValueError, match=r"^values\[0\]: the arrivals clock has reached its bound"):
        h.update_many([0, 1])
    assert h.to_bytes() == _CLOCK_AT_BOUND
    assert pickle.loads(pickle.dumps(h)).to_bytes() == _CLOCK_AT_BOUND
