# Sourced by the benchmark scripts: a throwaway PostgreSQL on a free loopback
# port in a temporary directory, stopped and removed when the script exits.
#   start_postgresql [-c name=value ...]   sets $work, $port, $pgbin and psql()
work=$(mktemp -d)
pgbin=$(pg_config --bindir 2>/dev/null || echo /usr/lib/postgresql/15/bin)
as_server() { if [ "$(id -u)" -eq 0 ]; then runuser -u nobody -- "$@"; else "$@"; fi; }
stop_postgresql() {
  [ -f "$work/pg/data/postmaster.pid" ] && as_server "$pgbin/pg_ctl" -D "$work/pg/data" -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap stop_postgresql EXIT
start_postgresql() {
  mkdir -p "$work/pg"
  [ "$(id -u)" -eq 0 ] && chown nobody "$work" "$work/pg"
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  as_server "$pgbin/initdb" -D "$work/pg/data" -A trust -E UTF8 -U postgres --no-sync >/dev/null
  as_server "$pgbin/pg_ctl" -D "$work/pg/data" -l "$work/pg/log" -w start \
    -o "-p $port -k $work/pg -c listen_addresses=127.0.0.1 $*" >/dev/null
}
psql() { "$pgbin/psql" -q -X -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U postgres -At "$@"; }
