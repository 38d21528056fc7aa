"""Estimates inside their brackets against exact Python answers; guarantees as guarantees,
probabilities over seeded trials with tolerances from the trial count."""

import collections
import copy
import math
import pickle
import random

import numpy as np
import pytest

import tidemark


def binomial_upper(n, p, z=4.0):
    """An upper tolerance on the failures among n trials each failing with probability p."""
    return n * p + z * math.sqrt(n * p * (1 - p)) + 1


def test_hll_bracket_covers_truth_at_its_confidence():
    trials, misses = 200, 0
    for seed in range(trials):
        rng = np.random.default_rng(seed)
        n = int(rng.integers(5_000, 50_000))
        h = tidemark.HyperLogLog(10)
        h.update_many(rng.integers(0, 2**62, n))
        e = h.estimate()
        assert e.low <= e.value <= e.high and not e.guaranteed
        misses += not e.contains(n)  # collisions among 2^62 values are negligible at 5e4
    assert misses <= binomial_upper(trials, 1 - 0.95)


def test_hll_exact_while_small_and_merge():
    h = tidemark.HyperLogLog(14)
    h.update_many(["a", "b", "c", "a"])
    e = h.estimate()
    assert e.value == 3 and e.guaranteed and e.method == "exact"
    g = tidemark.HyperLogLog(14)
    g.update_many(["c", "d"])
    assert (h | g).estimate().value == 4
    h.merge(g)
    assert h.estimate().value == 4


def test_hll_merge_refuses_other_hash():
    with pytest.raises(tidemark.MergeError, match="hash"):
        tidemark.HyperLogLog(14).merge(tidemark.HyperLogLog(redis=True))


def test_exp_histogram_bracket_always_holds():
    rng = random.Random(4)
    for window, eps in [(100, 0.5), (1000, 0.1), (5000, 0.05)]:
        h = tidemark.ExpHistogram(window, eps)
        last = collections.deque(maxlen=window)
        bits = [rng.random() < 0.3 for _ in range(20_000)]
        for i in range(0, len(bits), 997):
            chunk = bits[i : i + 997]
            h.update_many(chunk)
            last.extend(chunk)
            e = h.estimate()
            assert e.guaranteed and e.low <= sum(last) <= e.high
            assert abs(e.value - sum(last)) <= eps / 2 * sum(last) + 1


def test_exp_histogram_ticks():
    h = tidemark.ExpHistogram(60, 0.1, time=True)
    ticks = sorted(random.Random(2).randrange(0, 10_000) for _ in range(5000))
    h.update_many(np.array(ticks, dtype=np.uint64))
    now = ticks[-1]
    truth = sum(1 for t in ticks if t > now - 60)
    assert h.estimate().contains(truth)
    with pytest.raises(ValueError, match="tick"):
        h.update(now - 1)


def test_count_min_never_under_and_within_bound():
    rng = np.random.default_rng(8)
    items = rng.zipf(1.3, 200_000) % 10_000
    cm = tidemark.CountMin(epsilon=0.001, delta=0.01)
    cm.update_many(items)
    exact = collections.Counter(items.tolist())
    bound = 0.001 * len(items)
    over = 0
    for x, c in exact.items():
        e = cm.query(x)
        assert e.low <= c <= e.value  # never underestimates; the low end is the truth's floor
        over += e.value - c > bound
    assert over <= binomial_upper(len(exact), 0.01)
    assert cm.total == len(items)


def test_count_min_counts_and_models():
    cm = tidemark.CountMin(0.01, 0.01, model="general")
    cm.update_many(["a", "b"], counts=[5, -3])
    assert cm.total == 2
    cash = tidemark.CountMin(0.01, 0.01)
    with pytest.raises(ValueError, match=r"counts\[1\]"):
        cash.update_many(["a", "b"], counts=[1, -1])
    with pytest.raises(ValueError, match="counts"):
        cash.update_many(["a", "b"], counts=[1])


