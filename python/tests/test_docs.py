"""The examples in the docstrings and in docs/python.md run and give what they show."""

import doctest
import importlib.util
import pathlib
import re

import numpy as np
import pytest

import tidemark
import tidemark._store

ROOT = pathlib.Path(__file__).resolve().parents[2]
PYTHON_MD = ROOT / "docs" / "python.md"

OBJECTS = [tidemark, tidemark._store] + [getattr(tidemark, n) for n in tidemark.__all__]


@pytest.mark.parametrize("obj", OBJECTS, ids=lambda o: getattr(o, "__name__", repr(o)))
def test_docstring_examples(obj):
    doc = obj.__doc__ or ""
    test = doctest.DocTestParser().get_doctest(doc, {"tidemark": tidemark}, getattr(obj, "__name__", "?"), None, 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    runner.run(test)
    assert runner.failures == 0, f"{runner.failures} failing example(s) in {obj!r}'s docstring"


def test_every_class_has_an_example():
    for name in ["HyperLogLog", "ExaLogLog", "RingWindow", "SlidingHyperLogLog", "CountMin", "DyadicCountMin",
                 "HeavyHitters", "TopK", "QuotientFilter", "StackedFilter", "ExpHistogram",
                 "Quantiles", "Estimate", "load", "item_bytes"]:
        assert ">>>" in getattr(tidemark, name).__doc__, name


def _sections():
    """docs/python.md's sections by title, each with the line it starts on. Code fences are
    blanked: a closing fence right after an example's output would read as more output."""
    text = PYTHON_MD.read_text(encoding="utf-8")
    text = re.sub(r"^```.*$", "", text, flags=re.M)
    sections, title, start, body = {}, None, 0, []
    for n, line in enumerate(text.splitlines(keepends=True)):
        if line.startswith("## "):
            if title is not None:
                sections[title] = (start, "".join(body))
            title, start, body = line[3:].strip(), n, []
        else:
            body.append(line)
    sections[title] = (start, "".join(body))
    return sections


def _stand_ins():
    """The tour's "your data": lists and arrays of the sizes a reader's would have."""
    rng = np.random.default_rng(11)
    events = 20_000
    return {
        "items": [f"user{u}" for u in rng.integers(0, 5_000, events)],
        "ticks": np.sort(rng.integers(0, 7_200, events)),
        "words": [f"w{w}" for w in rng.zipf(1.3, 50_000) if w < 10**6],
        "keys": [f"10.0.0.{i}" for i in range(256)],
        "latencies_ms": rng.integers(1, 500, 10_000),
    }


def _fanout_store(directory, cli):
    """fanout.db as `tidemark run --config examples/fanout.toml` leaves it: an hour of flows up
    to 2024-03-01T12:00:00Z, one source (10.0.0.7) scanning thousands of destinations."""
    rng = np.random.default_rng(12)
    end = 1_709_294_400
    rows = ["ts,src_ip,dst_ip,dst_port"]
    for i in range(36_000):
        ts = end - 3_600 + i // 10
        src = f"10.0.0.{rng.integers(1, 20)}"
        if src == "10.0.0.7":
            dst, port = f"192.168.{rng.integers(0, 256)}.{rng.integers(0, 256)}", rng.integers(1, 65_536)
        else:
            dst, port = f"172.16.0.{rng.integers(0, 30)}", 443
        rows.append(f"{ts},{src},{dst},{port}")
    (directory / "flows.csv").write_text("\n".join(rows) + "\n")
    cli("run", "--config", ROOT / "examples" / "fanout.toml", "--db", directory / "fanout.db",
        directory / "flows.csv")


def _sections_with_examples():
    return [t for t, (_, body) in _sections().items() if ">>>" in body]


@pytest.mark.parametrize("title", _sections_with_examples())
def test_python_md_examples(title, tmp_path, monkeypatch, request):
    """Every example in docs/python.md, section by section, in a fresh directory, with
    stand-ins for the reader's data (and the store the CLI writes, for the store's section)."""
    monkeypatch.chdir(tmp_path)
    start, body = _sections()[title]
    examples = doctest.DocTestParser().get_examples(body)
    if importlib.util.find_spec("pandas") is None:
        examples = [e for e in examples if "to_pandas" not in e.source]
    if "tidemark.Store(" in body:
        _fanout_store(tmp_path, request.getfixturevalue("cli"))
    # The page imports numpy and tidemark once, in the tour: every section has them.
    globs = {"tidemark": tidemark, "np": np, **_stand_ins()}
    test = doctest.DocTest(examples, globs, f"docs/python.md: {title}", str(PYTHON_MD), start, body)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    runner.run(test)
    assert runner.failures == 0, f"{runner.failures} failing example(s) in docs/python.md, {title!r}"


def test_python_md_code_is_examples():
    """Every Python block of docs/python.md is examples with their output, so that what the
    page shows is what the package prints (the tour once showed a method it no longer had)."""
    text = PYTHON_MD.read_text(encoding="utf-8")
    blocks = re.findall(r"^```python\n(.*?)^```", text, flags=re.M | re.S)
    assert blocks
    for block in blocks:
        code = [line for line in block.splitlines() if line.strip() and not line.startswith("#")]
        assert code and code[0].startswith(">>> "), block
