#!/usr/bin/env bash
# Instructions the whole redis-server spends a request (BENCHMARKS.md, "Redis module"): the
# server runs under valgrind's callgrind, its counters are zeroed after start-up and the keys'
# creation, then redis-benchmark sends the command. Instruction counts do not move with the
# machine's speed, so a before/after pair of builds compares at the 1% level.
#
#   crates/tidemark-redis/bench/server-instructions.sh TMDISTINCT.ADD d '*' ele:__rand_int__
#   SO=/path/to/other/libtidemark_redis.so N=50000 crates/tidemark-redis/bench/server-instructions.sh PFADD hll ele:__rand_int__
#
# Needs valgrind (callgrind_control). Prints instructions a request. Redis seeds its command
# table at random at each start, so a run can differ from the next by ±200 instructions in the
# command lookup: take the least of a few runs.
set -euo pipefail
N=${N:-50000}
source "$(dirname "${BASH_SOURCE[0]}")/module.sh"
valgrind --tool=callgrind --callgrind-out-file="$DIR/cg.out" redis-server --port "$PORT" \
  --bind 127.0.0.1 --loadmodule "$SO" --save '' --appendonly no --dir "$DIR" > "$DIR/log" 2>&1 &
VG=$!
trap 'redis-cli -p "$PORT" shutdown nosave >/dev/null 2>&1 || true; wait $VG 2>/dev/null || true; rm -rf "$DIR"' EXIT
C="redis-cli -p $PORT"
for _ in $(seq 300); do $C ping >/dev/null 2>&1 && break; sleep 0.2; done
$C TMCOUNT.CREATE rl WINDOW 60000 >/dev/null
$C TMDISTINCT.CREATE d WINDOW 3600000 BUCKET 60000 >/dev/null
callgrind_control -z "$VG" >/dev/null 2>&1
redis-benchmark -p "$PORT" -n "$N" -P 16 -c 10 -r 1000000 -q "$@" >/dev/null
callgrind_control -d "$VG" >/dev/null 2>&1
sleep 1
# The dump after the benchmark holds only its requests (the counters were zeroed before).
n=$(grep -m1 '^summary:' "$DIR/cg.out.1" | awk '{print $2}')
echo "$*: $(python3 -c "print(round($n / $N))") instructions a request (N=$N)"
