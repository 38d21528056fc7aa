#!/usr/bin/env bash
# The Redis module beside Redis's own commands, on one server (BENCHMARKS.md, "Redis module").
#
#   crates/tidemark-redis/bench/redis-bench.sh            # N=1000000 requests per run
#   N=200000 crates/tidemark-redis/bench/redis-bench.sh   # quicker
#
# Needs redis-server, redis-cli and redis-benchmark (Debian: redis-server, redis-tools).
# Builds the module in release mode, starts redis-server on a free loopback port with it,
# and prints: throughput of INCR vs TMCOUNT.ADD and PFADD vs TMDISTINCT.ADD (pipelined, 50
# clients), memory of a 1,000-event sliding log (sorted set) vs a TM counter (MEMORY USAGE
# and used_memory per key over 1,000 keys), and the server time of TMDISTINCT.COUNT over an
# hour of minute buckets (INFO commandstats usec_per_call).
set -euo pipefail
N=${N:-1000000}
P=${P:-16}
source "$(dirname "$0")/server.sh"
rps() { redis-benchmark -p "$PORT" -n "$N" -P "$P" -c 50 -q "$@" | tr '\r' '\n' | grep -o '[0-9.]* requests per second' | tail -1 | cut -d' ' -f1; }
stat() { $C info commandstats | grep -i "cmdstat_$1:" | tr -d '\r'; }

echo "== rate limiter: INCR vs TMCOUNT.ADD (one key, n=$N, pipeline $P)"
$C config resetstat >/dev/null
$C TMCOUNT.CREATE rl WINDOW 60000 >/dev/null
incr=$(rps INCR rl:incr)
add=$(rps TMCOUNT.ADD rl '*')
echo "INCR                 $incr req/s"
echo "TMCOUNT.ADD rl *    $add req/s   ratio $(python3 -c "print(round($add/$incr, 3))")"
stat incr; stat tmcount.add
echo "TMCOUNT.GET rl: $($C TMCOUNT.GET rl | tr '\n' ' ')"

echo "== rate limiter, 10,000 keys: INCR vs TMCOUNT.ADD (key:__rand_int__)"
for i in $(seq 0 9999); do printf 'TMCOUNT.CREATE rlk:%012d WINDOW 60000\n' "$i"; done | $C --pipe >/dev/null
incr=$(rps -r 10000 INCR incr:__rand_int__)
add=$(rps -r 10000 TMCOUNT.ADD rlk:__rand_int__ '*')
echo "INCR                 $incr req/s"
echo "TMCOUNT.ADD         $add req/s   ratio $(python3 -c "print(round($add/$incr, 3))")"
stat tmcount.add

echo "== memory at 1,000 events in the window: sorted-set log vs TM.COUNT (1,000 keys each)"
$C flushall >/dev/null
before=$($C info memory | sed -n 's/^used_memory:\([0-9]*\).*/\1/p')
python3 - "$PORT" zset <<'EOF' | $C --pipe >/dev/null
import sys
for k in range(1000):
    for e in range(1000):
        t = 1_700_000_000_000 + e * 50
        print(f"ZADD log:{k} {t} {t}-{e}")
EOF
mid=$($C info memory | sed -n 's/^used_memory:\([0-9]*\).*/\1/p')
for eps in 0.01 0.05 0.1; do
python3 - "$eps" <<'EOF' | $C --pipe >/dev/null
import sys
eps = sys.argv[1]
for k in range(1000):
    print(f"TMCOUNT.CREATE c{eps}:{k} WINDOW 60000 EPSILON {eps}")
    for e in range(1000):
        print(f"TMCOUNT.ADD c{eps}:{k} {1_700_000_000_000 + e * 50}")
EOF
done
zset=$($C memory usage log:0)
echo "sorted set (ZADD ×1000, ZREMRANGEBYSCORE/ZCARD to query): MEMORY USAGE $zset bytes, used_memory/key $(( (mid - before) / 1000 ))"
prev=$mid
for eps in 0.01 0.05 0.1; do
  now=$($C info memory | sed -n 's/^used_memory:\([0-9]*\).*/\1/p')
  tm=$($C memory usage "c$eps:0")
  echo "TM.COUNT EPSILON $eps: MEMORY USAGE $tm bytes (ratio $(python3 -c "print(round($zset/$tm,1))")), GET $($C TMCOUNT.GET "c$eps:0" | tr '\n' ' ')"
done
# used_memory per key, each ε on its own: recreate one ε at a time.
for eps in 0.01 0.05 0.1; do
  $C flushall >/dev/null
  b=$($C info memory | sed -n 's/^used_memory:\([0-9]*\).*/\1/p')
python3 - "$eps" <<'EOF' | $C --pipe >/dev/null
import sys
eps = sys.argv[1]
for k in range(1000):
    print(f"TMCOUNT.CREATE c:{k} WINDOW 60000 EPSILON {eps}")
    for e in range(1000):
        print(f"TMCOUNT.ADD c:{k} {1_700_000_000_000 + e * 50}")
EOF
  a=$($C info memory | sed -n 's/^used_memory:\([0-9]*\).*/\1/p')
  echo "TM.COUNT EPSILON $eps: used_memory/key $(( (a - b) / 1000 )) (sorted set $(( (mid - before) / 1000 )): ratio $(python3 -c "print(round(($mid-$before)/($a-$b),1))"))"
done

echo "== distinct: PFADD vs TMDISTINCT.ADD (ring: WINDOW 1 h, BUCKET 1 min; items ele:__rand_int__ of 1,000,000)"
$C flushall >/dev/null
$C config resetstat >/dev/null
$C TMDISTINCT.CREATE d WINDOW 3600000 BUCKET 60000 >/dev/null
pf=$(rps -r 1000000 PFADD hll ele:__rand_int__)
tm=$(rps -r 1000000 TMDISTINCT.ADD d '*' ele:__rand_int__)
echo "PFADD                $pf req/s"
echo "TMDISTINCT.ADD      $tm req/s   ratio $(python3 -c "print(round($tm/$pf, 3))")"
stat pfadd; stat tmdistinct.add
echo "PFCOUNT hll: $($C pfcount hll); TMDISTINCT.COUNT d: $($C TMDISTINCT.COUNT d AT '*' | tr '\n' ' ')"

echo "== TMDISTINCT.COUNT over an hour of minute buckets, each bucket a dense sketch"
$C del h >/dev/null
$C TMDISTINCT.CREATE h WINDOW 3600000 BUCKET 60000 >/dev/null
python3 - <<'EOF' | $C --pipe >/dev/null
t0 = 1_700_000_000_000
for m in range(60):
    for b in range(40):
        items = " ".join(f"u{m}-{b}-{i}" for i in range(100))
        print(f"TMDISTINCT.ADD h {t0 + m * 60_000 + b} {items}")
EOF
echo "TMDISTINCT.COUNT h: $($C TMDISTINCT.COUNT h | tr '\n' ' ') (truth 240000)"
$C config resetstat >/dev/null
redis-benchmark -p "$PORT" -n 20000 -c 1 -q TMDISTINCT.COUNT h >/dev/null
echo "repeated (closed buckets' merge cached):        $(stat tmdistinct.count)"
$C config resetstat >/dev/null
for i in $(seq 1 500); do echo "TMDISTINCT.COUNT h WINDOW 3600000"; echo "TMDISTINCT.COUNT h WINDOW 3540000"; done | $C --pipe >/dev/null
echo "alternating windows (every call merges 60 buckets): $(stat tmdistinct.count)"
