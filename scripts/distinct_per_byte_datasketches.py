"""Accuracy and size of Apache DataSketches' distinct-count sketches (HLL and CPC).

For each sketch configuration and each checkpoint n in 1, 2, 5, 10, 20, 50, ... up to --max
(1-2-5 spacing), over --trials independent trials, this measures the relative error
estimate/n - 1 of two estimators and the serialized size of the sketch:

  own     the sketch's get_estimate() after n in-order updates (HLL: the HIP estimator;
          CPC: HIP as well);
  merged  the estimate of the same sketch after passing through a union (hll_union /
          cpc_union: update the union with the sketch twice, get_result(), get_estimate()),
          i.e. what a merged sketch answers (HLL: the composite/out-of-order estimator; CPC:
          ICON). Twice, because an HLL union that receives one sketch into an empty gadget
          copies it whole, HIP accumulator and in-order flag included, and answers exactly
          its HIP estimate; the second update (idempotent on the registers, so the result is
          the sketch any split of the stream merges into) sets the out-of-order flag. CPC's
          union answers ICON after one update already; the second changes nothing.

Each trial is a fresh stream of n distinct 64-bit integers, inserted incrementally so that one
stream serves all checkpoints. Trial k of seed s streams the items id*2^40 + i, i = 0, 1, ...,
with id = (s - 1) * trials + k, so streams are distinct across trials and across seeds (for
the same --trials). DataSketches hashes every item itself (MurmurHash3, seed 9001), so
consecutive integers are fine. All configurations see the same streams.

Output (CSV to stdout or --out): sketch,config,n,trials,estimator,bias,rmse,mean_bytes where
bias is the mean relative error, rmse the root of the mean squared relative error, and
mean_bytes the mean serialized size over trials (HLL: len(serialize_compact()); CPC:
len(serialize())) of the sketch that answered (the updated sketch for `own`, the union's
result for `merged`). With --large-from N, checkpoints n >= N use only the first
--trials-large trials (the `trials` column says how many were used).

datasketches 5.2 has no batch update (update() takes one int, float or str), so items are fed
one call at a time and trials are spread over --jobs processes.

The output is meant for ACCURACY.md's "distinct per byte" table, beside tidemark's
`tidemark-lab reproduce distinct-per-byte`.

    pip install datasketches==5.2.0 numpy
    python3 scripts/distinct_per_byte_datasketches.py --trials 100 --max 10000000 --jobs 2 \\
        --out testdata/accuracy/datasketches_distinct_per_byte.csv
"""
import argparse
import csv
import math
import multiprocessing
import sys
import time
from importlib.metadata import version

import datasketches as ds

# (sketch, config label, lg_k, HLL target type or None for CPC)
CONFIGS = [
    ("hll", "HLL_4 lg_k=11", 11, ds.HLL_4),
    ("hll", "HLL_6 lg_k=10", 10, ds.HLL_6),
    ("hll", "HLL_8 lg_k=10", 10, ds.HLL_8),
    ("cpc", "CPC lg_k=10", 10, None),
    ("cpc", "CPC lg_k=11", 11, None),
]
ID_SHIFT = 40  # items of one trial: id << 40 | i, so n <= 2^40 and id < 2^23 (int64 range)


def checkpoints(max_n):
    """1, 2, 5, 10, 20, 50, ... up to and including max_n if it is on the grid."""
    out, decade = [], 1
    while decade <= max_n:
        out += [m * decade for m in (1, 2, 5) if m * decade <= max_n]
        decade *= 10
    return out


def new_sketch(kind, lg_k, tgt):
    return ds.hll_sketch(lg_k, tgt) if kind == "hll" else ds.cpc_sketch(lg_k)


def merged(kind, lg_k, tgt, sketch):
    """The sketch as a union answers for it (updated twice: see the module docstring)."""
    union = ds.hll_union(lg_k) if kind == "hll" else ds.cpc_union(lg_k)
    union.update(sketch)
    union.update(sketch)
    return union.get_result(tgt) if kind == "hll" else union.get_result()


def size(kind, sketch):
    return len(sketch.serialize_compact() if kind == "hll" else sketch.serialize())


