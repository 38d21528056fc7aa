"""tidemark.Quantiles (DDSketch: Masson, Rim, Lee, PVLDB 2019) against exact nearest-rank
quantiles: every answer within alpha and inside its guaranteed bracket, windows against exact
windows, merges against one sketch, bytes against the core's committed vectors and the
command line, invalid input refused."""

import array
import copy
import math
import os
import pathlib
import pickle
import random
import shutil
import socket
import subprocess
import threading
import time

import numpy as np
import pytest

import tidemark

ROOT = pathlib.Path(__file__).resolve().parents[2]
VECTORS = ROOT / "testdata" / "vectors"

#: Quantiles asked everywhere: the extremes, the tails, and a grid.
QS = sorted({0.0, 1e-4, 0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.999, 0.9999, 1.0}
            | {i / 97 for i in range(98)})


def nearest_rank(q, n):
    """The rank the q-quantile is the value of: ceil(q·n) (the product in float), in 1..=n."""
    return min(max(math.ceil(q * n), 1), n)


def exact(sorted_values, q):
    return sorted_values[nearest_rank(q, len(sorted_values)) - 1]


def assert_within(e, truth, alpha, what):
    assert abs(e.value - truth) <= alpha * abs(truth), f"{what}: {e!r} for {truth}"
    assert e.low <= truth <= e.high, f"{what}: bracket [{e.low}, {e.high}] misses {truth}"
    assert e.guaranteed and e.bracket == "guaranteed", what
    assert e.method in ("ddsketch", "exact"), (what, e.method)


def lognormal(n, seed):
    return np.random.default_rng(seed).lognormal(mean=3.0, sigma=1.5, size=n)


def pareto(n, seed):
    return (np.random.default_rng(seed).pareto(1.2, size=n) + 1.0) * 10.0


