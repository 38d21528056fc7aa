#!/usr/bin/env bash
# What each request costs the server itself (BENCHMARKS.md, "Redis module"; "Server CPU per
# request" in docs/history/benchmarks-2026-12-04.md): INCR beside TMCOUNT.ADD, PFADD beside
# TMDISTINCT.ADD, each pipelined as in
# redis-bench.sh, with redis-server's own CPU time (user + system, /proc/<pid>/stat) divided
# by the requests. On two cores redis-benchmark competes with the server for CPU; the server's
# CPU per request is what bounds its throughput on a machine of its own.
#
#   crates/tidemark-redis/bench/server-cpu.sh            # N=1000000 requests, ROUNDS=2 rounds
#   P=1 N=100000 crates/tidemark-redis/bench/server-cpu.sh  # one request a round trip (redis-benchmark's default)
#   FLOOR=1 crates/tidemark-redis/bench/server-cpu.sh    # also TM.BENCHFLOOR: the module's work taken out
set -euo pipefail
N=${N:-1000000}
if [ -n "${FLOOR:-}" ] && [ -z "${SO:-}" ]; then export FEATURES=bench-floor; fi
source "$(dirname "$0")/server.sh"
TICK=$(getconf CLK_TCK)
$C TMCOUNT.CREATE rl WINDOW 60000 >/dev/null
$C TMDISTINCT.CREATE d WINDOW 3600000 BUCKET 60000 >/dev/null
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
  local name=$1
  if [ "$1" = -r ]; then name=$3; fi
  echo "$name $r $us" >> "$LOG"
}
for _ in $(seq ${ROUNDS:-2}); do
  run INCR rl:incr
  run TMCOUNT.ADD rl '*'
  if [ -n "${FLOOR:-}" ]; then run TM.BENCHFLOOR rl '*'; fi
  run -r 1000000 PFADD hll ele:__rand_int__
  run -r 1000000 TMDISTINCT.ADD d '*' ele:__rand_int__
done
$C info commandstats | tr -d '\r' | grep -iE "cmdstat_(incr|pfadd|tmcount\.add|tmdistinct\.add):"
# Each round runs a TM command right after Redis's own: the ratio of a pair moves less with
# the machine's speed than either figure. Medians (and ranges) over the rounds.
python3 - "$LOG" <<'PY'
import statistics, sys
rounds = []
for line in open(sys.argv[1]):
    name, rps, _ = line.split()
    if name == "INCR":
        rounds.append({})
    rounds[-1][name] = float(rps)
for name, base in (("TMCOUNT.ADD", "INCR"), ("TM.BENCHFLOOR", "INCR"),
                   ("TMDISTINCT.ADD", "PFADD")):
    q = [r[name] / r[base] for r in rounds if name in r and base in r]
    if q:
        print(f"{name} / {base}: throughput ratio median {statistics.median(q):.2f} "
              f"(range {min(q):.2f}-{max(q):.2f}, {len(q)} rounds)")
PY
rm -f "$LOG"
