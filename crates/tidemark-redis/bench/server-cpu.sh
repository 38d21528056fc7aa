#!/usr/bin/env bash
# What each request costs the server itself (BENCHMARKS.md, "Redis module", server CPU per
# request): INCR beside TM.COUNT.ADD, PFADD beside TM.DISTINCT.ADD, each pipelined as in
# redis-bench.sh, with redis-server's own CPU time (user + system, /proc/<pid>/stat) divided
# by the requests. On two cores redis-benchmark competes with the server for CPU; the server's
# CPU per request is what bounds its throughput on a machine of its own.
#
#   crates/tidemark-redis/bench/server-cpu.sh            # N=1000000 requests, ROUNDS=2 rounds
set -euo pipefail
N=${N:-1000000}
source "$(dirname "$0")/server.sh"
TICK=$(getconf CLK_TCK)
$C TM.COUNT.CREATE rl WINDOW 60000 >/dev/null
$C TM.DISTINCT.CREATE d WINDOW 3600000 BUCKET 60000 >/dev/null
cpu() { awk '{print $14 + $15}' "/proc/$PID/stat"; }
run() {
  local a b r
  a=$(cpu)
  r=$(redis-benchmark -p "$PORT" -n "$N" -P 16 -c 50 -q "$@" | tr '\r' '\n' \
      | grep -o '[0-9.]* requests per second' | tail -1 | cut -d' ' -f1)
  b=$(cpu)
  echo "$* : $r req/s, server CPU $(python3 -c "print(round(($b - $a) / $TICK * 1e6 / $N, 3))") µs a request"
}
for _ in $(seq ${ROUNDS:-2}); do
  run INCR rl:incr
  run TM.COUNT.ADD rl '*'
  run -r 1000000 PFADD hll ele:__rand_int__
  run -r 1000000 TM.DISTINCT.ADD d '*' ele:__rand_int__
done
$C info commandstats | tr -d '\r' | grep -iE "cmdstat_(incr|pfadd|tm\.count\.add|tm\.distinct\.add):"
