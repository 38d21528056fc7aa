"""Items hash as the bytes the command line reads for them: str as UTF-8, int as decimal
text, float as repr; a NumPy array or buffer hashes exactly as its tolist()."""

import array
import random
import struct

import numpy as np
import pytest

import tidemark


@pytest.mark.parametrize(
    "item, expected",
    [
        ("alice", b"alice"),
        ("é🦀", "é🦀".encode()),
        ("", b""),
        (b"\x00\xff", b"\x00\xff"),
        (bytearray(b"ab"), b"ab"),
        (42, b"42"),
        (-7, b"-7"),
        (2**64 + 1, str(2**64 + 1).encode()),
        (-(2**70), str(-(2**70)).encode()),
        (True, b"True"),
        (0.1, b"0.1"),
        (1e16, b"1e+16"),
        (1e15, b"1000000000000000.0"),
        (1e-5, b"1e-05"),
        (0.0001, b"0.0001"),
        (-0.0, b"-0.0"),
        (float("inf"), b"inf"),
        (float("nan"), b"nan"),
        (5e-324, b"5e-324"),
        (np.int64(5), b"5"),
    ],
)
def test_item_bytes(item, expected):
    assert tidemark.item_bytes(item) == expected


def test_float_text_is_repr_over_random_doubles():
    rng = random.Random(7)
    for i in range(100_000):
        if i % 2:
            x = struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0]
        else:
            x = rng.uniform(-1, 1) * 10.0 ** rng.randint(-30, 30)
        assert tidemark.item_bytes(x) == repr(x).encode(), x


def test_unsupported_item_is_type_error():
    with pytest.raises(TypeError, match="item"):
        tidemark.item_bytes(object())
    h = tidemark.HyperLogLog(12)
    with pytest.raises(TypeError, match=r"items\[1\]"):
        h.update_many(["a", None])
    with pytest.raises(TypeError):
        h.update_many("abc")
    with pytest.raises(TypeError):
        h.update_many(5)


def _same(batch, items):
    a = tidemark.HyperLogLog(12)
    a.update_many(batch() if callable(batch) else batch)
    b = tidemark.HyperLogLog(12)
    for x in items:
        b.update(x)
    assert a.to_bytes() == b.to_bytes()
    c = tidemark.CountMin(0.01, 0.01)
    c.update_many(batch() if callable(batch) else batch)
    d = tidemark.CountMin(0.01, 0.01)
    for x in items:
        d.update(x)
    assert c.to_bytes() == d.to_bytes()


@pytest.mark.parametrize(
    "dtype", ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", ">i8", "<u4"]
)
def test_numpy_integers_hash_as_tolist(dtype):
    info = np.iinfo(np.dtype(dtype))
    rng = np.random.default_rng(1)
    arr = rng.integers(info.min, info.max, size=3000, dtype=np.dtype(dtype).newbyteorder("="), endpoint=True).astype(dtype)
    arr[:2] = [info.min, info.max]
    _same(arr, arr.tolist())


@pytest.mark.parametrize("dtype", ["float64", "float32", ">f8"])
def test_numpy_floats_hash_as_tolist(dtype):
    rng = np.random.default_rng(2)
    arr = (rng.standard_normal(3000) * 10.0 ** rng.integers(-20, 20, 3000)).astype(dtype)
    arr[:4] = [0.0, -0.0, np.inf, np.nan]
    _same(arr, arr.tolist())


def test_numpy_bytes_text_bool_object():
    s = np.array([b"a", b"bb", b"", b"c\x00d"], dtype="S4")
    _same(s, s.tolist())
    u = np.array(["a", "é🦀", "", "xyz"], dtype="U3")
    _same(u, u.tolist())
    b = np.array([True, False, True])
    _same(b, b.tolist())
    o = np.array(["x", 1, 2.5], dtype=object)
    _same(o, o.tolist())


