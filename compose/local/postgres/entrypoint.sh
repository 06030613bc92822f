#!/bin/sh
# The part of the official image's docker-entrypoint.sh the compose file relies on: a cluster made on
# first start with the superuser password and database from the environment, password auth from other
# containers and the host, then the server as PID 1 (so `docker stop` reaches it) as user postgres.
set -eu
if [ "${1:-}" != postgres ]; then
  exec "$@"
fi
shift
mkdir -p "$PGDATA" /run/postgresql
chown postgres:postgres "$PGDATA" /run/postgresql
chmod 700 "$PGDATA"
as_pg() { setpriv --reuid=postgres --regid=postgres --init-groups "$@"; }
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  : "${POSTGRES_PASSWORD:?POSTGRES_PASSWORD must be set, as for the official image}"
  pw=$(mktemp)
  printf '%s\n' "$POSTGRES_PASSWORD" > "$pw"
  chown postgres "$pw"
  as_pg initdb -D "$PGDATA" -U postgres --pwfile="$pw" --encoding=UTF8 --locale=C.UTF-8 \
    --auth-local=trust --auth-host=scram-sha-256 >/dev/null
  rm -f "$pw"
  echo "host all all all scram-sha-256" >> "$PGDATA/pg_hba.conf"
  db="${POSTGRES_DB:-postgres}"
  if [ "$db" != postgres ]; then
    echo "CREATE DATABASE \"$db\";" | as_pg postgres --single -D "$PGDATA" -j postgres >/dev/null
  fi
fi
exec setpriv --reuid=postgres --regid=postgres --init-groups postgres -D "$PGDATA" -c listen_addresses='*' "$@"
