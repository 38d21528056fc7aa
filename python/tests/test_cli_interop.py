"""The command line and Python read each other's bytes and give equal answers on the same
items (run by .ci/run with the workspace's `tidemark` binary)."""

import json
import random

import numpy as np
import pytest

import tidemark


def _json(out):
    return [json.loads(line) for line in out.splitlines() if line.strip()]


@pytest.fixture(scope="module")
def words():
    rng = random.Random(11)
    return [f"user-{rng.randrange(30_000)}" for _ in range(50_000)]


def _lines(path, items):
    path.write_text("".join(f"{x}\n" for x in items))
    return path


def test_distinct_p12_equals_cli_exactly_on_strings(cli, tmp_path, words):
    f = _lines(tmp_path / "items.txt", words)
    out = _json(cli("distinct", "--precision", 12, "--json", "--save", tmp_path / "cli.tdmk", f))[0]
    h = tidemark.HyperLogLog(12)
    h.update_many(words)
    e = h.estimate()
    assert (e.value, e.low, e.high) == (out["estimate"], out["low"], out["high"])
    # The same bytes, both ways.
    assert (tmp_path / "cli.tdmk").read_bytes() == h.to_bytes()
    loaded = tidemark.HyperLogLog.from_bytes((tmp_path / "cli.tdmk").read_bytes())
    assert loaded.estimate().value == e.value


def test_distinct_p12_equals_cli_exactly_on_numpy_integers(cli, tmp_path):
    arr = np.random.default_rng(5).integers(-(2**40), 2**40, 100_000)
    f = _lines(tmp_path / "ints.txt", arr.tolist())
    out = _json(cli("distinct", "--precision", 12, "--json", f))[0]
    h = tidemark.HyperLogLog(12)
    h.update_many(arr)
    assert h.estimate().value == out["estimate"]


def test_binary_integers_equal_the_cli_exactly(cli, tmp_path):
    """integers="binary" hashes each integer's eight bytes, as `--binary-integers` does: the
    same bytes from a NumPy int64 array, a uint64 array and a list of ints (negative ones as
    two's complement)."""
    arr = np.random.default_rng(7).integers(-(2**62), 2**62, 200_000)
    f = _lines(tmp_path / "ints.txt", arr.tolist())
    cli("distinct", "--precision", 12, "--binary-integers", "--save", tmp_path / "cli.tdmk", f)
    want = (tmp_path / "cli.tdmk").read_bytes()
    for items in (arr, arr.tolist(), tuple(arr.tolist()), list(arr), arr.astype(np.uint64)):
        h = tidemark.HyperLogLog(12)
        h.update_many(items, integers="binary")
        assert h.to_bytes() == want
    one = tidemark.HyperLogLog(12)
    for x in arr[:1000].tolist():
        one.update(x, integers="binary")
    some = tidemark.HyperLogLog(12)
    some.update_many(arr[:1000], integers="binary")
    assert one.to_bytes() == some.to_bytes()
    # Text and binary are different sketches of the same items.
    text = tidemark.HyperLogLog(12)
    text.update_many(arr[:1000])
    assert text.to_bytes() != some.to_bytes()


def test_binary_integers_refuse_what_is_not_an_integer():
    h = tidemark.HyperLogLog(12)
    with pytest.raises(TypeError, match="integers"):
        h.update_many(np.array([1.5, 2.5]), integers="binary")
    with pytest.raises(TypeError, match="integers"):
        h.update_many(["a", "b"], integers="binary")
    with pytest.raises(TypeError, match="int"):
        h.update("a", integers="binary")
    with pytest.raises(ValueError, match="64"):
        h.update(2**64, integers="binary")
    with pytest.raises(ValueError, match="integers"):
        h.update_many([1], integers="decimal")
    with pytest.raises(TypeError, match=r"items\[1\]"):
        h.update_many((1, True), integers="binary")
    assert h.estimate().value == 0
    # Redis hashes PFADD's text: a Redis-mode sketch takes no binary integers.
    with pytest.raises(ValueError, match="Redis"):
        tidemark.HyperLogLog(redis=True).update_many([1], integers="binary")


def test_distinct_p12_equals_cli_exactly_on_floats(cli, tmp_path):
    arr = np.random.default_rng(6).standard_normal(20_000) * 1e6
    f = _lines(tmp_path / "floats.txt", [repr(x) for x in arr.tolist()])
    out = _json(cli("distinct", "--precision", 12, "--json", f))[0]
    h = tidemark.HyperLogLog(12)
    h.update_many(arr)
    assert h.estimate().value == out["estimate"]


def test_python_sketch_merges_in_the_cli(cli, tmp_path, words):
    a, b = tidemark.HyperLogLog(12), tidemark.HyperLogLog(12)
    a.update_many(words[:30_000])
    b.update_many(words[20_000:])
    (tmp_path / "a.tdmk").write_bytes(a.to_bytes())
    (tmp_path / "b.tdmk").write_bytes(b.to_bytes())
    out = _json(cli("distinct", "--merge", "--json", tmp_path / "a.tdmk", tmp_path / "b.tdmk"))[0]
    a.merge(b)
    assert a.estimate().value == out["estimate"]


