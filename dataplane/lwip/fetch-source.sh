#!/usr/bin/env bash
# fetch-source.sh DEST - unpack Debian's lwIP source package into DEST/ and
# point DEST/lwip-src at it, for the source build of lwIP (dataplane/lwip/
# lwipopts.h). Idempotent. Needs root for apt (as `make` runs it).
#
# `apt-get source` needs a deb-src entry: where the machine's apt sources have
# none, one is added for the same archive and suites as its `deb` entries
# (/etc/apt/sources.list.d/inreplay-deb-src.sources). lwIP's code is never
# kept in this repository: only the options and the build glue are.
set -euo pipefail
dest=${1:?usage: fetch-source.sh DEST}
mkdir -p "$dest"
dest=$(cd "$dest" && pwd)
if [ -f "$dest/lwip-src/src/core/tcp.c" ]; then
  exit 0
fi
SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo

has_deb_src() {
  grep -rqsE '^(deb-src[[:space:]]|Types:.*deb-src)' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null
}

if ! has_deb_src; then
  # the Debian archive and suites the machine installs from
  uri= suites=
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    if grep -q '^Types:.*\bdeb\b' "$f" && grep -qE '^URIs:.*debian/?$' "$f"; then
      uri=$(sed -n 's/^URIs:[[:space:]]*//p' "$f" | head -1 | awk '{print $1}')
      suites=$(sed -n 's/^Suites:[[:space:]]*//p' "$f" | head -1)
      break
    fi
  done
  if [ -z "$uri" ] && [ -f /etc/apt/sources.list ]; then
    line=$(grep -E '^deb[[:space:]]+[^[:space:]]*debian/?[[:space:]]' /etc/apt/sources.list | head -1 || true)
    uri=$(echo "$line" | awk '{print $2}')
    suites=$(grep -E "^deb[[:space:]]+$uri[[:space:]]" /etc/apt/sources.list | awk '{print $3}' | sort -u | tr '\n' ' ')
  fi
  if [ -z "$uri" ] || [ -z "$suites" ]; then
    echo "fetch-source.sh: no Debian archive found in the apt sources to add a deb-src entry for" >&2
    exit 1
  fi
  echo "adding a deb-src entry for $uri ($suites) to fetch lwIP's source"
  printf 'Types: deb-src\nURIs: %s\nSuites: %s\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
    "$uri" "$suites" | $SUDO tee /etc/apt/sources.list.d/inreplay-deb-src.sources >/dev/null
  $SUDO apt-get update -qq
fi

cd "$dest"
apt-get source -qq lwip 2>&1 | grep -v '^W: Download is performed unsandboxed' || true
src=$(find . -maxdepth 1 -type d -name 'lwip-*' ! -name lwip-src | sort | tail -1)
if [ -z "$src" ] || [ ! -f "$src/src/core/tcp.c" ]; then
  echo "fetch-source.sh: apt-get source lwip did not unpack a source tree into $dest" >&2
  exit 1
fi
ln -sfn "${src#./}" lwip-src
echo "lwIP source: $dest/$(readlink lwip-src)"