def test_dyadic_range_and_quantile_against_exact():
    xs = np.random.default_rng(3).integers(0, 2**12, 50_000)
    d = tidemark.DyadicCountMin(epsilon=0.0005, delta=0.01, bits=12)
    d.update_many(xs)
    srt = np.sort(xs)
    for lo, hi in [(0, 100), (1000, 3000), (4000, 4095)]:
        truth = int(((xs >= lo) & (xs <= hi)).sum())
        e = d.range(lo, hi)
        assert e.low <= truth <= e.high
    x, e = d.quantile(0.5)
    rank = int((xs <= x).sum())
    assert abs(rank - 25_000) <= 2 * 12 * 0.0005 * 50_000 + 1


def test_heavy_hitters_and_top_k_find_the_heavy():
    items = ["a"] * 5000 + ["b"] * 3000 + [f"x{i}" for i in range(10_000)]
    random.Random(1).shuffle(items)
    hh = tidemark.HeavyHitters(0.1, epsilon=0.001)
    hh.update_many(items)
    assert {i for i, _ in hh.heavy_hitters()} == {"a", "b"}
    top = tidemark.TopK(2, epsilon=0.001)
    top.update_many(items)
    assert [i for i, _ in top.top()] == ["a", "b"]
    for i, e in top.top():
        assert e.low <= items.count(i) <= e.high


def test_quotient_filter_no_false_negatives_and_rate():
    f = tidemark.QuotientFilter(20_000, 0.01)
    keys = np.arange(20_000)
    f.update_many(keys)
    assert len(f) == 20_000
    assert all(int(k) in f for k in keys[::7])
    probes = range(10**9, 10**9 + 50_000)
    fp = sum(x in f for x in probes)
    assert fp <= binomial_upper(50_000, f.fpr)
    assert f.query(5).value == 1 and f.query(5).contains(1)
    assert f.remove(5) and len(f) == 19_999


def test_quotient_filter_full_raises_capacity_error():
    f = tidemark.QuotientFilter(100, 0.1, reserve=0)
    with pytest.raises(tidemark.CapacityError, match=r"items\["):
        f.update_many(range(100_000))
    assert len(f) > 100


def test_stacked_filter_grows_without_false_negatives():
    s = tidemark.StackedFilter(1000, 0.01)
    s.update_many(range(20_000))
    assert s.layers > 1 and all(i in s for i in range(0, 20_000, 13))