def test_buffers_and_iterables():
    a = array.array("q", [1, 2, 3, -4])
    _same(a, a.tolist())
    a = array.array("d", [0.5, 1e300])
    _same(a, a.tolist())
    _same(memoryview(bytearray(b"xyz")), list(b"xyz"))
    _same(range(100), list(range(100)))
    _same(lambda: (str(i) for i in range(10)), [str(i) for i in range(10)])
    _same(("a", "b"), ["a", "b"])


def test_two_dimensional_arrays_refused():
    with pytest.raises(ValueError, match="one-dimensional"):
        tidemark.HyperLogLog(12).update_many(np.zeros((2, 2), dtype=np.int64))


def test_unsupported_dtype_refused():
    with pytest.raises(TypeError, match="not supported"):
        tidemark.HyperLogLog(12).update_many(np.zeros(3, dtype=np.complex128))


def test_lone_surrogates_raise_not_crash():
    h = tidemark.HyperLogLog(12)
    with pytest.raises((UnicodeEncodeError, TypeError)):
        h.update("\ud800")
    # A value error (not encodable), named by its index.
    with pytest.raises(ValueError, match=r"items\[1\]"):
        h.update_many(["ok", "\udfff"])
    assert h.estimate().value == 0


def test_non_ascii_strings_in_a_list_hash_as_utf8():
    words = ["é", "日本語", "🦀", "a\x00b", "ascii"]
    _same(words, [w.encode() for w in words])


def test_strided_sliced_and_readonly_arrays():
    arr = np.arange(10_000, dtype=np.int64) * 7919
    _same(arr[::3], arr[::3].tolist())          # strided: copied, not borrowed
    _same(arr[5:900], arr[5:900].tolist())      # an offset view: borrowed
    ro = arr.copy()
    ro.flags.writeable = False
    _same(ro, ro.tolist())
    f = np.linspace(-1e20, 1e20, 5001)
    _same(f[1::2], f[1::2].tolist())
    _same(np.array([], dtype=np.int64), [])
    u = np.array([0, 2**64 - 1, 2**63], dtype=np.uint64)
    _same(u, u.tolist())


def test_array_kept_alive_while_read():
    h = tidemark.HyperLogLog(12)
    h.update_many(np.arange(1_000_000, dtype=np.int64)[::1])
    assert abs(h.estimate().value - 1_000_000) < 0.1 * 1_000_000


@pytest.mark.parametrize("env", [{"TIDEMARK_STR_FALLBACK": "1"}, {"TIDEMARK_THREADS": "1"}])
def test_fallback_paths_give_the_same_sketch(env):
    """Python 3.9's str path and the one-thread path hash exactly as the defaults."""
    import os
    import subprocess
    import sys

    code = (
        "import sys, numpy as np, tidemark\n"
        "h = tidemark.HyperLogLog(12)\n"
        "h.update_many(['w%d' % i for i in range(600_000)] + ['é', '🦀'])\n"
        "h.update_many(np.arange(300_000, dtype=np.int64) * 31)\n"
        "c = tidemark.CountMin(0.01, 0.01)\n"
        "c.update_many(['w%d' % (i % 777) for i in range(600_000)])\n"
        "c.update_many(np.arange(300_000, dtype=np.int64) % 1000)\n"
        "c.update_many(np.arange(100_000, dtype=np.int64), counts=3)\n"
        "sys.stdout.buffer.write(h.to_bytes() + c.to_bytes())\n"
    )
    run = lambda extra: subprocess.run(
        [sys.executable, "-c", code], env={**os.environ, **extra}, capture_output=True, check=True
    ).stdout
    assert run(env) == run({})


def test_random_bytes_never_crash_load():
    rng = random.Random(3)
    for _ in range(3000):
        n = rng.randrange(0, 200)
        junk = bytes(rng.getrandbits(8) for _ in range(n))
        for prefix in (b"", b"TDMK", b"TDMK\x01", b"HYLL"):
            try:
                tidemark.load(prefix + junk)
            except ValueError:
                pass


