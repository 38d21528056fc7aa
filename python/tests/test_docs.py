"""The examples in the docstrings run and give what they show."""

import doctest

import pytest

import tidemark
import tidemark._store

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
                 "Estimate", "load", "item_bytes"]:
        assert ">>>" in getattr(tidemark, name).__doc__, name
