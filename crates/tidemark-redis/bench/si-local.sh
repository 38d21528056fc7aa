#!/usr/bin/env bash
set -euo pipefail
N=${N:-50000}
TAG=${TAG:-x}
source "$(dirname "${BASH_SOURCE[0]}")/module.sh"
valgrind --tool=callgrind --callgrind-out-file="$DIR/cg.out" redis-server --port "$PORT" \
  --bind 127.0.0.1 --loadmodule "$SO" --save '' --appendonly no --dir "$DIR" > "$DIR/log" 2>&1 &
VG=$!
trap 'redis-cli -p "$PORT" shutdown nosave >/dev/null 2>&1 || true; wait $VG 2>/dev/null || true; rm -rf "$DIR"' EXIT
C="redis-cli -p $PORT"
for _ in $(seq 300); do $C ping >/dev/null 2>&1 && break; sleep 0.2; done
$C TM.COUNT.CREATE rl WINDOW 60000 >/dev/null
$C TM.DISTINCT.CREATE d WINDOW 3600000 BUCKET 60000 >/dev/null
callgrind_control -z "$VG" >/dev/null 2>&1
redis-benchmark -p "$PORT" -n "$N" -P 16 -c 10 -r 1000000 -q "$@" >/dev/null
callgrind_control -d "$VG" >/dev/null 2>&1
sleep 1
cp "$DIR/cg.out.1" /tmp/cg-$TAG.out
n=$(grep -m1 '^summary:' "$DIR/cg.out.1" | awk '{print $2}')
echo "$*: $(python3 -c "print(round($n / $N))") instructions a request (N=$N)"
