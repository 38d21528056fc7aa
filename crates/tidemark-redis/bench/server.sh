# Sourced by the bench scripts here: builds the module (module.sh; or takes $SO) and starts
# redis-server with it on a free loopback port, stopped and cleaned up when the script exits. Sets SO, PORT,
# DIR, PID (the server's) and C (a redis-cli for it), and prints the machine line.
source "$(dirname "${BASH_SOURCE[0]}")/module.sh"
redis-server --port "$PORT" --bind 127.0.0.1 --loadmodule "$SO" --save '' --appendonly no \
  --dir "$DIR" --daemonize yes --logfile "$DIR/log" --pidfile "$DIR/pid"
trap 'redis-cli -p "$PORT" shutdown nosave >/dev/null 2>&1 || true; rm -rf "$DIR"' EXIT
C="redis-cli -p $PORT"
for _ in $(seq 100); do $C ping >/dev/null 2>&1 && break; sleep 0.1; done
$C ping >/dev/null || { cat "$DIR/log"; exit 1; }
PID=$(cat "$DIR/pid")
echo "== machine: $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p'); $(redis-server --version | cut -d' ' -f3)"
