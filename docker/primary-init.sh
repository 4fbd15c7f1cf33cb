#!/bin/sh
# Runs once, when the primary's data volume is first initialized (the official image's
# /docker-entrypoint-initdb.d): the role the streaming replica copies and follows the
# primary with, and the pg_hba.conf line that lets it connect for replication.
# A primary initialized before this script existed: run the same two steps by hand
# (docs/scaling.md, "Adding a replica to a running primary").
set -eu
: "${REPLICATION_USER:=replicator}"
: "${REPLICATION_PASSWORD:?set REPLICATION_PASSWORD}"

psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
    --set=user="$REPLICATION_USER" --set=password="$REPLICATION_PASSWORD" <<'SQL'
SELECT format('CREATE ROLE %I WITH REPLICATION LOGIN PASSWORD %L', :'user', :'password')
WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = :'user') \gexec
SQL

echo "host replication $REPLICATION_USER all scram-sha-256" >> "$PGDATA/pg_hba.conf"