def test_redis_mode_values_both_ways(cli, tmp_path, words):
    f = _lines(tmp_path / "items.txt", words[:5000])
    out = _json(cli("distinct", "--redis", "--json", "--save", tmp_path / "v.hyll", f))[0]
    h = tidemark.HyperLogLog(redis=True)
    h.update_many(words[:5000])
    assert h.to_redis() == (tmp_path / "v.hyll").read_bytes()
    assert h.estimate().value == out["estimate"]
    r = tidemark.HyperLogLog.from_redis((tmp_path / "v.hyll").read_bytes())
    assert r.pfcount() == h.pfcount()
    (tmp_path / "py.hyll").write_bytes(h.to_redis())
    back = _json(cli("distinct", "--merge", "--json", tmp_path / "py.hyll"))[0]
    assert back["estimate"] == out["estimate"]


def test_count_min_bytes_and_answers_equal_cli(cli, tmp_path, words):
    f = _lines(tmp_path / "items.txt", words)
    q = words[:5]
    args = ["freq", "--epsilon", 0.001, "--delta", 0.01, "--json", "--save", tmp_path / "cm.tdmk"]
    for x in q:
        args += ["--query", x]
    rows = _json(cli(*args, f))
    cm = tidemark.CountMin(0.001, 0.01)
    cm.update_many(words)
    assert (tmp_path / "cm.tdmk").read_bytes() == cm.to_bytes()
    points = [r for r in rows if r["kind"] == "point"]
    for r in points:
        e = cm.query(r["item"])
        assert (e.value, e.low, e.high) == (r["estimate"], r["low"], r["high"])
    # Python's sketch joined by the CLI.
    (tmp_path / "py.tdmk").write_bytes(cm.to_bytes())
    join = [r for r in _json(cli("freq", "--json", "--join", tmp_path / "py.tdmk", f)) if r["kind"] == "join"][0]
    assert join["estimate"] == cm.inner_product(cm).value


def test_top_and_heavy_equal_cli(cli, tmp_path):
    rng = random.Random(3)
    items = [f"k{min(int(rng.paretovariate(1.2)), 500)}" for _ in range(30_000)]
    f = _lines(tmp_path / "items.txt", items)
    rows = _json(cli("freq", "--epsilon", 0.01, "--heavy", 0.05, "--top", 5, "--json", f))
    hh = tidemark.HeavyHitters(0.05, epsilon=0.01)
    hh.update_many(items)
    top = tidemark.TopK(5, epsilon=0.01)
    top.update_many(items)
    assert [(r["item"], r["estimate"]) for r in rows if r["kind"] == "heavy"] == [
        (i, e.value) for i, e in hh.heavy_hitters()
    ]
    assert [(r["item"], r["estimate"]) for r in rows if r["kind"] == "top"] == [
        (i, e.value) for i, e in top.top()
    ]


def test_dyadic_equal_cli(cli, tmp_path):
    xs = np.random.default_rng(9).integers(0, 1000, 20_000)
    f = _lines(tmp_path / "xs.txt", xs.tolist())
    rows = _json(cli("freq", "--bits", 16, "--range", 100, 199, "--quantile", 0.5, "--json",
                     "--save", tmp_path / "d.tdmk", f))
    d = tidemark.DyadicCountMin(bits=16)
    d.update_many(xs)
    assert (tmp_path / "d.tdmk").read_bytes() == d.to_bytes()
    rng_row = [r for r in rows if r["kind"] == "range"][0]
    assert d.range(100, 199).value == rng_row["estimate"]
    q_row = [r for r in rows if r["kind"] == "quantile"][0]
    assert d.quantile(0.5)[0] == q_row["value"]


@pytest.mark.parametrize("stacked", [False, True])
def test_filters_both_ways(cli, tmp_path, words, stacked):
    f = _lines(tmp_path / "keys.txt", words[:20_000])
    extra = ["--stacked"] if stacked else ["--reserve", 3]
    # --multiset: every line inserted, as update_many does (the CLI's default is a set).
    cli("filter", "build", "--multiset", "--capacity", 5000, "--fpr", 0.01, *extra,
        "--save", tmp_path / "f.qf", f)
    cls = tidemark.StackedFilter if stacked else tidemark.QuotientFilter
    py = cls(5000, 0.01) if stacked else cls(5000, 0.01, reserve=3)
    py.update_many(words[:20_000])
    assert (tmp_path / "f.qf").read_bytes() == py.to_bytes()
    loaded = tidemark.load((tmp_path / "f.qf").read_bytes())
    assert type(loaded) is cls and len(loaded) == len(py)
    (tmp_path / "py.qf").write_bytes(py.to_bytes())
    probe = _lines(tmp_path / "probe.txt", words[15_000:25_000])
    out = _json(cli("filter", "query", "--count", "--json", tmp_path / "py.qf", probe))[0]
    assert out["found"] == sum(x in py for x in words[15_000:25_000])


def test_exaloglog_equals_cli_exactly(cli, tmp_path, words):
    f = _lines(tmp_path / "items.txt", words)
    saved = tmp_path / "e.tdmk"
    out = _json(cli("distinct", "--sketch", "exaloglog", "--precision", 9, "--json", "--save", saved, f))[0]
    e = tidemark.ExaLogLog(9)
    e.update_many(words)
    assert e.to_bytes() == saved.read_bytes()
    assert e.estimate().value == out["estimate"] and out["sketch"] == "exaloglog"
