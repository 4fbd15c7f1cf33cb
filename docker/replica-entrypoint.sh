#!/bin/sh
# A hot-standby streaming replica of the primary (service db-replica, profile scale).
# Its first start copies the primary with pg_basebackup (--write-recovery-conf writes
# standby.signal and primary_conninfo, so PostgreSQL starts as a standby and streams
# the primary's WAL from then on); every later start finds the copy and just runs it.
# A replica that fell further behind than the primary keeps WAL for (wal_keep_size)
# stops replaying: remove its volume and it copies the primary again at its next start.
set -eu
: "${PRIMARY_HOST:=db}"
: "${PRIMARY_PORT:=5432}"
: "${REPLICATION_USER:=replicator}"
: "${REPLICATION_PASSWORD:?set REPLICATION_PASSWORD}"

if [ ! -s "$PGDATA/PG_VERSION" ]; then
    mkdir -p "$PGDATA"
    chown postgres:postgres "$PGDATA"
    chmod 700 "$PGDATA"
    until PGPASSWORD="$REPLICATION_PASSWORD" gosu postgres pg_basebackup \
        --host "$PRIMARY_HOST" --port "$PRIMARY_PORT" --username "$REPLICATION_USER" \
        --pgdata "$PGDATA" --wal-method stream --write-recovery-conf \
        --checkpoint fast --no-password
    do
        echo "pg_basebackup from $PRIMARY_HOST failed; trying again in 5 s" >&2
        find "$PGDATA" -mindepth 1 -delete
        sleep 5
    done
fi

exec docker-entrypoint.sh "$@"