def bimodal(n, seed):
    """Two modes of opposite signs, six decades apart, with zeros between: every store."""
    rng = np.random.default_rng(seed)
    low = -rng.lognormal(0.0, 0.3, size=n // 2)
    high = rng.normal(1e6, 1e4, size=n - n // 2 - n // 50)
    zeros = np.zeros(n // 50)
    v = np.concatenate([low, high, zeros])
    rng.shuffle(v)
    return v


DATA = {"lognormal": lognormal, "pareto": pareto, "bimodal": bimodal}


# --- accuracy against exact quantiles ---------------------------------------------------


@pytest.mark.parametrize("data", DATA)
@pytest.mark.parametrize("params", [{"alpha": 0.01}, {"alpha": 0.001, "bins": 2**15}, {"alpha": 0.05},
                                    {"schema": 5}, {"schema": 0}])
def test_every_quantile_within_alpha_and_inside_its_bracket(data, params):
    values = DATA[data](200_000, seed=1)
    q = tidemark.Quantiles(**params)
    assert q.update_many(values) == 0
    alpha = q.alpha
    if "alpha" in params:
        assert alpha == params["alpha"] and q.schema is None
    else:
        assert q.schema == params["schema"] and 0 < alpha < 1
    s = np.sort(values)
    n = len(s)
    assert q.count() == n
    for x in QS:
        e = q.quantile(x)
        assert_within(e, exact(s, x), alpha, f"{data} {params} q={x}")
        assert q.quantile_rank(x) == nearest_rank(x, n)
    # quantiles() answers as quantile() does, one by one.
    many = q.quantiles(QS)
    assert [(e.value, e.low, e.high) for e in many] == [
        (e.value, e.low, e.high) for e in (q.quantile(x) for x in QS)]
    assert q.min() == s[0] and q.min().method == "exact"
    assert q.max() == s[-1] and q.max().method == "exact"
    total = q.sum()
    assert total.guaranteed and total.contains(math.fsum(values.tolist()))


@pytest.mark.parametrize("data, bins", [("lognormal", 256), ("pareto", 512), ("bimodal", 64)])
def test_a_collapsed_sketch_says_so_and_its_brackets_still_hold(data, bins):
    """Past `bins` bins a store collapses its lowest: answers there say so and widen their
    bracket down to the minimum; every other answer keeps its alpha bound. (`bins` about half
    of what each data set needs, so that some answers fall on each side.)"""
    values = DATA[data](100_000, seed=4)
    q = tidemark.Quantiles(0.01, bins=bins)
    q.update_many(values)
    s = np.sort(values)
    methods = set()
    for x in QS:
        e = q.quantile(x)
        methods.add(e.method)
        if e.method == "ddsketch-collapsed":
            assert e.guaranteed and e.low <= exact(s, x) <= e.high
        else:
            assert_within(e, exact(s, x), 0.01, f"{data} q={x}")
    assert "ddsketch-collapsed" in methods and "ddsketch" in methods


@pytest.mark.parametrize("data", DATA)
def test_rank_and_cdf_brackets_hold_the_exact_counts(data):
    values = DATA[data](50_000, seed=2)
    q = tidemark.Quantiles(0.01)
    q.update_many(values)
    s = np.sort(values)
    n = len(s)
    probes = np.concatenate([s[:: 997], s[:: 997] * 1.001, [s[0] - 1, s[-1] + 1, 0.0, -np.inf, np.inf]])
    for v in probes.tolist():
        below = int(np.searchsorted(s, v, side="right"))
        r = q.rank(v)
        assert r.guaranteed and r.low <= below <= r.high and r.low <= r.value <= r.high, (v, r, below)
        c = q.cdf(v)
        assert c.guaranteed and c.low <= below / n <= c.high, (v, c, below / n)
    assert q.rank(s[0] - 1) == 0 and q.rank(s[-1]) == n
    assert q.cdf(float("inf")).value == 1.0


def test_inputs_of_every_kind_give_the_sketch_of_their_floats():
    """A list, a tuple, an iterable, NumPy arrays of any width, byte order and stride, object
    arrays and buffers: each is the sketch of float(x) for its items, added one by one."""
    rng = np.random.default_rng(3)
    ints = rng.integers(-(2**62), 2**62, 5_000)
    floats = rng.lognormal(2.0, 2.0, 5_000) * rng.choice([-1.0, 1.0], 5_000)

    def one_by_one(xs):
        q = tidemark.Quantiles(0.01)
        for x in xs:
            assert q.update(float(x)) is True
        return q.to_bytes()

    def batch(xs):
        q = tidemark.Quantiles(0.01)
        assert q.update_many(xs) == 0
        return q.to_bytes()

    want = one_by_one(floats.tolist())
    for xs in (floats, floats.tolist(), tuple(floats.tolist()), iter(floats.tolist()),
               floats.astype(">f8"), floats.astype(object), array.array("d", floats.tolist()),
               memoryview(array.array("d", floats.tolist()))):
        assert batch(xs) == want, type(xs)
    want = one_by_one(ints.tolist())  # past 2^53: rounded to the nearest float, as float(x)
    for xs in (ints, ints.tolist(), ints.astype(">i8"), ints.astype(object)):
        assert batch(xs) == want, type(xs)
    assert batch(ints.astype(np.uint64) & 0xFFFF) == one_by_one((ints.astype(np.uint64) & 0xFFFF).tolist())
    for dtype in (np.int8, np.int16, np.int32, np.uint8, np.uint16, np.uint32, np.float16, np.float32,
                  np.longdouble):
        arr = (floats[:500] % 100).astype(dtype)
        assert batch(arr) == one_by_one(arr.tolist()), dtype
        assert batch(arr[::3]) == one_by_one(arr[::3].tolist()), dtype
    strided = floats[::7]
    assert batch(strided) == one_by_one(strided.tolist())
    assert batch(range(1000)) == one_by_one(range(1000))
    assert batch([]) == tidemark.Quantiles(0.01).to_bytes()
    # Scalars of NumPy, Decimal and Fraction are numbers too.
    from decimal import Decimal
    from fractions import Fraction

    q = tidemark.Quantiles(0.01)
    for x in (np.float32(2.5), np.int64(7), np.uint8(3), Decimal("1.5"), Fraction(1, 3), 10**30):
        assert q.update(x)
    assert q.count() == 6 and q.max() == 1e30


# --- windows ---------------------------------------------------------------------------


def _window_values(accepted, now, window, width):
    last = now // width
    first = max(last - (-(-window // width)) + 1, 0)
    return [v for t, v in accepted if first <= t // width <= last]


def test_windowed_answers_equal_exact_windows():
    """Events with late ones, refused exactly when older than the ring; every window's answers
    within alpha of its exact quantiles and equal to a sketch of exactly its values."""
    width, n = 10, 12
    ring = tidemark.Quantiles(0.01, window=width * n, bucket=width)
    assert (ring.window, ring.bucket, ring.buckets) == (120, 10, 12)
    rng = random.Random(5)
    accepted, newest, refused_model = [], None, 0
    clock = 0
    for chunk in range(40):
        values, ticks, refused_before = [], [], refused_model
        for _ in range(500):
            clock += rng.choice([0, 0, 1, 1, 2])
            late = rng.random() < 0.1
            t = max(clock - rng.randrange(0, 200), 0) if late else clock
            v = rng.lognormvariate(4.0, 1.0) if rng.random() < 0.9 else -rng.lognormvariate(1.0, 0.5)
            values.append(v)
            ticks.append(t)
            b = t // width
            if newest is not None and newest - b >= n:
                refused_model += 1
            else:
                accepted.append((t, v))
                newest = b if newest is None else max(newest, b)
        refused = ring.update_many(np.array(values), np.array(ticks, dtype=np.int64))
        assert refused == refused_model - refused_before
        newest_tick = max(t for t, _ in accepted)
        for now in (newest_tick, newest_tick - 15, newest * width + width - 1, None):
            for window in (120, 100, 35, 10, 1, None):
                w = 120 if window is None else window
                at = newest * width + width - 1 if now is None else now
                k = -(-w // width)
                if at // width - k + 1 < newest - n + 1:
                    continue  # reaches past what the ring still holds
                truth = sorted(_window_values(accepted, at, w, width))
                assert ring.count(now=now, window=window) == len(truth)
                if not truth:
                    with pytest.raises(ValueError, match="^window: no values"):
                        ring.quantile(0.5, now=now, window=window)
                    continue
                plain = tidemark.Quantiles(0.01)
                plain.update_many(truth)
                for x in (0.0, 0.01, 0.25, 0.5, 0.9, 0.99, 1.0):
                    e = ring.quantile(x, now=now, window=window)
                    assert_within(e, exact(truth, x), 0.01, f"now={now} window={window} q={x}")
                    p = plain.quantile(x)
                    assert (e.value, e.low, e.high) == (p.value, p.low, p.high)
                assert ring.min(now=now, window=window) == truth[0]
                assert ring.max(now=now, window=window) == truth[-1]
                assert ring.sum(now=now, window=window).contains(math.fsum(truth))
    assert refused_model > 0  # the stream did reach past the ring


def test_update_one_at_a_time_and_refusal_of_old_ticks():
    ring = tidemark.Quantiles(0.01, window=60, bucket=10)
    assert ring.update(5.0, 100) is True
    assert ring.update(6.0, 50) is True  # bucket 5: the oldest the ring holds
    assert ring.update(7.0, 49) is False  # bucket 4: gone, refused, nothing added
    assert ring.count() == 2
    assert ring.update_many([1.0, 2.0, 3.0], ticks=[0, 55, 200]) == 1
    assert ring.count(now=209) == 1 and ring.count(now=109) == 3
    # One tick for the whole batch.
    assert ring.update_many([1.0, 2.0], ticks=205) == 0
    assert ring.count() == 3
    # The default bucket is a sixtieth of the window, as RingWindow's.
    assert tidemark.Quantiles(window=3600).bucket == 60
    assert tidemark.Quantiles(window=100, bucket=30).window == 120  # whole buckets
    # Ticks to the end of u64: no overflow, no panic.
    edge = tidemark.Quantiles(window=2**64 - 1, bucket=2**63)
    assert edge.update(3.0, 2**64 - 1) and edge.update(4.0, 0)
    assert edge.count() == 2 and edge.quantile(1.0) == 4.0 and edge.count(window=1) == 1


# --- merges ----------------------------------------------------------------------------


@pytest.mark.parametrize("data", DATA)
def test_merge_of_parts_equals_one_sketch(data):
    values = DATA[data](100_000, seed=6)
    whole = tidemark.Quantiles(0.01)
    whole.update_many(values)
    rng = np.random.default_rng(7)
    cuts = np.sort(rng.choice(len(values), 30, replace=False))
    merged = tidemark.Quantiles(0.01)
    for part in np.split(values, cuts):
        p = tidemark.Quantiles(0.01)
        p.update_many(part)
        merged.merge(p)
    assert merged.count() == whole.count()
    for x in QS:
        a, b = merged.quantile(x), whole.quantile(x)
        assert (a.value, a.low, a.high, a.method) == (b.value, b.low, b.high, b.method)
    assert merged.min() == whole.min() and merged.max() == whole.max()
    assert math.isclose(merged.sum().value, whole.sum().value, rel_tol=1e-9, abs_tol=1e-6)


def test_merge_of_integer_parts_is_the_same_bytes():
    """Whole numbers sum exactly in any order: the merge is byte for byte the one sketch."""
    values = np.random.default_rng(8).integers(-10**6, 10**9, 50_000).astype(float)
    whole = tidemark.Quantiles(schema=4)
    whole.update_many(values)
    merged = tidemark.Quantiles(schema=4)
    for part in np.array_split(values, 9):
        p = tidemark.Quantiles(schema=4)
        p.update_many(part)
        merged.merge(p)
    assert merged == whole and merged.to_bytes() == whole.to_bytes()
    # A sketch merges with itself as with a copy of itself.
    twice = whole.copy()
    twice.merge(whole.copy())
    whole.merge(whole)
    assert whole == twice and whole.count() == 100_000


def test_merges_refuse_other_mappings_and_windows():
    a = tidemark.Quantiles(0.01)
    a.update(1.0)
    with pytest.raises(tidemark.MergeError, match="alpha"):
        a.merge(tidemark.Quantiles(0.02))
    with pytest.raises(tidemark.MergeError):
        a.merge(tidemark.Quantiles(schema=5))
    with pytest.raises(tidemark.MergeError):
        a.merge(tidemark.Quantiles(window=60))
    with pytest.raises(NotImplementedError, match="merge"):
        tidemark.Quantiles(window=60).merge(tidemark.Quantiles(window=60))
    with pytest.raises(TypeError):
        a.merge(tidemark.HyperLogLog(12))
    # Other bin limits merge: this sketch's limit is kept.
    b = tidemark.Quantiles(0.01, bins=64)
    b.update_many([2.0, 3.0])
    a.merge(b)
    assert a.count() == 3 and a.bins == 4096


# --- bytes -----------------------------------------------------------------------------


def _recipe(i):
    """The committed vectors' i-th value (crates/tidemark/examples/write_quantile_vectors.rs)."""
    x = float((i * 7_919) % 1_000 + 1) * 0.37
    if i % 97 == 0:
        return 0.0
    if i % 10 == 0:
        return -x
    return x * (1.0 + float(i % 3) * 10.0)


def test_the_cores_committed_vectors_load_and_python_writes_the_same_bytes():
    values = [_recipe(i) for i in range(1, 1001)]
    s = sorted(values)

    cubic = (VECTORS / "ddsketch_cubic_v1.bin").read_bytes()
    loaded = tidemark.Quantiles.from_bytes(cubic)
    assert (loaded.alpha, loaded.schema, loaded.bins, loaded.window) == (0.01, None, 4096, None)
    mine = tidemark.Quantiles(0.01)
    mine.update_many(values)
    assert mine.to_bytes() == cubic and loaded == mine
    for x in QS:
        assert_within(loaded.quantile(x), exact(s, x), 0.01, f"cubic vector q={x}")

    schema = (VECTORS / "ddsketch_schema_v1.bin").read_bytes()
    loaded = tidemark.Quantiles.from_bytes(schema)
    assert (loaded.schema, loaded.bins) == (3, 16)
    mine = tidemark.Quantiles(schema=3, bins=16)
    for v in values:
        mine.update(v)
    assert mine.to_bytes() == schema
    methods = set()
    for x in QS:
        e = loaded.quantile(x)
        assert e.guaranteed and e.contains(exact(s, x))
        methods.add(e.method)
    assert "ddsketch-collapsed" in methods  # 16 bins a store: the lowest collapsed, and say so

    ring = (VECTORS / "quantile_ring_v1.bin").read_bytes()
    loaded = tidemark.Quantiles.from_bytes(ring)
    assert (loaded.alpha, loaded.window, loaded.bucket, loaded.buckets) == (0.02, 60, 10, 6)
    mine = tidemark.Quantiles(0.02, window=60, bucket=10)
    ticks = [max(i - 15, 0) if i % 7 == 0 else i for i in range(100)]
    assert mine.update_many([_recipe(i + 1) for i in range(100)], ticks) == 0
    assert mine.to_bytes() == ring and loaded == mine
    # Buckets 4..=9 hold ticks 40..=99: 60 events less the two moved below by 15 ticks.
    assert loaded.count(now=99, window=60) == 58
    assert type(tidemark.load(ring)) is tidemark.Quantiles


@pytest.mark.parametrize("make", [
    lambda: tidemark.Quantiles(0.01),
    lambda: tidemark.Quantiles(schema=2, bins=8),
    lambda: tidemark.Quantiles(0.05, window=100, bucket=10),
])
def test_bytes_pickle_and_copies_round_trip_with_equal_answers(make):
    q = make()
    values = bimodal(3_000, seed=9)
    if q.window is None:
        q.update_many(values)
        query = {}
    else:
        q.update_many(values, np.arange(3_000) // 10)
        query = {"now": 299, "window": 60}
    for other in (tidemark.Quantiles.from_bytes(q.to_bytes()), tidemark.load(q.to_bytes()),
                  pickle.loads(pickle.dumps(q)), copy.deepcopy(q), q.copy(),
                  tidemark.Quantiles.from_bytes(bytearray(q.to_bytes()))):
        assert type(other) is tidemark.Quantiles and other == q
        assert other.to_bytes() == q.to_bytes()
        assert other.count(**query) == q.count(**query)
        for x in (0.0, 0.1, 0.5, 0.99, 1.0):
            assert other.quantile(x, **query) == q.quantile(x, **query)
            assert repr(other.quantile(x, **query)) == repr(q.quantile(x, **query))
        assert repr(other) == repr(q)
    assert q != tidemark.Quantiles(0.3)


@pytest.mark.parametrize("make", [
    lambda: tidemark.Quantiles(0.05),
    lambda: tidemark.Quantiles(schema=1, bins=4),
    lambda: tidemark.Quantiles(0.1, window=30, bucket=10),
])
def test_corrupt_bytes_raise_decode_error(make):
    q = make()
    values = [1.5, -2.0, 0.0, 300.0, 7e-5, 12.0]
    if q.window is None:
        q.update_many(values)
    else:
        q.update_many(values, [1, 2, 13, 14, 25, 26])
    good = q.to_bytes()
    assert tidemark.Quantiles.from_bytes(good) == q
    for n in range(len(good)):
        with pytest.raises(tidemark.DecodeError):
            tidemark.Quantiles.from_bytes(good[:n])
        with pytest.raises(tidemark.DecodeError):
            tidemark.load(good[:n])
    for i in range(len(good)):
        for flip in (0x01, 0x80, 0xFF):
            bad = bytearray(good)
            bad[i] ^= flip
            with pytest.raises(tidemark.DecodeError):
                tidemark.Quantiles.from_bytes(bytes(bad))
    with pytest.raises(tidemark.DecodeError):
        tidemark.Quantiles.from_bytes(good + b"\x00")
    with pytest.raises(tidemark.DecodeError, match="DDSketch.*HyperLogLog"):
        tidemark.Quantiles.from_bytes(tidemark.HyperLogLog(12).to_bytes())
    with pytest.raises(TypeError):
        tidemark.Quantiles.from_bytes("not bytes")


# --- the command line ------------------------------------------------------------------


@pytest.fixture(scope="module")
def quantile_cli(cli_path):
    """The CLI, if it has `tidemark quantile`; the tests skip, saying so, until it does."""
    p = subprocess.run([cli_path, "quantile", "--help"], capture_output=True, check=False)
    if p.returncode != 0:
        pytest.skip("the tidemark binary has no `quantile` command yet: the CLI interop of "
                    "Quantiles is untested")
    return cli_path


def _cli_json(exe, *args):
    import json

    p = subprocess.run([exe, "quantile", *map(str, args)], capture_output=True, check=False)
    assert p.returncode == 0, p.stderr.decode()
    return [json.loads(line) for line in p.stdout.decode().splitlines() if line.strip()]


@pytest.mark.parametrize("flags, params", [(["--alpha", 0.01], {"alpha": 0.01}),
                                           (["--schema", 3, "--bins", 64], {"schema": 3, "bins": 64})])
def test_cli_saves_the_same_bytes_and_answers(quantile_cli, tmp_path, flags, params):
    values = bimodal(20_000, seed=10)
    f = tmp_path / "values.txt"
    f.write_text("".join(f"{v!r}\n" for v in values.tolist()))
    saved = tmp_path / "cli.tdmk"
    rows = _cli_json(quantile_cli, *flags, "--json", "--quantile", "0,0.5,0.9,0.99,1", "--save", saved, f)
    q = tidemark.Quantiles(**params)
    q.update_many(values)
    assert saved.read_bytes() == q.to_bytes()
    assert tidemark.Quantiles.from_bytes(saved.read_bytes()) == q
    for row in rows:
        e = q.quantile(row["quantile"])
        assert (e.value, e.low, e.high, e.method) == (row["estimate"], row["low"], row["high"], row["method"])
        assert row["rank"] == q.quantile_rank(row["quantile"]) and row["count"] == q.count()
    # Python's bytes in the command line: the same answers.
    (tmp_path / "py.tdmk").write_bytes(q.to_bytes())
    again = _cli_json(quantile_cli, "--merge", "--json", "--quantile", "0,0.5,0.9,0.99,1", tmp_path / "py.tdmk")
    assert again == rows


# --- the Redis module ------------------------------------------------------------------


@pytest.fixture(scope="module")
def redis_client(tmp_path_factory):
    """A redis-server with the module loaded ($TIDEMARK_MODULE, else target/debug); the tests
    skip, saying so, without redis-server, redis-py, the module or its quantile type."""
    redis = pytest.importorskip("redis")
    module = pathlib.Path(os.environ.get("TIDEMARK_MODULE")
                          or pathlib.Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
                          / "debug" / "libtidemark_redis.so")
    if shutil.which("redis-server") is None or not module.exists():
        pytest.skip(f"redis-server or the Redis module ({module}) is missing: the Redis interop "
                    "of Quantiles is untested")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    directory = tmp_path_factory.mktemp("redis")
    log = open(directory / "redis.log", "w")
    proc = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--loadmodule", str(module),
         "--dir", str(directory), "--save", "", "--appendonly", "no"],
        stdout=log, stderr=subprocess.STDOUT)
    try:
        client = redis.Redis(port=port)
        deadline = time.time() + 20
        while True:
            try:
                client.ping()
                break
            except redis.ConnectionError:
                if time.time() > deadline or proc.poll() is not None:
                    pytest.fail(f"redis-server did not start: see {directory / 'redis.log'}")
                time.sleep(0.05)
        try:
            client.execute_command("TMQUANTILE.CREATE", "probe", "WINDOW", 60_000)
        except redis.ResponseError as e:
            pytest.skip(f"the Redis module has no quantile type ({e}): the Redis interop of "
                        "Quantiles is untested")
        yield client
    finally:
        proc.kill()
        proc.wait()
        log.close()


def _redis_answer(reply):
    return None if reply is None else tuple(float(x) for x in reply)


def test_redis_module_dumps_and_loads_the_same_bytes(redis_client):
    """A quantile key fed the same values at the same times is Python's windowed Quantiles,
    byte for byte (TM.DUMP), and Python's bytes loaded into a key (TM.LOAD) answer as Python."""
    rng = random.Random(13)
    events, t = [], 1_796_168_400_000
    for _ in range(4_000):
        t += rng.choice([0, 0, 7, 31, 250])
        late = t - rng.randrange(0, 40_000) if rng.random() < 0.05 else t
        events.append((late, rng.lognormvariate(3.0, 1.2) * rng.choice([1, 1, 1, -1])))
    q = tidemark.Quantiles(0.01, window=60_000, bucket=10_000)
    assert q.update_many([v for _, v in events], [t for t, _ in events]) == 0
    r = redis_client
    r.execute_command("TMQUANTILE.CREATE", "lat", "WINDOW", 60_000, "BUCKET", 10_000)
    i = 0
    while i < len(events):  # one ADD per run of equal times, in order
        j = i
        while j < len(events) and events[j][0] == events[i][0]:
            j += 1
        r.execute_command("TMQUANTILE.ADD", "lat", events[i][0], *(repr(v) for _, v in events[i:j]))
        i = j
    assert r.execute_command("TM.DUMP", "lat") == q.to_bytes()
    assert tidemark.Quantiles.from_bytes(r.execute_command("TM.DUMP", "lat")) == q

    other = tidemark.Quantiles(schema=4, bins=512, window=60_000, bucket=10_000)
    other.update_many(pareto(5_000, seed=14), np.arange(5_000, dtype=np.int64) * 17 + t)
    r.execute_command("TM.LOAD", "py", other.to_bytes())
    assert r.execute_command("TM.DUMP", "py") == other.to_bytes()
    qs = [0.0, 0.01, 0.5, 0.9, 0.99, 1.0]
    newest = {"lat": max(t for t, _ in events), "py": 4_999 * 17 + t}
    for key, mine in (("lat", q), ("py", other)):
        replies = r.execute_command("TMQUANTILE.QUANTILE", key, *qs)
        for x, reply in zip(qs, replies):
            e = mine.quantile(x)
            assert _redis_answer(reply) == (e.value, e.low, e.high), (key, x)
        at, window = newest[key] + 12_000, 30_000
        replies = r.execute_command("TMQUANTILE.QUANTILE", key, *qs, "WINDOW", window, "AT", at)
        for x, reply in zip(qs, replies):
            e = mine.quantile(x, now=at, window=window)
            assert _redis_answer(reply) == (e.value, e.low, e.high), (key, x, "window")
        for v in (-10.0, 0.0, 20.0, 1e4):
            c = mine.cdf(v)
            assert _redis_answer(r.execute_command("TMQUANTILE.CDF", key, v)) == (c.value, c.low, c.high)


# --- errors ----------------------------------------------------------------------------


@pytest.mark.parametrize("kwargs, name", [
    ({"alpha": 0}, "alpha"),
    ({"alpha": 1}, "alpha"),
    ({"alpha": -0.1}, "alpha"),
    ({"alpha": 1e-12}, "alpha"),
    ({"alpha": float("nan")}, "alpha"),
    ({"bins": 0}, "bins"),
    ({"bins": 2**40}, "bins"),
    ({"alpha": 0.01, "schema": 5}, "schema"),
    ({"schema": 9}, "schema"),
    ({"schema": -5}, "schema"),
    ({"schema": 2**40}, "schema"),
    ({"window": 0}, "window"),
    ({"window": 100, "bucket": 0}, "bucket"),
    ({"window": 100, "bucket": 101}, "bucket"),
    ({"window": 10**9, "bucket": 1}, "bucket"),
    ({"bucket": 10}, "bucket"),
])
def test_invalid_parameters_raise_value_error_naming_them(kwargs, name):
    with pytest.raises(ValueError) as info:
        tidemark.Quantiles(**kwargs)
    assert str(info.value).startswith(name), str(info.value)


def test_integers_past_64_bits_raise():
    for kwargs in ({"schema": 2**70}, {"bins": 2**64}, {"bins": -1}, {"window": -5}):
        with pytest.raises((ValueError, OverflowError)):
            tidemark.Quantiles(**kwargs)


def test_refused_values_name_their_index_and_add_nothing():
    q = tidemark.Quantiles(0.01)
    q.update_many([1.0, 2.0, 3.0])
    before = q.to_bytes()
    for bad, name, exc in [
        ([1.0, float("nan")], r"values\[1\]: expected a finite number, got nan", ValueError),
        (np.array([1.0, 2.0, np.inf]), r"values\[2\]: expected a finite number, got inf", ValueError),
        (np.array([-np.inf], dtype=np.float32), r"values\[0\]: .*-inf", ValueError),
        ([1.0, True], r"values\[1\]: expected a number .*got bool", TypeError),
        ([1.0, "2"], r"values\[1\]: expected a number .*got str", TypeError),
        ([None], r"values\[0\]", TypeError),
        ([1, 2**2000], r"values\[1\]: an int beyond the range of a float", ValueError),
        (np.array([1 + 2j]), r"values: expected numbers", TypeError),
        (np.array([True, False]), r"values: .*booleans", TypeError),
        (np.array(["1.5"]), r"values: expected numbers", TypeError),
        (np.ma.masked_array([1.0, 2.0], mask=[1, 0]), r"values: a masked array is not read", TypeError),
        (np.ones((2, 2)), r"values: expected a one-dimensional array", ValueError),
        ("123", r"values: expected a sequence of numbers, got one str", TypeError),
        (1.5, r"values: expected a sequence of numbers, got one float", TypeError),
        (object(), r"values: expected a list", TypeError),
    ]:
        with pytest.raises(exc, match=name):
            q.update_many(bad)
        assert q.to_bytes() == before, bad
    # A NaN late in a long batch: nothing of the batch is added either.
    long = np.arange(1.0, 1_000_001.0)
    long[999_999] = np.nan
    with pytest.raises(ValueError, match=r"values\[999999\]"):
        q.update_many(long)
    with pytest.raises(ValueError, match=r"values\[999999\]"):
        q.update_many(long.tolist())
    assert q.to_bytes() == before
    ring = tidemark.Quantiles(window=100, bucket=10)
    with pytest.raises(ValueError, match=r"values\[1\]"):
        ring.update_many([1.0, float("nan")], [1, 2])
    assert ring.count() == 0 and ring.to_bytes() == tidemark.Quantiles(window=100, bucket=10).to_bytes()
    for bad, exc, match in [(float("nan"), ValueError, "^value: expected a finite number, got nan"),
                            (float("-inf"), ValueError, "^value: .*-inf"),
                            (True, TypeError, "^value: .*bool"), ("1", TypeError, "^value"),
                            (np.bool_(True), TypeError, "^value"), (np.complex64(1), TypeError, "^value")]:
        with pytest.raises(exc, match=match):
            q.update(bad)
    assert q.to_bytes() == before


def test_ticks_are_needed_exactly_with_a_window():
    q = tidemark.Quantiles(0.01)
    ring = tidemark.Quantiles(0.01, window=100, bucket=10)
    with pytest.raises(TypeError, match="^tick"):
        q.update(1.0, 5)
    with pytest.raises(TypeError, match="^ticks"):
        q.update_many([1.0], [5])
    with pytest.raises(TypeError, match="^tick"):
        ring.update(1.0)
    with pytest.raises(TypeError, match="^ticks"):
        ring.update_many([1.0])
    with pytest.raises(ValueError, match="^ticks: expected 2 values"):
        ring.update_many([1.0, 2.0], [1])
    with pytest.raises(ValueError, match="^ticks: expected 2 values"):
        ring.update_many([1.0, 2.0], np.array([1, 2, 3]))
    with pytest.raises(ValueError, match=r"^ticks\[1\]"):
        ring.update_many([1.0, 2.0], [1, -1])
    with pytest.raises(ValueError, match=r"^ticks\[1\]"):
        ring.update_many([1.0, 2.0], np.array([1, -1]))
    with pytest.raises(ValueError, match="^ticks"):
        ring.update_many([1.0, 2.0], -3)
    with pytest.raises(TypeError, match="^ticks"):
        ring.update_many([1.0, 2.0], np.array([1.0, 2.0]))
    with pytest.raises(TypeError, match="^ticks"):
        ring.update_many([1.0, 2.0], [1, 1.5])
    with pytest.raises(TypeError, match="^ticks"):
        ring.update_many([1.0], np.ma.masked_array([1], mask=[1]))
    with pytest.raises((ValueError, OverflowError)):
        ring.update(1.0, -1)
    assert ring.count() == 0
    # Ticks of any integer dtype, in place or copied.
    for ticks in (np.array([3, 4], dtype=np.uint64), np.array([3, 4], dtype=np.int32),
                  np.array([3, 4, 5, 6])[::2] + np.array([0, -1]), (3, 4), iter([3, 4])):
        r = tidemark.Quantiles(0.01, window=100, bucket=10)
        assert r.update_many([1.0, 2.0], ticks) == 0 and r.count() == 2


def test_query_arguments():
    q = tidemark.Quantiles(0.01)
    with pytest.raises(ValueError, match="^no values"):
        q.quantile(0.5)
    with pytest.raises(ValueError, match="^no values"):
        q.quantile_rank(0.5)
    with pytest.raises(ValueError, match="^no values"):
        q.min()
    with pytest.raises(ValueError, match="^no values"):
        q.cdf(1.0)
    assert q.count() == 0 and q.sum() == 0 and q.rank(1.0) == 0
    q.update_many([1.0, 2.0, 3.0])
    for bad in (-0.1, 1.5, float("nan")):
        with pytest.raises(ValueError, match="^q: expected a quantile in"):
            q.quantile(bad)
        with pytest.raises(ValueError, match="^q:"):
            q.quantile_rank(bad)
    with pytest.raises(ValueError, match=r"^qs\[1\]"):
        q.quantiles([0.5, 2.0])
    with pytest.raises(TypeError, match="^qs"):
        q.quantiles(0.5)
    assert q.quantiles(np.array([0.5, 1.0]))[1] == 3.0
    assert q.quantiles([]) == []
    with pytest.raises(ValueError, match="^value: expected a number, got nan"):
        q.cdf(float("nan"))
    with pytest.raises(ValueError, match="^value: expected a number, got nan"):
        q.rank(float("nan"))
    with pytest.raises(TypeError, match="^value"):
        q.rank("1")
    with pytest.raises(TypeError, match="^window: a Quantiles without a window"):
        q.quantile(0.5, window=10)
    with pytest.raises(TypeError, match="^now"):
        q.count(now=10)
    ring = tidemark.Quantiles(0.01, window=100, bucket=10)
    ring.update(1.0, 5)
    for window in (0, 101, 10**6):
        with pytest.raises(ValueError, match="^window: expected 1..=100 ticks"):
            ring.quantile(0.5, window=window)
    with pytest.raises(ValueError, match=r"^window: no values in ticks 1000\.\.=1009"):
        ring.quantile(0.5, now=1005, window=10)
    assert ring.count(now=1005) == 0 and ring.rank(3.0, now=1005) == 0


# --- threads and the GIL ---------------------------------------------------------------


@pytest.mark.parametrize("windowed", [False, True])
def test_update_many_releases_the_gil(windowed):
    """While a batch is added, another thread runs: it finds the sketch busy (a query raises
    RuntimeError), which it could not if the batch held the GIL."""
    q = tidemark.Quantiles(0.01, window=100) if windowed else tidemark.Quantiles(0.01)
    values = lognormal(4_000_000, seed=11)
    ticks = np.zeros(len(values), dtype=np.int64)
    args = (values, ticks) if windowed else (values,)
    busy, added = False, 0
    for _ in range(5):
        done = threading.Event()

        def work():
            q.update_many(*args)
            done.set()

        t = threading.Thread(target=work)
        t.start()
        while not done.is_set():
            try:
                q.count()
            except RuntimeError as e:
                assert "Already" in str(e)
                busy = True
                break
        t.join()
        added += len(values)
        if busy:
            break
    assert busy
    assert q.count() == added


def test_update_many_from_several_threads_is_safe():
    q = tidemark.Quantiles(0.01)
    values = pareto(300_000, seed=12)
    ok, errors = [], []

    def work():
        try:
            q.update_many(values)
            ok.append(1)
        except RuntimeError as e:  # already borrowed: refused, not raced
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(ok) + len(errors) == 4 and ok
    assert q.count() == len(ok) * len(values)
    s = np.sort(values)
    assert_within(q.quantile(0.99), exact(s, 0.99), 0.01, "after threads")
