#!/usr/bin/env bash
# Checks that what the tests need is on this machine, and installs it when it
# can (root with apt-get). Prints what to install otherwise.
set -euo pipefail

have_pg_bin() {
  command -v initdb >/dev/null 2>&1 || compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null
}

missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
have_pg_bin || missing+=(postgresql)
# pgbouncer: pgdriver's tests run it on loopback, in transaction mode.
command -v pgbouncer >/dev/null 2>&1 || [[ -x /usr/sbin/pgbouncer ]] || missing+=(pgbouncer)

if ((${#missing[@]})); then
  if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
    echo "deps: installing ${missing[*]} with apt-get"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "deps: missing ${missing[*]}: install them (Debian/Ubuntu: sudo apt-get install ${missing[*]})" >&2
    exit 1
  fi
fi

# A local PostgreSQL server is used when it runs; start the packaged one if it
# is installed but down. Without it the tests start a throwaway cluster.
if [[ -z "${REDFENCE_TEST_DATABASE_URL:-}" ]] && command -v pg_isready >/dev/null 2>&1 \
   && ! pg_isready -q -h 127.0.0.1 -p 5432; then
  if [[ $(id -u) -eq 0 ]] && command -v pg_ctlcluster >/dev/null 2>&1 && [[ -d /etc/postgresql ]]; then
    for v in /etc/postgresql/*; do
      pg_ctlcluster --skip-systemctl-redirect "$(basename "$v")" main start >/dev/null 2>&1 || true
    done
  fi
fi
# MySQL/MariaDB for fenced/sqlfence: REDFENCE_TEST_MYSQL_DSN, or root without
# a password at 127.0.0.1:3306. When nothing listens there, install and start
# Debian's MariaDB (root with apt-get), letting root in over TCP as the tests
# expect; otherwise say what to do.
mysql_up() { (exec 3<>/dev/tcp/127.0.0.1/3306) 2>/dev/null; }
if [[ -z "${REDFENCE_TEST_MYSQL_DSN:-}" ]] && ! mysql_up; then
  if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
    if ! command -v mariadbd >/dev/null 2>&1 && ! command -v mysqld >/dev/null 2>&1; then
      echo "deps: installing mariadb-server with apt-get"
      apt-get update -qq
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mariadb-server >/dev/null
    fi
    (service mariadb start || service mysql start) >/dev/null 2>&1 || true
    for _ in $(seq 1 30); do mysql_up && break; sleep 1; done
    mariadb -uroot -e "ALTER USER 'root'@'localhost' IDENTIFIED VIA mysql_native_password USING PASSWORD(''); CREATE DATABASE IF NOT EXISTS test" >/dev/null 2>&1 || true
  fi
  if ! mysql_up; then
    echo "deps: no MySQL/MariaDB at 127.0.0.1:3306: install one (Debian/Ubuntu: sudo apt-get install mariadb-server) or set REDFENCE_TEST_MYSQL_DSN" >&2
    exit 1
  fi
fi
echo "deps: redis-server $(redis-server --version | awk '{print $3}'), postgresql ok, pgbouncer ok, mysql ok"
