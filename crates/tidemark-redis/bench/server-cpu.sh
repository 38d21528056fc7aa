#!/usr/bin/env bash
# What each request costs the server itself (BENCHMARKS.md, "Redis module", server CPU per
# request): INCR beside TM.COUNT.ADD, PFADD beside TM.DISTINCT.ADD, each pipelined as in
# redis-bench.sh, with redis-server's own CPU time (user + system, /proc/<pid>/stat) divided
# by the requests. On two cores redis-benchmark competes with the server for CPU; the server's
# CPU per request is what bounds its throughput on a machine of its own.
#
#   crates/tidemark-redis/bench/server-cpu.sh            # N=1000000 requests, two rounds
set -euo pipefail
cd "$(dirname "$0")/../../.."
N=${N:-1000000}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target}
cargo build --release -q -p tidemark-redis
SO=$(realpath "$CARGO_TARGET_DIR/release/libtidemark_redis.so")
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
DIR=$(mktemp -d)
redis-server --port "$PORT" --bind 127.0.0.1 --loadmodule "$SO" --save '' --appendonly no \
  --dir "$DIR" --daemonize yes --logfile "$DIR/log" --pidfile "$DIR/pid"
trap 'redis-cli -p "$PORT" shutdown nosave >/dev/null 2>&1 || true; rm -rf "$DIR"' EXIT
C="redis-cli -p $PORT"
for _ in $(seq 100); do $C ping >/dev/null 2>&1 && break; sleep 0.1; done
PID=$(cat "$DIR/pid")
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
echo "== machine: $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p'); $(redis-server --version | cut -d' ' -f3)"
for _ in 1 2; do
  run INCR rl:incr
  run TM.COUNT.ADD rl '*'
  run -r 1000000 PFADD hll ele:__rand_int__
  run -r 1000000 TM.DISTINCT.ADD d '*' ele:__rand_int__
done
$C info commandstats | tr -d '\r' | grep -iE "cmdstat_(incr|pfadd|tm\.count\.add|tm\.distinct\.add):"
