#!/bin/sh
# pg-start.sh makes sure a local PostgreSQL server runs for pgstore's tests,
# and prints the URL to put in TURNFRAME_PG_URL:
#
#	export TURNFRAME_PG_URL=$(sudo scripts/pg-start.sh)
#
# Run it as root. It is idempotent: it installs Debian's postgresql package
# when it is missing, starts cluster 15 main when it is down, and creates the
# role of the user it runs as (root: a superuser, so tests can create and drop
# schemas) and the database turnframe_test unless they exist. The URL uses the
# Unix socket and peer authentication: no password, no config edit.
set -eu

version=15
cluster=main
db=turnframe_test
user=$(id -un)

if [ "$(id -u)" -ne 0 ]; then
	echo "pg-start.sh: run as root (it may install and start PostgreSQL)" >&2
	exit 1
fi

if ! command -v pg_ctlcluster >/dev/null 2>&1 || [ ! -d "/usr/lib/postgresql/$version" ]; then
	echo "pg-start.sh: installing postgresql" >&2
	apt-get update >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y postgresql >&2
fi

if ! pg_lsclusters -h | awk -v v="$version" -v c="$cluster" '$1 == v && $2 == c { found = 1 } END { exit !found }'; then
	echo "pg-start.sh: creating cluster $version $cluster" >&2
	pg_createcluster "$version" "$cluster" >&2
fi

if ! pg_lsclusters -h | awk -v v="$version" -v c="$cluster" '$1 == v && $2 == c && $4 == "online" { up = 1 } END { exit !up }'; then
	echo "pg-start.sh: starting cluster $version $cluster" >&2
	pg_ctlcluster --skip-systemctl-redirect "$version" "$cluster" start >&2
fi

# Peer authentication: the role is named after the OS user.
if ! su postgres -c "psql -tAc \"SELECT 1 FROM pg_roles WHERE rolname = '$user'\"" | grep -q 1; then
	su postgres -c "createuser -s $user" >&2
fi
if ! psql -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = '$db'" | grep -q 1; then
	createdb "$db" >&2
fi

echo "postgres:///$db?host=/var/run/postgresql"
