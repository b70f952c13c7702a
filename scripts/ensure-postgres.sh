#!/usr/bin/env bash
# The Postgres journal is tested against a real server: the tests start a throwaway cluster
# from Debian's postgresql binaries on loopback and remove it after. On a fresh machine of
# this project's kind (Debian, root) install them once; elsewhere, say how.
set -euo pipefail
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && exit 0
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "ensure-postgres: installing Debian's postgresql for the journal tests (once)" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
else
  echo "ensure-postgres: postgresql is missing; install it (apt-get install postgresql) for the journal tests" >&2
fi
