#!/usr/bin/env bash
# The shared budget and breaker are tested against a real Redis: the tests start a
# throwaway redis-server on loopback and stop it after. On a fresh machine of this
# project's kind (Debian, root) install it once; elsewhere, say how.
set -euo pipefail
command -v redis-server >/dev/null 2>&1 && exit 0
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "ensure-redis: installing Debian's redis-server for the shared-state tests (once)" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
else
  echo "ensure-redis: redis-server is missing; install it (apt-get install redis-server) for the shared-state tests" >&2
fi