# Every update_many that takes items (each names the batch `items` in its errors).
_BATCH_TAKERS = {
    "HyperLogLog": lambda items: tidemark.HyperLogLog(12).update_many(items),
    "ExaLogLog": lambda items: tidemark.ExaLogLog(8).update_many(items),
    "CountMin": lambda items: tidemark.CountMin(0.01, 0.01).update_many(items),
    "HeavyHitters": lambda items: tidemark.HeavyHitters(0.1).update_many(items),
    "TopK": lambda items: tidemark.TopK(3).update_many(items),
    "QuotientFilter": lambda items: tidemark.QuotientFilter(1000, 0.01).update_many(items),
    "StackedFilter": lambda items: tidemark.StackedFilter(1000, 0.01).update_many(items),
    "RingWindow": lambda items: tidemark.RingWindow(100).update_many(items, ticks=1),
    "SlidingHyperLogLog": lambda items: tidemark.SlidingHyperLogLog(100).update_many(items, ticks=1),
}


def _error(f, arg):
    with pytest.raises(Exception) as info:
        f(arg)
    return type(info.value), str(info.value)


@pytest.mark.parametrize("take", list(_BATCH_TAKERS.values()), ids=list(_BATCH_TAKERS))
@pytest.mark.parametrize(
    "texts",
    [
        ["ok", "\ud800", "\udfff", "\udc00"],
        ["ok", "fine", "a\udfffb"],
        ["ok", "é", "\ud83e\udd80 two halves"],  # a surrogate pair as two code points
    ],
)
def test_text_arrays_that_are_not_unicode_are_refused_as_their_tolist(take, texts):
    """A `U` array holding a lone surrogate (NumPy stores it; UTF-8 cannot encode it) gets
    the error its tolist() gets, naming the element, instead of hashing U+FFFD."""
    arr = np.array(texts)
    assert arr.dtype.kind == "U" and arr.tolist() == texts
    want = _error(take, arr.tolist())
    assert want[0] is ValueError and r"items[" in want[1]
    assert _error(take, arr) == want
    big_endian = arr.astype(arr.dtype.newbyteorder(">"))
    assert _error(take, big_endian) == want


def test_a_refused_text_array_adds_nothing():
    h = tidemark.HyperLogLog(12)
    with pytest.raises(ValueError, match=r"^items\[1\]: 'utf-8' codec can't encode"):
        h.update_many(np.array(["ok", "\ud800", "\udfff", "\udc00"]))
    assert h.estimate().value == 0
    # The three lone surrogates used to hash alike, as U+FFFD: one item where there are three.
    assert tidemark.item_bytes(np.array(["\ufffd"])[0]) == "\ufffd".encode()


def test_text_arrays_past_unicode_are_refused_naming_the_element():
    """Code points past U+10FFFF (only a raw buffer puts them there; NumPy's own tolist()
    fails on them) are refused by the element's index, not hashed as U+FFFD."""
    raw = np.array([0x61, 0, 0x62, 0x110000, 0xFFFFFFFF, 0x63], dtype="<u4").tobytes()
    arr = np.frombuffer(raw, dtype="<U2")
    with pytest.raises(ValueError, match=r"^items\[1\]: .*code point not in range\(0x110000\)"):
        tidemark.HyperLogLog(12).update_many(arr)
    with pytest.raises(ValueError, match=r"^items\[1\]"):
        tidemark.CountMin(0.01, 0.01).update_many(memoryview(arr))


@pytest.mark.parametrize("take", list(_BATCH_TAKERS.values()), ids=list(_BATCH_TAKERS))
@pytest.mark.parametrize(
    "masked",
    [
        np.ma.masked_array([1, 2, 3, 4], mask=[1, 0, 1, 0]),
        np.ma.masked_array([1.5, 2.5], mask=[0, 1]),
        np.ma.masked_array(["a", "b"], mask=[1, 0]),
        np.ma.masked_array([1, 2, 3]),  # nothing masked: refused alike, whatever the mask
    ],
)
def test_masked_arrays_are_refused(take, masked):
    """A masked array's buffer holds whatever lies under its masked entries (their
    tolist() items are None): it used to count them as a phantom item."""
    with pytest.raises(TypeError, match=r"^items: a masked array .*\.compressed\(\).*\.filled\(x\)"):
        take(masked)


