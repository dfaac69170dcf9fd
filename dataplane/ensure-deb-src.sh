#!/usr/bin/env bash
# ensure-deb-src.sh - make `apt-get source` work: where the machine's apt sources
# have no deb-src entry, add one for the same Debian archive and suites as its
# `deb` entries (/etc/apt/sources.list.d/inreplay-deb-src.sources) and update.
# Idempotent. Needs root for apt (sudo otherwise). Shared by the scripts that
# fetch Debian source packages into build-deps/ (lwIP, Redis's test suite).
set -euo pipefail
SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo

has_deb_src() {
  grep -rqsE '^(deb-src[[:space:]]|Types:.*deb-src)' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null
}

if has_deb_src; then
  exit 0
fi
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
  echo "ensure-deb-src.sh: no Debian archive found in the apt sources to add a deb-src entry for" >&2
  exit 1
fi
echo "adding a deb-src entry for $uri ($suites) for apt-get source"
printf 'Types: deb-src\nURIs: %s\nSuites: %s\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
  "$uri" "$suites" | $SUDO tee /etc/apt/sources.list.d/inreplay-deb-src.sources >/dev/null
$SUDO apt-get update -qq
