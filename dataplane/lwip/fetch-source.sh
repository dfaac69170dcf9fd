#!/usr/bin/env bash
# fetch-source.sh DEST - unpack Debian's lwIP source package into DEST/ and
# point DEST/lwip-src at it, for the source build of lwIP (dataplane/lwip/
# lwipopts.h). Idempotent. Needs root for apt (as `make` runs it).
#
# `apt-get source` needs a deb-src entry: dataplane/ensure-deb-src.sh adds one where
# the machine's apt sources have none. lwIP's code is never kept in this
# repository: only the options and the build glue are.
set -euo pipefail
dest=${1:?usage: fetch-source.sh DEST}
mkdir -p "$dest"
dest=$(cd "$dest" && pwd)
if [ -f "$dest/lwip-src/src/core/tcp.c" ]; then
  exit 0
fi
"$(dirname "$0")/../ensure-deb-src.sh"

cd "$dest"
apt-get source -qq lwip 2>&1 | grep -v '^W: Download is performed unsandboxed' || true
src=$(find . -maxdepth 1 -type d -name 'lwip-*' ! -name lwip-src | sort | tail -1)
if [ -z "$src" ] || [ ! -f "$src/src/core/tcp.c" ]; then
  echo "fetch-source.sh: apt-get source lwip did not unpack a source tree into $dest" >&2
  exit 1
fi
ln -sfn "${src#./}" lwip-src
echo "lwIP source: $dest/$(readlink lwip-src)"
