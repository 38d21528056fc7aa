#!/usr/bin/env bash
# What each request costs the server itself (BENCHMARKS.md, "Redis module", server CPU per
# request): INCR beside TM.COUNT.ADD, PFADD beside TM.DISTINCT.ADD, each pipelined as in
# redis-bench.sh, with redis-server's own CPU time (user + system, /proc/<pid>/stat) divided
# by the requests. On two cores redis-benchmark competes with the server for CPU; the server's
# CPU per request is what bounds its throughput on a machine of its own.
#
#   crates/tidemark-redis/bench/server-cpu.sh            # N=1000000 requests, ROUNDS=2 rounds
#   P=1 N=100000 crates/tidemark-redis/bench/server-cpu.sh  # one request a round trip (redis-benchmark's default)
set -euo pipefail
N=${N:-1000000}
source "$(dirname "$0")/server.sh"
TICK=$(getconf CLK_TCK)
$C TM.COUNT.CREATE rl WINDOW 60000 >/dev/null
$C TM.DISTINCT.CREATE d WINDOW 3600000 BUCKET 60000 >/dev/null
cpu() { awk '{print $14 + $15}' "/proc/$PID/stat"; }
LOG=$(mktemp)
run() {
  local a b r
  a=$(cpu)
  r=$(redis-benchmark -p "$PORT" -n "$N" -P "${P:-16}" -c 50 -q "$@" | tr '\r' '\n' \
      | grep -o '[0-9.]* requests per second' | tail -1 | cut -d' ' -f1)
  b=$(cpu)
  local us
  us=$(python3 -c "print(round(($b - $a) / $TICK * 1e6 / $N, 3))")
  echo "$* : $r req/s, server CPU $us µs a request"
  echo "$r $us" >> "$LOG"
}
for _ in $(seq ${ROUNDS:-2}); do
  run INCR rl:incr
  run TM.COUNT.ADD rl '*'
  run -r 1000000 PFADD hll ele:__rand_int__
  run -r 1000000 TM.DISTINCT.ADD d '*' ele:__rand_int__
done
$C info commandstats | tr -d '\r' | grep -iE "cmdstat_(incr|pfadd|tm\.count\.add|tm\.distinct\.add):"
# Each round runs a TM command right after Redis's own: the ratio of a pair moves less with
# the machine's speed than either figure. Medians (and ranges) over the rounds.
python3 - "$LOG" <<'PY'
import statistics, sys
rows = [tuple(map(float, l.split())) for l in open(sys.argv[1])]
for name, base, tm in (("TM.COUNT.ADD / INCR", 0, 1), ("TM.DISTINCT.ADD / PFADD", 2, 3)):
    q = [rows[i + tm][0] / rows[i + base][0] for i in range(0, len(rows) - 3, 4)]
    print(f"{name}: throughput ratio median {statistics.median(q):.2f} "
          f"(range {min(q):.2f}-{max(q):.2f}, {len(q)} rounds)")
PY
rm -f "$LOG"
