"""tidemark.Store reads what `tidemark run` wrote, with the answers of `tidemark query`."""

import datetime as dt
import json
import random

import pytest

import tidemark

CONFIG = """
[input]
format = "csv"
time_field = "ts"
time_format = "epoch_s"

[[metric]]
name = "fanout"
kind = "distinct"
key = ["src"]
item = ["dst"]
bucket = "1m"
window = "5m"
precision = 10
retention = "1d"

[[metric]]
name = "hits"
kind = "count"
key = ["src"]
bucket = "1m"
window = "5m"
epsilon = 0.05
retention = "1d"

[[metric]]
name = "latency"
kind = "quantile"
key = ["src"]
value = "ms"
bucket = "1m"
window = "5m"
quantiles = [0.5, 0.99]
retention = "1d"
"""


@pytest.fixture(scope="module")
def store_path(tmp_path_factory, cli):
    d = tmp_path_factory.mktemp("store")
    rng = random.Random(2)
    rows = ["ts,src,dst,ms"]
    for i in range(20_000):
        src = f"10.0.0.{rng.randrange(20)}"
        dst = f"d{rng.randrange(2000 if src.endswith('.7') else 50)}"
        ms = round(rng.lognormvariate(3.0, 0.8), 2)
        rows.append(f"{1_700_000_000 + i // 20},{src},{dst},{ms}")
    (d / "flows.csv").write_text("\n".join(rows) + "\n")
    (d / "m.toml").write_text(CONFIG)
    cli("run", "--config", d / "m.toml", "--db", d / "s.db", d / "flows.csv")
    return d / "s.db"


def _cli_rows(cli, db, *args):
    out = cli("query", "--db", db, "--json", *args)
    return [json.loads(line) for line in out.splitlines() if line.strip()]


@pytest.mark.parametrize("metric", ["fanout", "hits"])
def test_store_answers_equal_cli_query(cli, store_path, metric):
    store = tidemark.Store(store_path)
    ans = store.query(metric, window="5m")
    want = _cli_rows(cli, store_path, "--metric", metric, "--window", "5m")
    assert [(r.key, r.estimate.value, r.estimate.low, r.estimate.high, r.partial) for r in ans] == [
        (w["key"], w["estimate"], w["low"], w["high"], w["partial"]) for w in want
    ]
    # The run left its last buckets open (the default): the default window holds them.
    assert all(r.partial for r in ans)
    assert ans.start == want[0]["from"] and ans.end == want[0]["to"]
    top = store.query(metric, window=dt.timedelta(minutes=5), top=3)
    assert [r.key for r in top] == [r.key for r in ans][:3]
    one = store.query(metric, window=300_000, key=ans[0].key)
    assert len(one) == 1 and one[0].estimate.value == ans[0].estimate.value
    at = store.query(metric, window="5m", at=ans.end_ms / 1000)
    assert [r.estimate.value for r in at] == [r.estimate.value for r in ans]


def test_store_quantile_rows_equal_cli_query(cli, store_path):
    store = tidemark.Store(store_path)
    for qs in (None, [0.9], [0.25, 0.5, 0.999]):
        ans = store.query("latency", window="5m", quantiles=qs)
        args = ["--metric", "latency", "--window", "5m"]
        if qs is not None:
            args += ["--quantile", ",".join(str(q) for q in qs)]
        want = _cli_rows(cli, store_path, *args)
        got = [
            (r.key, q, e.value, e.low, e.high, r.events)
            for r in ans
            for q, e in r.parts
        ]
        assert got == [
            (w["key"], w["quantile"], w["estimate"], w["low"], w["high"], w["events"]) for w in want
        ]
        asked = qs or [0.5, 0.99]
        for r in ans:
            assert r.part == "quantile" and list(r.quantiles) == asked and r.items == []
            # A row ranks by its highest quantile.
            assert r.estimate == r.quantiles[max(asked)]
    with pytest.raises(ValueError, match="quantile"):
        store.query("latency", window="5m", quantiles=[1.5])


def test_store_fanout_leader_and_pandas(store_path):
    ans = tidemark.Store(store_path).query("fanout", window="5m", top=1)
    assert ans[0].key == "10.0.0.7"
    pd = pytest.importorskip("pandas")
    df = tidemark.Store(store_path).query("fanout", window="5m").to_pandas()
    assert isinstance(df, pd.DataFrame)
    assert list(df.columns[:4]) == ["metric", "key", "from", "to"]
    assert df["from"].iloc[0] == ans.start and df["to"].iloc[0] == ans.end
    assert df["estimate"].iloc[0] == ans[0].estimate.value
    # A quantile metric: a row per key and quantile, as `tidemark query --json`.
    lat = tidemark.Store(store_path).query("latency", window="5m")
    df = lat.to_pandas()
    assert len(df) == 2 * len(lat)
    assert list(df.columns[:5]) == ["metric", "key", "from", "to", "partial"]
    assert list(df["quantile"].iloc[:2]) == [0.5, 0.99]
    assert df["estimate"].iloc[1] == lat[0].quantiles[0.99].value
    assert df["events"].iloc[0] == lat[0].events


def test_store_errors(store_path, tmp_path):
    store = tidemark.Store(store_path)
    with pytest.raises(ValueError, match="metric"):
        store.query("nope", window="5m")
    with pytest.raises(ValueError, match="window"):
        store.query("fanout", window="90s")
    with pytest.raises(ValueError, match="window"):
        store.query("fanout", window="soon")
    with pytest.raises(ValueError, match="top"):
        store.query("fanout", window="5m", top=0)
    with pytest.raises(ValueError, match="at"):
        store.query("fanout", window="5m", at="yesterday")
    with pytest.raises(FileNotFoundError):
        tidemark.Store(tmp_path / "missing.db")
    (tmp_path / "junk.db").write_bytes(b"not a database" * 100)
    with pytest.raises(OSError):
        tidemark.Store(tmp_path / "junk.db")


def test_store_reads_while_tidemark_run_writes(tmp_path, cli_path):
    """A notebook reads the store while `tidemark run` still holds it open."""
    import subprocess
    import time

    cfg = CONFIG.replace('[input]', '[state]\ncheckpoint = "100ms"\ncheckpoint_records = 500\n\n[input]', 1)
    (tmp_path / "m.toml").write_text(cfg)
    db = tmp_path / "live.db"
    p = subprocess.Popen(
        [cli_path, "run", "--config", str(tmp_path / "m.toml"), "--db", str(db)],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        lines = ["ts,src,dst,ms"] + [
            f"{1_700_000_000 + i},10.0.0.{i % 5},d{i % 97},{i % 13}" for i in range(3000)
        ]
        p.stdin.write(("\n".join(lines) + "\n").encode())
        p.stdin.flush()
        deadline = time.monotonic() + 30
        seen = None
        while time.monotonic() < deadline:
            if db.exists():
                try:
                    seen = tidemark.Store(db).query("hits", window="5m")
                except (OSError, ValueError):
                    seen = None
                if seen is not None and len(seen) > 0:
                    break
            time.sleep(0.1)
        assert p.poll() is None, "tidemark run ended before the read"
        assert seen is not None and len(seen) == 5, "no committed rows read while the run is open"
        assert all(r.estimate.value > 0 for r in seen)
    finally:
        p.stdin.close()
        p.wait(timeout=60)
    assert p.returncode == 0, p.stderr.read().decode()
    final = tidemark.Store(db).query("hits", window="5m")
    assert sorted(r.key for r in final) == [f"10.0.0.{i}" for i in range(5)]
