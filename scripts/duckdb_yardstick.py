#!/usr/bin/env python3
"""The yardstick the pipeline is measured against: DuckDB over the same flow log.

    python3 scripts/duckdb_yardstick.py flows.csv [threads] [plain|windowed]

`plain` is the per-minute HyperLogLog count of distinct (dst_ip, dst_port) per source, DuckDB's
`approx_count_distinct` (no sliding windows, no alerts, nothing persisted): the least work that
answers the fan-out question at all. `windowed` is what `examples/fanout.toml` answers: the
distinct count per source over the last 5 minutes at every minute, from the same per-minute
rows (a self-join on the minute, the union taken by an exact `count(DISTINCT …)`, as SQL has no
mergeable HyperLogLog). `threads` defaults to DuckDB's own default (every core).

Prints the number of result rows and a checksum of the estimates, so that no part of the query
can be optimised away. Needs `pip install duckdb`.
"""

import sys

import duckdb

PLAIN = """
SELECT count(*) AS rows, sum(d) AS total FROM (
    SELECT src_ip, ts // 60 AS minute,
           approx_count_distinct(dst_ip || ':' || dst_port) AS d
    FROM read_csv(?, header = true,
                  columns = {'ts': 'BIGINT', 'src_ip': 'VARCHAR',
                             'dst_ip': 'VARCHAR', 'dst_port': 'INTEGER'})
    GROUP BY ALL
)
"""

WINDOWED = """
WITH flows AS (
    SELECT src_ip, ts // 60 AS minute, dst_ip || ':' || dst_port AS item
    FROM read_csv(?, header = true,
                  columns = {'ts': 'BIGINT', 'src_ip': 'VARCHAR',
                             'dst_ip': 'VARCHAR', 'dst_port': 'INTEGER'})
),
minutes AS (SELECT DISTINCT src_ip, minute FROM flows)
SELECT count(*) AS rows, sum(d) AS total FROM (
    SELECT m.src_ip, m.minute, count(DISTINCT f.item) AS d
    FROM minutes m JOIN flows f
      ON f.src_ip = m.src_ip AND f.minute BETWEEN m.minute - 4 AND m.minute
    GROUP BY ALL
)
"""


def main() -> int:
    if len(sys.argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    path = sys.argv[1]
    con = duckdb.connect()
    if len(sys.argv) > 2 and sys.argv[2] != "default":
        threads = int(sys.argv[2])
        if not 1 <= threads <= 1024:
            print(f"threads must be 1 to 1024, not {threads}", file=sys.stderr)
            return 2
        con.execute(f"SET threads = {threads}")
    query = {"plain": PLAIN, "windowed": WINDOWED}.get(
        sys.argv[3] if len(sys.argv) > 3 else "plain"
    )
    if query is None:
        print("the query is plain or windowed", file=sys.stderr)
        return 2
    rows, total = con.execute(query, [path]).fetchone()
    print(f"{rows} rows, estimates summing to {total}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
