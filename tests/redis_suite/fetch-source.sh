#!/usr/bin/env bash
# fetch-source.sh DEST - unpack Debian's redis source package (Redis 7.0.15 on
# Debian 12: the version of the installed redis-server where there is one) into
# DEST/ and point DEST/redis-src at it, for Redis's own test suite
# (tests/redis_suite/run.py). Idempotent. Needs root for apt (sudo otherwise).
# Redis's code is never kept in this repository: only the runner, the skip-list
# and the harness patches are.
set -euo pipefail
dest=${1:?usage: fetch-source.sh DEST}
mkdir -p "$dest"
dest=$(cd "$dest" && pwd)
if [ -f "$dest/redis-src/tests/test_helper.tcl" ]; then
  exit 0
fi
"$(dirname "$0")/../../dataplane/ensure-deb-src.sh"

# the source of the stock server the suite compares against, if installed
ver=$(dpkg-query -W -f='${source:Version}' redis-server 2>/dev/null || true)
cd "$dest"
fetch() {
  apt-get source -qq "$1" 2>&1 | grep -v '^W: Download is performed unsandboxed' || true
}
if [ -n "$ver" ]; then
  apt-get source -qq "redis=$ver" >/dev/null 2>&1 || true
fi
if ! find . -maxdepth 1 -type d -name 'redis-[0-9]*' | grep -q .; then
  # that exact Debian revision has no source in the index (a security update,
  # say): take the archive's, and say so when the upstream version differs
  fetch redis
  up=${ver#*:}; up=${up%%-*}
  if [ -n "$ver" ] && ! find . -maxdepth 1 -type d -name "redis-$up" | grep -q .; then
    echo "fetch-source.sh: warning: redis-server is $ver but the archive's source is not $up" >&2
  fi
fi
src=$(find . -maxdepth 1 -type d -name 'redis-[0-9]*' | sort -V | tail -1)
if [ -z "$src" ] || [ ! -f "$src/tests/test_helper.tcl" ]; then
  echo "fetch-source.sh: apt-get source redis did not unpack a source tree into $dest" >&2
  exit 1
fi
ln -sfn "${src#./}" redis-src
echo "Redis source: $dest/$(readlink redis-src)"