def test_masked_arrays_are_refused_as_columns_too():
    m = np.ma.masked_array([1, 0, 1, 1], mask=[0, 1, 0, 0])
    with pytest.raises(TypeError, match=r"^values: a masked array"):
        tidemark.ExpHistogram(10).update_many(m)
    with pytest.raises(TypeError, match=r"^counts: a masked array"):
        tidemark.CountMin(0.01, 0.01).update_many(["a", "b", "c", "d"], counts=m)
    with pytest.raises(TypeError, match=r"^ticks: a masked array"):
        tidemark.RingWindow(100).update_many(["a", "b", "c", "d"], ticks=m)
    with pytest.raises(TypeError, match=r"^items: a masked array"):
        tidemark.HyperLogLog(12).update_many(m, integers="binary")
    # What the error suggests works, and counts what it says.
    h = tidemark.HyperLogLog(12)
    h.update_many(np.ma.masked_array([1, 2, 3, 4], mask=[1, 0, 1, 0]).compressed())
    assert h.to_bytes() == _sketch([2, 4])


def _sketch(items):
    h = tidemark.HyperLogLog(12)
    for x in items:
        h.update(x)
    return h.to_bytes()


# Every dtype arrays are read in: its scalars hash as the one-element array of them.
_READ_DTYPES = [
    "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", ">i2", "<u8",
    "float32", "float64", ">f4", ">f8", "bool", "S4", "U4",
]


def _samples(dtype):
    dt = np.dtype(dtype)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return np.array([info.min, info.max, 0, 7, info.max // 3], dtype=dt)
    if dt.kind == "f":
        info = np.finfo(dt)
        values = [0.0, -0.0, np.inf, -np.inf, np.nan, 0.1, 1e16, 1 / 3, float(info.max),
                  float(info.tiny), float(info.smallest_subnormal), -2.5e-7]
        return np.array(values, dtype=dt)
    if dt.kind == "b":
        return np.array([True, False], dtype=dt)
    if dt.kind == "S":
        return np.array([b"a", b"", b"c\x00d", b"\xff\xfe"], dtype=dt)
    return np.array(["a", "", "é🦀", "日本"], dtype=dt)


@pytest.mark.parametrize("dtype", _READ_DTYPES)
def test_numpy_scalars_hash_as_their_one_element_array(dtype):
    arr = _samples(dtype)
    for i in range(len(arr)):
        scalar = arr[i]
        assert isinstance(scalar, np.generic), type(scalar)
        one = arr[i : i + 1]
        assert tidemark.item_bytes(scalar) == tidemark.item_bytes(one.tolist()[0]), (dtype, scalar)
        assert tidemark.item_bytes(scalar) == tidemark.item_bytes(scalar.item())
        a = tidemark.HyperLogLog(12)
        a.update_many(one)
        b = tidemark.HyperLogLog(12)
        b.update(scalar)
        assert a.to_bytes() == b.to_bytes(), (dtype, scalar)
    # And a list of the scalars as the array.
    _same(arr, list(arr))


@pytest.mark.parametrize("dtype", ["float16", "complex64", "complex128", "datetime64[s]", "timedelta64[s]", "V2", "longdouble"])
def test_numpy_scalars_of_refused_dtypes_are_refused_as_their_arrays(dtype):
    dt = np.dtype(dtype)
    if dt.kind == "f" and dt.itemsize == 8:
        pytest.skip("longdouble is float64 here")
    arr = np.zeros(2, dtype=dt)
    with pytest.raises(TypeError, match="not supported") as from_array:
        tidemark.HyperLogLog(12).update_many(arr)
    with pytest.raises(TypeError, match="not supported") as from_scalar:
        tidemark.item_bytes(arr[0])
    assert str(from_scalar.value).removeprefix("item: ") == str(from_array.value).removeprefix("items: ")
    with pytest.raises(TypeError, match=r"^items\[1\]: .*not supported"):
        tidemark.HyperLogLog(12).update_many(["ok", arr[0]])
