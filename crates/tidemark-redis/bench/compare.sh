#!/usr/bin/env bash
# What a Redis user writes today beside the module's types, on one server (BENCHMARKS.md,
# "Redis module"):
#
#   1. a sliding-window rate limit: the sorted-set log (ZREMRANGEBYSCORE, ZADD, ZCARD in one
#      Lua script, holding exactly 1,000 events in its window) and the fixed window (INCR +
#      PEXPIRE in one script) against TMCOUNT.ADD, which answers the window's count with its
#      bracket in the same call;
#   2. unique visitors over the last hour: PFCOUNT over 60 per-minute PFADD keys (and PFMERGE
#      then PFCOUNT) against TMDISTINCT.COUNT over a ring of 60 one-minute buckets;
#   3. top items of the last 10 minutes: ZUNIONSTORE of ten per-minute ZINCRBY sorted sets,
#      then ZREVRANGE (one script), against TMFREQ.TOP over a ring of ten one-minute buckets,
#      at 100,000 distinct items.
#
# Each pair runs in alternation, ROUNDS times, on the same server; the script prints every
# round and the median of the per-round ratios. Memory is MEMORY USAGE at 1,000 and 100,000
# events in the window.
#
#   crates/tidemark-redis/bench/compare.sh              # N=200000 requests a run, ROUNDS=3
#   N=50000 ROUNDS=1 crates/tidemark-redis/bench/compare.sh
#   SECTIONS=2 crates/tidemark-redis/bench/compare.sh   # only the second comparison
set -euo pipefail
N=${N:-200000}
ROUNDS=${ROUNDS:-3}
SECTIONS=${SECTIONS:-123}
source "$(dirname "$0")/server.sh"
LOG=$(mktemp)
trap 'redis-cli -p "$PORT" shutdown nosave >/dev/null 2>&1 || true; rm -rf "$DIR" "$LOG"' EXIT

# rps NAME N CLIENTS PIPELINE ARGS…: requests per second of one redis-benchmark run, logged
# under NAME. Fast commands run pipelined (16 deep, 50 clients) as in redis-bench.sh; the
# slow ones one at a time (a pipeline of them would queue minutes of work).
rps() {
  local name=$1 n=$2 clients=$3 pipe=$4
  shift 4
  local r
  r=$(redis-benchmark -p "$PORT" -n "$n" -P "$pipe" -c "$clients" -q "$@" | tr '\r' '\n' \
      | grep -o '[0-9.]* requests per second' | tail -1 | cut -d' ' -f1)
  echo "$name $r" >> "$LOG"
  echo "  $name: $r req/s"
}
mem() { $C memory usage "$1" samples 0; }
sum_mem() { local t=0 k; for k in "$@"; do t=$((t + $(mem "$k"))); done; echo "$t"; }