def run_trial(task):
    """One stream for one configuration; returns rows (own_err, merged_err, own_b, merged_b)."""
    config_index, stream_id, points = task
    kind, _, lg_k, tgt = CONFIGS[config_index]
    sketch = new_sketch(kind, lg_k, tgt)
    update = sketch.update
    base, done, rows = stream_id << ID_SHIFT, 0, []
    for n in points:
        for item in range(base + done, base + n):
            update(item)
        done = n
        union_result = merged(kind, lg_k, tgt, sketch)
        rows.append((sketch.get_estimate() / n - 1, union_result.get_estimate() / n - 1,
                     size(kind, sketch), size(kind, union_result)))
    return config_index, rows


def measure(args):
    points = checkpoints(args.max)
    large_from = args.large_from if args.large_from is not None else args.max + 1
    small = [n for n in points if n < large_from]
    tasks = []
    for k in range(args.trials):
        stream_id = (args.seed - 1) * args.trials + k
        trial_points = points if k < args.trials_large else small
        tasks += [(c, stream_id, trial_points) for c in range(len(CONFIGS))]
    # Large trials first so the slowest tasks do not trail at the end.
    tasks.sort(key=lambda t: -len(t[2]))
    # sums[c][j] = [count, sum err own, sum err^2 own, sum err merged, sum err^2 merged, bytes..]
    sums = [[[0, 0.0, 0.0, 0.0, 0.0, 0, 0] for _ in points] for _ in CONFIGS]
    with multiprocessing.Pool(args.jobs) as pool:
        for c, rows in pool.imap(run_trial, tasks, chunksize=1):
            for j, (own, mrg, own_b, mrg_b) in enumerate(rows):
                s = sums[c][j]
                s[0] += 1
                s[1] += own; s[2] += own * own
                s[3] += mrg; s[4] += mrg * mrg
                s[5] += own_b; s[6] += mrg_b
    return points, sums


def write_csv(out, points, sums):
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["sketch", "config", "n", "trials", "estimator", "bias", "rmse", "mean_bytes"])
    for (kind, label, _, _), per_point in zip(CONFIGS, sums):
        for n, (t, e1, e2, m1, m2, b1, b2) in zip(points, per_point):
            if t == 0:
                continue
            for name, s1, s2, b in (("own", e1, e2, b1), ("merged", m1, m2, b2)):
                writer.writerow([kind, label, n, t, name, f"{s1 / t:.6g}",
                                 f"{math.sqrt(s2 / t):.6g}", f"{b / t:.1f}"])


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--max", type=int, default=10_000_000, help="largest n (default 1e7)")
    p.add_argument("--trials", type=int, default=100, help="trials per checkpoint (default 100)")
    p.add_argument("--large-from", type=int, default=None,
                   help="checkpoints n >= this use only --trials-large trials")
    p.add_argument("--trials-large", type=int, default=None,
                   help="trials for n >= --large-from (default: --trials)")
    p.add_argument("--seed", type=int, default=1, help="selects the streams (default 1)")
    p.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    p.add_argument("--out", help="CSV file (default stdout)")
    args = p.parse_args()
    if args.trials_large is None:
        args.trials_large = args.trials
    if not (1 <= args.max < 1 << ID_SHIFT and args.trials >= 1 and args.seed >= 1
            and 0 <= args.trials_large <= args.trials and args.jobs >= 1):
        p.error("need 1 <= max < 2^40, trials >= 1, seed >= 1, 0 <= trials-large <= trials")
    if args.seed * args.trials >= 1 << (63 - ID_SHIFT):
        p.error("seed * trials must stay below 2^23 (items are int64)")
    return args


def main():
    args = parse_args()
    start = time.perf_counter()
    points, sums = measure(args)
    if args.out:
        with open(args.out, "w", newline="") as out:
            write_csv(out, points, sums)
    else:
        write_csv(sys.stdout, points, sums)
    print(f"datasketches {version('datasketches')}: {time.perf_counter() - start:.1f} s wall",
          file=sys.stderr)


if __name__ == "__main__":
    main()
