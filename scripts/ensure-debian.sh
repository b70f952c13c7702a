#!/usr/bin/env bash
# The tests use real servers and a real browser from Debian's packages: Chromium for the
# HTML report, PostgreSQL for the journal (a throwaway cluster on loopback), Redis for the
# fleet's shared state (a throwaway server on loopback). On a fresh machine of this
# project's kind (Debian, root) install what is missing once; elsewhere, say how.
set -euo pipefail
missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing+=(postgresql)
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "ensure-debian: installing ${missing[*]} for the tests (once)" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
else
  echo "ensure-debian: ${missing[*]} missing; install it (apt-get install ${missing[*]}) for the tests" >&2
fi
