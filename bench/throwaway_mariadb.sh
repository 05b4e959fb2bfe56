# Sourced by the benchmark scripts: a throwaway MariaDB server on a free
# loopback port in a temporary directory, set up as the tests' one is
# (tests/support/mariadb_server.cpp), run by an unprivileged user when the
# script runs as root. The sourcing script calls stop_mariadb when it exits.
#   start_mariadb [--option=value ...]   sets $mariadb_port and mariadb_sql()
mariadb_dir=$(mktemp -d)
mariadb_as_server() { if [ "$(id -u)" -eq 0 ]; then runuser -u nobody -- "$@"; else "$@"; fi; }
stop_mariadb() {
  if [ -f "$mariadb_dir/mariadbd.pid" ]; then
    kill "$(cat "$mariadb_dir/mariadbd.pid")" 2>/dev/null || true
    for _ in $(seq 1 100); do [ -f "$mariadb_dir/mariadbd.pid" ] || break; sleep 0.1; done
  fi
  rm -rf "$mariadb_dir"
}
start_mariadb() {
  [ "$(id -u)" -eq 0 ] && chown nobody "$mariadb_dir"
  mariadb_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  # root without a password over TCP (not Debian's unix-socket login, which
  # ties it to the system user root); native AIO off, as the server below.
  mariadb_as_server mariadb-install-db --no-defaults --datadir="$mariadb_dir/data" --tmpdir="$mariadb_dir" \
    --auth-root-authentication-method=normal --skip-test-db --skip-name-resolve --innodb-use-native-aio=0 \
    >"$mariadb_dir/install.log" 2>&1
  # --no-defaults first: no my.cnf of this machine's applies. InnoDB's own I/O
  # threads rather than io_uring or libaio, which a container may refuse. Started
  # from a subshell, so that no `wait` of the sourcing script waits for it.
  (mariadb_as_server mariadbd --no-defaults --datadir="$mariadb_dir/data" --port="$mariadb_port" \
    --bind-address=127.0.0.1 --socket="$mariadb_dir/mariadbd.sock" --pid-file="$mariadb_dir/mariadbd.pid" \
    --tmpdir="$mariadb_dir" --skip-name-resolve --skip-log-bin --innodb-use-native-aio=0 \
    --max-connections=200 "$@" >"$mariadb_dir/server.log" 2>&1 &)
  for _ in $(seq 1 300); do mariadb_sql -e "SELECT 1" >/dev/null 2>&1 && return 0; sleep 0.1; done
  cat "$mariadb_dir/server.log" >&2
  return 1
}
mariadb_sql() { mariadb --no-defaults -h 127.0.0.1 -P "$mariadb_port" -u root -N -B "$@"; }