def test_ring_and_sliding_against_exact_windows():
    rng = random.Random(5)
    events = sorted((rng.randrange(0, 100_000), f"u{rng.randrange(3000)}") for _ in range(30_000))
    ticks = [t for t, _ in events]
    items = [i for _, i in events]
    s = tidemark.SlidingHyperLogLog(10_000, precision=12)
    assert s.update_many(items, ticks) == 0
    now = ticks[-1]
    for w in [100, 1000, 10_000]:
        truth = len({i for t, i in events if now - w < t <= now})
        e = s.count(now, w)
        assert e.low <= e.value <= e.high
        assert abs(e.value - truth) <= 5 * 1.04 / 64 * truth + 3
    r = tidemark.RingWindow(10_000, bucket=1000, precision=12)
    assert r.update_many(items, np.array(ticks)) == 0
    # The ring answers whole buckets: those covering (now - W, now].
    start = (now // 1000 - 9) * 1000
    truth = len({i for t, i in events if t >= start})
    e = r.count()
    assert abs(e.value - truth) <= 5 * 1.04 / 64 * truth + 3
    assert not r.update("late", 0)


@pytest.mark.parametrize(
    "make",
    [
        lambda: tidemark.HyperLogLog(12),
        lambda: tidemark.HyperLogLog(redis=True),
        lambda: tidemark.CountMin(0.01, 0.01),
        lambda: tidemark.DyadicCountMin(0.01, 0.01, bits=16),
        lambda: tidemark.QuotientFilter(1000, 0.01, reserve=2),
        lambda: tidemark.StackedFilter(100, 0.01),
        lambda: tidemark.ExpHistogram(100, 0.1),
        lambda: tidemark.RingWindow(600, bucket=60),
        lambda: tidemark.SlidingHyperLogLog(600),
    ],
)
def test_bytes_and_pickle_round_trip(make):
    x = make()
    if isinstance(x, tidemark.ExpHistogram):
        x.update_many([1, 0, 1] * 100)
    elif isinstance(x, (tidemark.RingWindow, tidemark.SlidingHyperLogLog)):
        x.update_many(range(1000), ticks=list(range(1000)))
    else:
        x.update_many(range(1000))
    b = x.to_bytes()
    assert b[:4] == b"TDMK"
    assert type(x).from_bytes(b).to_bytes() == b
    y = pickle.loads(pickle.dumps(x))
    assert type(y) is type(x) and y.to_bytes() == b
    assert type(tidemark.load(b)) is type(x)


def _heavy_stream(seed, n):
    rng = random.Random(seed)
    # Frequencies far apart at the top (no ties to break), a long tail below.
    return [rng.choice("abcd" * 8 + "efgh" * 3) if rng.random() < 0.5 else f"x{rng.randrange(5000)}" for _ in range(n)]


@pytest.mark.parametrize("conservative", [False, True])
def test_heavy_hitters_and_top_k_pickle(conservative):
    """The docs say every summary pickles: the copy answers as the original, now and after
    the same further updates, with the same options."""
    first, more = _heavy_stream(1, 30_000), _heavy_stream(2, 30_000)
    hh = tidemark.HeavyHitters(0.02, epsilon=0.001, conservative=conservative)
    top = tidemark.TopK(5, epsilon=0.001, conservative=conservative)
    for x in (hh, top):
        x.update_many(first)
    hh2, top2 = pickle.loads(pickle.dumps(hh)), pickle.loads(pickle.dumps(top))
    assert type(hh2) is tidemark.HeavyHitters and type(top2) is tidemark.TopK
    for a, b in ((hh, hh2), (top, top2)):
        assert b.sketch.to_bytes() == a.sketch.to_bytes()
        assert repr(b) == repr(a)
        assert b.query("a") == a.query("a") and b.query("x7").high == a.query("x7").high
    assert hh2.phi == hh.phi
    assert hh2.heavy_hitters() and _answers(hh2.heavy_hitters()) == _answers(hh.heavy_hitters())
    assert len(top2.top()) == 5 and _answers(top2.top()) == _answers(top.top())
    assert pickle.dumps(hh2) == pickle.dumps(hh) and pickle.dumps(top2) == pickle.dumps(top)
    for x in (hh, hh2, top, top2):
        x.update_many(more)
    assert _answers(hh2.heavy_hitters()) == _answers(hh.heavy_hitters())
    assert _answers(top2.top()) == _answers(top.top())
    assert copy.deepcopy(top).top()[0][0] == top.top()[0][0]


def _answers(items):
    return [(i, e.value, e.low, e.high, e.bracket) for i, e in items]


def test_heavy_hitters_and_top_k_refuse_impossible_pickled_parts():
    hh = tidemark.HeavyHitters(0.25)
    hh.update_many(["a"] * 10 + ["b"])
    restore, (phi, sketch, candidates, sweep) = hh.__reduce__()
    assert candidates == [b"a"]
    with pytest.raises(ValueError, match="^phi"):
        restore(0.0, sketch, candidates, sweep)
    with pytest.raises(ValueError, match="^next sweep"):
        restore(phi, sketch, [b"c%d" % i for i in range(sweep)], sweep)
    with pytest.raises(tidemark.DecodeError):
        restore(phi, sketch[:-1], candidates, sweep)
    turnstile = tidemark.CountMin(0.001, 0.01, model="turnstile").to_bytes()
    with pytest.raises(ValueError, match="^model"):
        restore(phi, turnstile, candidates, sweep)
    top = tidemark.TopK(2)
    top.update_many(["a"] * 3 + ["b"])
    restore, (k, sketch, held) = top.__reduce__()
    assert held == [(b"a", 3), (b"b", 1)]
    assert _answers(restore(k, sketch, held).top()) == _answers(top.top())
    for bad in ([(b"a", 4)], [(b"a", -1)], [(b"a", 3), (b"a", 3)], [(b"a", 3), (b"b", 1), (b"c", 0)]):
        with pytest.raises(ValueError, match="^held"):
            restore(k, sketch, bad)
    with pytest.raises(ValueError, match="^k"):
        restore(0, sketch, held)


@pytest.mark.parametrize(
    "confidence, text",
    [
        (0.95, "95%"),
        (0.5, "50%"),
        (0.99, "99%"),
        (1 - math.exp(-5), "99.33%"),  # Count-Min at delta = 0.01: d = 5 rows
        (0.995, "99.5%"),
        (0.999, "99.9%"),
        (0.9999996274710392, "99.99996%"),  # a quotient filter's: never shown as 100%
        (0.123456, "12.35%"),
        (0.00001234, "0.001%"),  # never shown as 0%
    ],
)
def test_a_probabilistic_bracket_shows_a_readable_confidence(confidence, text):
    e = tidemark.Estimate(1.0, 0.0, 2.0, confidence=confidence)
    assert e.bracket == f"probabilistic ({text})"
    assert repr(e).endswith(f"bracket='probabilistic ({text})', method='exact')")
    assert str(e) == f"1.0 [0.0, 2.0] probabilistic ({text})"
    assert e.confidence == confidence


def test_sketch_answers_show_readable_confidences():
    cm = tidemark.CountMin(epsilon=0.001, delta=0.01)
    cm.update_many(["a", "a"])
    assert cm.query("a").bracket == "probabilistic (99.33%)"
    f = tidemark.QuotientFilter(1000, 0.01)
    f.update("k")
    assert f.query("k").bracket.startswith("probabilistic (99.") and "%)" in f.query("k").bracket
    assert not f.query("k").bracket.startswith("probabilistic (100")
    h = tidemark.HyperLogLog(12)
    h.update_many(range(100_000))
    assert h.estimate().bracket == "probabilistic (95%)"


def test_estimate_is_a_float_with_a_readable_repr():
    e = tidemark.Estimate(10.0, 9.0, 11.5, confidence=0.95, method="hll-ertl")
    assert float(e) == 10.0 and int(e) == 10 and round(e) == 10
    assert e > 9 and e < 11 and e == 10.0 and e != 3
    assert f"{e:.2f}" == "10.00"
    assert math.isclose(e, 10.0)
    assert np.float64(e) == 10.0
    assert repr(e) == "Estimate(value=10.0, low=9.0, high=11.5, bracket='probabilistic (95%)', method='hll-ertl')"
    assert str(e) == "10.0 [9.0, 11.5] probabilistic (95%)"
    assert e.confidence == 0.95 and not e.guaranteed and e.width == 2.5
    assert 9.5 in e and 12 not in e
    assert pickle.loads(pickle.dumps(e)).__repr__() == repr(e)
    g = tidemark.ExpHistogram(10).estimate()
    assert g.guaranteed and g.bracket == "guaranteed" and g.confidence == 1.0


def test_remaining_methods_against_exact_answers():
    h = tidemark.HyperLogLog(12)
    h.update_many(range(50_000))
    hip = h.estimate_hip()
    assert hip is not None and hip.method == "hll-hip" and abs(hip.value - 50_000) < 0.1 * 50_000
    c = h.copy()
    assert c == h and c.to_bytes() == h.to_bytes() and h.representation == "dense"
    with pytest.raises(ValueError, match="^redis"):
        h.pfcount()
    r = tidemark.HyperLogLog(redis=True)
    r.update_many(range(50_000))
    assert abs(r.pfcount() - 50_000) < 0.05 * 50_000 and r.estimate().value == r.pfcount()

    a = tidemark.CountMin(0.01, 0.01, model="turnstile")
    a.update_many(["x"] * 10 + ["y"] * 5)
    b = tidemark.CountMin(0.01, 0.01, model="turnstile")
    b.update_many(["x"] * 4)
    join = a.inner_product(b)
    assert join.low <= 40 <= join.high
    a.subtract(b)
    assert a.total == 11 and a.query("x").contains(6)

    d = tidemark.DyadicCountMin(0.001, 0.01, bits=10, model="turnstile")
    d.update_many([7] * 100 + [9] * 50 + list(range(100)))
    assert [x for x, _ in d.top(2)] == [7, 9]
    assert {x for x, _ in d.heavy_hitters(0.2)} == {7, 9}
    e = tidemark.DyadicCountMin(0.001, 0.01, bits=10, model="turnstile")
    e.update(7, 5)
    d.merge(e)
    assert d.query(7).contains(106)
    with pytest.raises(ValueError, match="^model"):
        tidemark.DyadicCountMin(bits=10, model="general")

    r1 = tidemark.RingWindow(100, bucket=10, precision=12)
    r2 = tidemark.RingWindow(100, bucket=10, precision=12)
    r1.update_many(["a", "b"], ticks=5)
    r2.update_many(["b", "c"], ticks=5)
    r1.merge(r2)
    assert r1.count().value == 3

    q = tidemark.QuotientFilter(100, 0.01)
    q.update("k")
    assert "k" in q and q.remove("k") and len(q) == 0

    x = tidemark.ExpHistogram(100, 0.1, time=True, interpolate=True)
    x.update_many([1, 2, 3, 50])
    x.advance_to(120)
    assert x.estimate().contains(1) and x.interpolated() is not None and x.now == 120


def test_exaloglog_exact_then_unbiased_and_merges_as_the_union():
    e = tidemark.ExaLogLog(8)
    e.update_many(["a", "b", "c", "a"])
    est = e.estimate()
    assert est.value == 3 and est.guaranteed and e.representation == "exact"
    # 200 seeded trials at n = 20,000, p = 8: σ = 0.318/16 ≈ 2.0% (martingale); the mean of
    # 200 relative errors has standard error σ/√200 ≈ 0.14%: 5 of those bound the bias.
    errors = []
    misses = 0
    for seed in range(200):
        rng = np.random.default_rng(seed)
        s = tidemark.ExaLogLog(8)
        s.update_many(rng.integers(0, 2**62, 20_000), integers="binary")
        got = s.estimate()
        assert got.method == "exaloglog-martingale"
        errors.append(got.value / 20_000 - 1)
        misses += not (got.low <= 20_000 <= got.high)
    assert abs(sum(errors) / len(errors)) < 5 * 0.0199 / math.sqrt(200)
    assert misses <= binomial_upper(200, 1 - 0.95)
    # Merge = the sketch of the union, by bytes; another t is refused.
    a, b, u = tidemark.ExaLogLog(9), tidemark.ExaLogLog(9), tidemark.ExaLogLog(9)
    a.update_many(range(0, 6000))
    b.update_many(range(4000, 9000))
    u.update_many(range(0, 9000))
    merged = a | b
    assert merged.estimate_ml().value == u.estimate_ml().value
    assert merged.estimate().method == "exaloglog-ml"
    with pytest.raises(tidemark.MergeError):
        a.merge(tidemark.ExaLogLog(9, t=1, d=9))
    with pytest.raises(ValueError, match="precision"):
        tidemark.ExaLogLog(19)
    assert pickle.loads(pickle.dumps(merged)) == merged
    assert type(tidemark.load(merged.to_bytes())).__name__ == "ExaLogLog"
