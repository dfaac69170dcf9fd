#!/usr/bin/env bash
# patch-source.sh SRC DEST [PATCH...] - copy lwIP's src/ from Debian's source
# tree SRC into DEST/src (line ends made LF, as our patches are) and apply the
# PATCHes in order (dataplane/lwip/patches/NNNN-*.patch; meson passes them, less
# any that -Dlwip_skip_patches names). The copy lives in the build directory:
# Debian's tree is never changed and lwIP's code is never kept in this repository.
set -euo pipefail
src=${1:?usage: patch-source.sh SRC DEST [PATCH...]}
dest=${2:?usage: patch-source.sh SRC DEST [PATCH...]}
shift 2
if [ ! -f "$src/src/core/tcp.c" ]; then
  echo "patch-source.sh: no lwIP source in $src (run dataplane/lwip/fetch-source.sh build-deps)" >&2
  exit 1
fi
tmp="$dest.tmp"
rm -rf "$tmp"
mkdir -p "$tmp"
cp -a "$src/src" "$tmp/src"
find "$tmp/src" -name '*.[ch]' -exec sed -i 's/\r$//' {} +
for p in "$@"; do
  if ! out=$(patch -d "$tmp" -p1 --batch --forward --no-backup-if-mismatch < "$p" 2>&1); then
    echo "patch-source.sh: $(basename "$p") does not apply to $src:" >&2
    echo "$out" >&2
    rm -rf "$tmp"
    exit 1
  fi
  echo "lwIP patch applied: $(basename "$p")"
done
rm -rf "$dest"
mv "$tmp" "$dest"
