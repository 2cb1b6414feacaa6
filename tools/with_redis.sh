#!/usr/bin/env bash
# Runs a command beside a throw-away redis-server: a free loopback port, a temporary directory,
# no persistence. AGENTBREAKER_REDIS_URL names it (redis://127.0.0.1:<port>/0) in the command's
# environment. The server is stopped when the command ends, also when it fails or is interrupted.
#
#   tools/with_redis.sh cargo test -p agentbreaker --test conformance
set -euo pipefail
if [ $# -eq 0 ]; then
  echo "usage: $0 command [args...]" >&2
  exit 2
fi
dir=$(mktemp -d "${TMPDIR:-/tmp}/agentbreaker-redis.XXXXXX")
pid=""
cleanup() {
  if [ -n "$pid" ]; then
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
for attempt in 1 2 3 4 5; do
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  redis-server --port "$port" --bind 127.0.0.1 --dir "$dir" --save '' --appendonly no \
    --daemonize no --loglevel warning >"$dir/server.log" 2>&1 &
  pid=$!
  for _ in $(seq 100); do
    if redis-cli -p "$port" ping 2>/dev/null | grep -q PONG; then
      break 2
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
      break
    fi
    sleep 0.05
  done
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  pid=""
  echo "redis-server did not start on port $port (attempt $attempt):" >&2
  cat "$dir/server.log" >&2
done
if [ -z "$pid" ]; then
  exit 1
fi
echo "== redis-server $(redis-server --version | awk '{print $3}') on 127.0.0.1:$port (pid $pid)"
export AGENTBREAKER_REDIS_URL="redis://127.0.0.1:$port/0"
"$@"
