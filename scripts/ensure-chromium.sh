#!/usr/bin/env bash
# The HTML report is tested in Debian's headless Chromium. On a fresh machine of this
# project's kind (Debian, root) install it once, so that `npm install && npm test` passes;
# elsewhere, say how to get it (the report test fails with the same advice).
set -euo pipefail
command -v chromium >/dev/null 2>&1 && exit 0
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "ensure-chromium: installing Debian's chromium for the HTML report test (once)" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
else
  echo "ensure-chromium: chromium is missing; install it (apt-get install chromium) for the HTML report test" >&2
fi
