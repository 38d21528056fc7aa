# Sourced by the bench scripts here: moves to the workspace root, builds the module in release
# mode (with FEATURES, if set) unless SO=path/to/libtidemark_redis.so names one built elsewhere (a before/after pair),
# and picks a free loopback port and a scratch directory for a server. Sets SO, PORT and DIR.
cd "$(dirname "${BASH_SOURCE[0]}")/../../.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target}
if [ -z "${SO:-}" ]; then
  # FEATURES=bench-floor adds TM.BENCHFLOOR (server-cpu.sh with FLOOR=1).
  cargo build --release -q -p tidemark-redis ${FEATURES:+--features "$FEATURES"}
  SO=$(realpath "$CARGO_TARGET_DIR/release/libtidemark_redis.so")
fi
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
DIR=$(mktemp -d)
