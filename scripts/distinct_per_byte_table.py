"""ACCURACY.md's "distinct per byte" tables, from the two measurements.

Reads tidemark's plate (`tidemark-lab reproduce distinct-per-byte --out docs/plates` writes
docs/plates/distinct-per-byte.csv) and DataSketches' (`scripts/distinct_per_byte_datasketches.py
--out testdata/accuracy/datasketches_distinct_per_byte.csv`) and prints, in Markdown:

1. every sketch's relative RMSE rescaled to 1,024 serialized bytes, RMSE·√(bytes/1024), at
   n = 10^3 … 10^7 (variance is inversely proportional to bytes at a fixed number of bits a
   register, so this is the RMSE each design would have at equal bytes);
2. ExaLogLog (2, 20) p = 10: bias, RMSE, bias/RMSE and MVP at every n.

    python3 scripts/distinct_per_byte_table.py [tidemark.csv] [datasketches.csv]
"""
import csv
import math
import sys

NS = [10**3, 2 * 10**3, 5 * 10**3, 10**4, 2 * 10**4, 5 * 10**4, 10**5, 2 * 10**5,
      5 * 10**5, 10**6, 2 * 10**6, 5 * 10**6, 10**7]

TIDEMARK = [
    ("ExaLogLog (2,20) p=8 ML", "exaloglog(2,20) p=8", "ml"),
    ("ExaLogLog (2,20) p=8 martingale", "exaloglog(2,20) p=8", "martingale"),
    ("ExaLogLog (2,20) p=10 ML", "exaloglog(2,20) p=10", "ml"),
    ("ExaLogLog (2,20) p=10 martingale", "exaloglog(2,20) p=10", "martingale"),
    ("HyperLogLog p=10 Ertl", "hyperloglog p=10", "ertl"),
    ("HyperLogLog p=10 HIP", "hyperloglog p=10", "hip"),
    ("HyperLogLog p=12 Ertl", "hyperloglog p=12", "ertl"),
    ("HyperLogLog p=12 HIP", "hyperloglog p=12", "hip"),
]
DATASKETCHES = [
    ("DataSketches HLL_4 lg_k=11 merged", "HLL_4 lg_k=11", "merged"),
    ("DataSketches HLL_4 lg_k=11 HIP", "HLL_4 lg_k=11", "own"),
    ("DataSketches HLL_8 lg_k=10 merged", "HLL_8 lg_k=10", "merged"),
    ("DataSketches HLL_8 lg_k=10 HIP", "HLL_8 lg_k=10", "own"),
    ("DataSketches CPC lg_k=10 merged", "CPC lg_k=10", "merged"),
    ("DataSketches CPC lg_k=10 own", "CPC lg_k=10", "own"),
    ("DataSketches CPC lg_k=11 merged", "CPC lg_k=11", "merged"),
    ("DataSketches CPC lg_k=11 own", "CPC lg_k=11", "own"),
]


def load(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def main():
    ours = load(sys.argv[1] if len(sys.argv) > 1 else "docs/plates/distinct-per-byte.csv")
    theirs = load(sys.argv[2] if len(sys.argv) > 2
                  else "testdata/accuracy/datasketches_distinct_per_byte.csv")
    at_1kib = {}
    for label, sketch, est in TIDEMARK:
        for r in ours:
            if r["sketch"] == sketch and r["estimator"] == est:
                at_1kib[(label, int(r["n"]))] = (float(r["rmse_at_1kib"]), float(r["mean_bytes"]),
                                                 int(r["trials"]))
    for label, config, est in DATASKETCHES:
        for r in theirs:
            if r["config"] == config and r["estimator"] == est:
                b = float(r["mean_bytes"])
                at_1kib[(label, int(r["n"]))] = (float(r["rmse"]) * math.sqrt(b / 1024), b,
                                                 int(r["trials"]))
    labels = [t[0] for t in TIDEMARK + DATASKETCHES]
    short = lambda n: f"{n:.0e}".replace("e+0", "e")
    print("| sketch (bytes at 10^7, trials) | " + " | ".join(short(n) for n in NS) + " |")
    print("| --- |" + " ---: |" * len(NS))
    for label in labels:
        _, b, trials = at_1kib[(label, NS[-1])]
        cells = [f"{100 * at_1kib[(label, n)][0]:.2f}" for n in NS]
        print(f"| {label} ({b:.0f} B, {trials}) | " + " | ".join(cells) + " |")
    print()
    print("| n | bias | RMSE | bias / RMSE | MVP | martingale RMSE | martingale MVP |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    rows = {(r["estimator"], int(r["n"])): r for r in ours if r["sketch"] == "exaloglog(2,20) p=10"}
    for n in sorted({n for (_, n) in rows}):
        ml, mart = rows[("ml", n)], rows[("martingale", n)]
        print(f"| {n:,} | {float(ml['bias']):+.5f} | {float(ml['rmse']):.5f} | "
              f"{float(ml['bias_over_rmse']):+.3f} | {float(ml['mvp']):.3f} | "
              f"{float(mart['rmse']):.5f} | {float(mart['mvp']):.3f} |")


if __name__ == "__main__":
    main()
