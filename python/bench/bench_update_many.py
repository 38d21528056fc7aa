"""tidemark's update_many against the datasketches package, on the same items.

    python python/bench/bench_update_many.py [--n 10000000] [--repeat 3] [--cli PATH]

- HyperLogLog at p = 12: tidemark's `update_many` over a NumPy int64 array (integers hashed
  as their decimal text, the default, and as their eight bytes, `integers="binary"` — what
  datasketches does with an int), and over a list of str, against datasketches' `hll_sketch(12, HLL_8)` fed the same items through its
  fastest API (it has no batch update: `update` per item, driven by `map` from C, which
  beats a Python `for` loop — both are timed and the faster kept).
- Count-Min at the same shape (5 rows × 2,719 columns, tidemark's ε = 0.001, δ = 0.01):
  tidemark's `CountMin.update_many` against datasketches' `count_min_sketch(5, 2719)`.
- With --cli, the same integers written one per line go through `tidemark distinct
  --precision 12 --json` and its estimate must equal Python's exactly.

Times are the best of --repeat runs, each on a fresh sketch; datasketches' items are handed
over as Python lists already built (not timed), tidemark's as the NumPy array or the list.
"""

import argparse
import collections
import json
import os
import platform
import subprocess
import tempfile
import time

import numpy as np

import tidemark


def best(repeat, setup, run):
    times = []
    for _ in range(repeat):
        s = setup()
        t0 = time.perf_counter()
        run(s)
        times.append(time.perf_counter() - t0)
    return min(times), s


def drive_map(update, items):
    collections.deque(map(update, items), maxlen=0)


def drive_loop(update, items):
    for x in items:
        update(x)


def ds_best(repeat, make, items):
    """datasketches' fastest API: map and for-loop both timed, the faster kept."""
    out = []
    for name, drive in (("map", drive_map), ("for", drive_loop)):
        t, sk = best(repeat, make, lambda s: drive(s.update, items))
        out.append((t, name, sk))
    print("  datasketches: " + ", ".join(f"{name} {t:.3f} s" for t, name, _ in out))
    return min(out, key=lambda x: x[0])


def _version(dist):
    try:
        from importlib.metadata import version

        return version(dist)
    except Exception:  # noqa: BLE001 - only for the report line
        return "?"


def cpu_model():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=10_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cli", help="a tidemark binary, to check Python's estimate equals the CLI's")
    args = ap.parse_args()
    import datasketches as ds

    n = args.n
    rng = np.random.default_rng(42)
    ints = rng.integers(0, 2**62, n, dtype=np.int64)
    int_list = ints.tolist()
    strs = [f"user-{x}" for x in rng.integers(0, n, n).tolist()]
    print(f"machine: {os.cpu_count()} cores, {cpu_model()}; Python {platform.python_version()}, "
          f"numpy {np.__version__}, datasketches {_version('datasketches')}")
    print(f"items: {n:,}")
    rows = []

    def report(what, t_tm, t_ds, how):
        ratio = t_ds / t_tm
        rows.append((what, t_tm, t_ds, ratio))
        print(f"{what:<42} tidemark {t_tm:7.3f} s ({n / t_tm / 1e6:6.1f} M/s)   "
              f"datasketches[{how}] {t_ds:7.3f} s ({n / t_ds / 1e6:5.2f} M/s)   ×{ratio:5.1f}")

    # HyperLogLog, integers from NumPy.
    t_tm, h = best(args.repeat, lambda: tidemark.HyperLogLog(12), lambda s: s.update_many(ints))
    t_ds, how, dh = ds_best(args.repeat, lambda: ds.hll_sketch(12, ds.tgt_hll_type.HLL_8), int_list)
    report("HLL p=12, int64 from NumPy (text)", t_tm, t_ds, how)
    print(f"  estimates: tidemark {h.estimate().value:.1f}, datasketches {dh.get_estimate():.1f}")
    hll_ints = h
    t_tm, hb = best(args.repeat, lambda: tidemark.HyperLogLog(12),
                    lambda s: s.update_many(ints, integers="binary"))
    report("HLL p=12, int64 from NumPy (binary)", t_tm, t_ds, how)
    print(f"  estimates: tidemark {hb.estimate().value:.1f}, datasketches {dh.get_estimate():.1f}")

    # HyperLogLog, strings from a list.
    t_tm, h = best(args.repeat, lambda: tidemark.HyperLogLog(12), lambda s: s.update_many(strs))
    t_ds, how, dh = ds_best(args.repeat, lambda: ds.hll_sketch(12, ds.tgt_hll_type.HLL_8), strs)
    report("HLL p=12, str from a list", t_tm, t_ds, how)
    print(f"  estimates: tidemark {h.estimate().value:.1f}, datasketches {dh.get_estimate():.1f}")

    # Count-Min, same shape.
    cm = tidemark.CountMin(0.001, 0.01)
    d, w = cm.depth, cm.width
    t_tm, _ = best(args.repeat, lambda: tidemark.CountMin(0.001, 0.01), lambda s: s.update_many(ints))
    t_ds, how, _ = ds_best(args.repeat, lambda: ds.count_min_sketch(d, w), int_list)
    report(f"Count-Min {d}x{w}, int64 from NumPy", t_tm, t_ds, how)
    t_tm, _ = best(args.repeat, lambda: tidemark.CountMin(0.001, 0.01), lambda s: s.update_many(strs))
    t_ds, how, _ = ds_best(args.repeat, lambda: ds.count_min_sketch(d, w), strs)
    report(f"Count-Min {d}x{w}, str from a list", t_tm, t_ds, how)

    if args.cli:
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "ints.txt")
            with open(path, "w") as f:
                f.write("\n".join(map(str, int_list)))
                f.write("\n")
            out = subprocess.run([args.cli, "distinct", "--precision", "12", "--json", path],
                                 capture_output=True, text=True, check=True).stdout
            cli = json.loads(out.splitlines()[0])
            e = hll_ints.estimate()
            same = (cli["estimate"], cli["low"], cli["high"]) == (e.value, e.low, e.high)
            print(f"CLI check (p=12, the {n:,} integers one per line): CLI {cli['estimate']!r}, "
                  f"Python {e.value!r}: {'equal' if same else 'DIFFERENT'}")
            if not same:
                raise SystemExit(1)
            out = subprocess.run([args.cli, "distinct", "--precision", "12", "--binary-integers",
                                  "--json", path], capture_output=True, text=True,
                                 check=True).stdout
            cli = json.loads(out.splitlines()[0])
            e = hb.estimate()
            same = (cli["estimate"], cli["low"], cli["high"]) == (e.value, e.low, e.high)
            print(f"CLI check, --binary-integers against integers=\"binary\": CLI "
                  f"{cli['estimate']!r}, Python {e.value!r}: {'equal' if same else 'DIFFERENT'}")
            if not same:
                raise SystemExit(1)


if __name__ == "__main__":
    main()