if [[ $SECTIONS == *1* ]]; then
echo "== 1. rate limit: sorted-set log (1,000 events in the window), INCR+PEXPIRE, TMCOUNT.ADD"
# The log's clock is a counter, so that its window holds exactly 1,000 events at every call;
# each member is a millisecond time and a sequence number, as a request's log entry is.
ZLOG=$($C script load "local n = redis.call('INCR', KEYS[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', n - tonumber(ARGV[1]))
redis.call('ZADD', KEYS[1], n, (1700000000000 + n) .. '-' .. n)
return redis.call('ZCARD', KEYS[1])")
FIXED=$($C script load "local c = redis.call('INCR', KEYS[1])
if c == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return c")
$C TMCOUNT.CREATE '{rl}tm' WINDOW 60000 >/dev/null
for _ in $(seq 1000); do echo "EVALSHA $ZLOG 2 {rl}z {rl}zc 1000"; done | $C >/dev/null
echo "  the log holds $($C zcard '{rl}z') events"
for r in $(seq "$ROUNDS"); do
  echo " round $r"
  rps zlog "$N" 50 16 EVALSHA "$ZLOG" 2 '{rl}z' '{rl}zc' 1000
  rps tmcount "$N" 50 16 TMCOUNT.ADD '{rl}tm' '*'
  rps fixed "$N" 50 16 EVALSHA "$FIXED" 1 '{rl}f' 60000
done
echo "  answers: the log $($C zcard '{rl}z'), TMCOUNT.GET $($C TMCOUNT.GET '{rl}tm' | tr '\n' ' ')"
for events in 1000 100000; do
  python3 - "$events" <<'EOF' | $C --pipe 2>&1 | tail -1 | sed "s/^/  fill: /"
import sys
n = int(sys.argv[1])
for e in range(n):
    t = 1_700_000_000_000 + e * 50
    print(f"ZADD mz{n} {t} {t}-{e}")
print(f"TMCOUNT.CREATE mt{n} WINDOW {n}")
for e in range(n):
    print(f"TMCOUNT.ADD mt{n} {e}")
EOF
  z=$(mem "mz$events"); t=$(mem "mt$events")
  echo "  memory at $events events: sorted set $z B, TMCOUNT $t B ($(python3 -c "print(round($z/$t, 1))")x less); GET $($C TMCOUNT.GET "mt$events" | tr '\n' ' ')"
done

fi
if [[ $SECTIONS == *2* ]]; then
echo "== 2. unique visitors, last hour: PFCOUNT of 60 minute keys vs TMDISTINCT.COUNT"
for events in 1000 100000; do
  python3 - "$events" <<'EOF' | $C --pipe 2>&1 | tail -1 | sed "s/^/  fill: /"
import random, sys
n = int(sys.argv[1])
rng = random.Random(7)
print(f"TMDISTINCT.CREATE {{uv{n}}}t WINDOW 3600000 BUCKET 60000")
for e in range(n):
    minute = e * 60 // n
    visitor = f"user:{rng.randrange(n)}"
    print(f"PFADD {{uv{n}}}m{minute} {visitor}")
    print(f"TMDISTINCT.ADD {{uv{n}}}t {minute * 60000 + 1} {visitor}")
EOF
  keys=$(for m in $(seq 0 59); do printf '{uv%s}m%s ' "$events" "$m"; done)
  # shellcheck disable=SC2086
  hll=$(sum_mem $keys); tm=$(mem "{uv$events}t")
  # shellcheck disable=SC2086
  echo "  $events events: PFCOUNT $($C pfcount $keys), TMDISTINCT.COUNT $($C TMDISTINCT.COUNT "{uv$events}t" | tr '\n' ' ')"
  echo "  memory at $events events: 60 HyperLogLogs $hll B, TMDISTINCT $tm B ($(python3 -c "print(round($tm/$hll, 2))")x theirs)"
done
keys=$(for m in $(seq 0 59); do printf '{uv100000}m%s ' "$m"; done)
MERGE=$($C script load "redis.call('PFMERGE', KEYS[61], unpack(KEYS, 1, 60))
return redis.call('PFCOUNT', KEYS[61])")
for r in $(seq "$ROUNDS"); do
  echo " round $r (100,000 events)"
  # shellcheck disable=SC2086
  rps pfcount60 $((N / 50)) 4 1 PFCOUNT $keys
  # shellcheck disable=SC2086
  rps pfmerge60 $((N / 50)) 4 1 EVALSHA "$MERGE" 61 $keys '{uv100000}u'
  rps tmdistinct "$N" 50 16 TMDISTINCT.COUNT '{uv100000}t'
  # A window other than the cached one: every call merges its 59 buckets.
  rps tmdistinct-uncached $((N / 50)) 4 1 TMDISTINCT.COUNT '{uv100000}t' WINDOW 3540000
done

fi
if [[ $SECTIONS == *3* ]]; then
echo "== 3. top items, last 10 minutes: ZUNIONSTORE of 10 minute sets vs TMFREQ.TOP"
python3 - <<'EOF' | $C --pipe 2>&1 | tail -1 | sed "s/^/  fill: /"
import random
rng = random.Random(11)
items = 100_000
# Zipf-like weights: the heavy items the top-10 must find.
weights = [1.0 / (i + 1) for i in range(items)]
# PHI 0.005: every item with 0.5% of a minute's events is named (the heaviest few here).
print("TMFREQ.CREATE {ti}t WINDOW 600000 BUCKET 60000 EPSILON 0.002 PHI 0.005")
for m in range(10):
    # Every item once a minute (100,000 distinct in every set), then 100,000 skewed events.
    counts = [1] * items
    for i in rng.choices(range(items), weights=weights, k=100_000):
        counts[i] += 1
    for i, c in enumerate(counts):
        print(f"ZINCRBY {{ti}}m{m} {c} item:{i}")
        print(f"TMFREQ.ADD {{ti}}t {m * 60000 + 1} item:{i} {c}")
EOF
sets=$(for m in $(seq 0 9); do printf '{ti}m%s ' "$m"; done)
TOPZ=$($C script load "redis.call('ZUNIONSTORE', KEYS[11], 10, unpack(KEYS, 1, 10))
return redis.call('ZREVRANGE', KEYS[11], 0, 9, 'WITHSCORES')")
# shellcheck disable=SC2086
zs=$(sum_mem $sets); tf=$(mem '{ti}t')
echo "  memory: 10 sorted sets $zs B, TMFREQ $tf B ($(python3 -c "print(round($zs/$tf, 1))")x less)"
# shellcheck disable=SC2086
echo "  ZUNIONSTORE top 3: $($C evalsha "$TOPZ" 11 $sets '{ti}u' | head -6 | tr '\n' ' ')"
echo "  TMFREQ.TOP 3: $($C TMFREQ.TOP '{ti}t' 3 | tr '\n' ' ')"
for r in $(seq "$ROUNDS"); do
  echo " round $r"
  # shellcheck disable=SC2086
  rps zunion10 10 1 1 EVALSHA "$TOPZ" 11 $sets '{ti}u'
  rps tmfreqtop $((N / 20)) 50 16 TMFREQ.TOP '{ti}t' 10
done

fi
echo "== medians of the per-round ratios"
python3 - "$LOG" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    name, rps = line.split()
    runs.setdefault(name, []).append(float(rps))
for a, b in (("tmcount", "zlog"), ("tmcount", "fixed"), ("tmdistinct", "pfcount60"),
             ("tmdistinct", "pfmerge60"), ("tmdistinct-uncached", "pfcount60"),
             ("tmfreqtop", "zunion10")):
    q = [x / y for x, y in zip(runs.get(a, []), runs.get(b, []))]
    if q:
        print(f"{a} / {b}: {statistics.median(q):.1f}x the requests per second "
              f"(rounds {', '.join(f'{v:.1f}' for v in q)})")
PY
echo "== server time per call (INFO commandstats)"
$C info commandstats | tr -d '\r' | grep -iE "cmdstat_(pfcount|pfmerge|zunionstore|tmdistinct\.count|tmfreq\.top|tmcount\.add|zadd|zremrangebyscore):"
