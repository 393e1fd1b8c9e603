# Shell helpers shared by services.sh and spark-cluster.sh (sourced, not run).
# Needs HERE (this folder) set by the caller; sets PY and HOST if unset.

# The project's interpreter: $REPLMON_PYTHON, else the repo's .venv (made by deploy/dev.sh
# setup), else python3.
PY="${REPLMON_PYTHON:-}"
if [ -z "$PY" ]; then
  if [ -x "$HERE/../../.venv/bin/python" ]; then PY="$(cd "$HERE/../.." && pwd)/.venv/bin/python"; else PY=python3; fi
fi
HOST="${HOST:-127.0.0.1}"

# port_open PORT: something accepts TCP connections on HOST:PORT.
port_open() { (exec 3<>"/dev/tcp/$HOST/$1") 2>/dev/null; }

# pid_matches PIDFILE PATTERN: the pid in PIDFILE is alive, not a zombie, and
# its command line contains PATTERN (guards against a recycled pid).
pid_matches() {
  local f="$1" pat="$2" pid
  [ -s "$f" ] || return 1
  pid="$(cat "$f")"
  [ -r "/proc/$pid/cmdline" ] || return 1
  [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" != Z ] || return 1
  tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$pat"
}
