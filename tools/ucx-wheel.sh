#!/usr/bin/env bash
# Unpacks a second UCX, from PyPI's libucx-cu12 wheel, at DEST: DEST/libucx/{include,lib,bin} with
# lib/pkgconfig/*.pc rewritten to point at DEST, and DEST/env.sh that sets PKG_CONFIG_PATH and
# LD_LIBRARY_PATH for it. The fabric builds and tests against it as it does against Debian's UCX.
#
#   tools/ucx-wheel.sh VERSION SHA256 DEST
#
# Why this wheel: it is the only current UCX a package registry ships with headers, pkg-config files
# and libraries (plus ucx_info and ucx_perftest). It is built without verbs (and its CUDA modules load
# nothing without a GPU), so it is a target for UCX's current API and behaviour, not a cluster's UCX.
# The wheel is platform-specific (x86_64 Linux) but Python-independent (py3-none), so pip is asked
# for that platform explicitly and the file is checked against SHA256 before anything is unpacked.
#
# Idempotent: a finished DEST has a stamp naming version and checksum; a second run returns at once.
# Atomic: built beside DEST and renamed into place, so an interrupted run leaves no half-filled DEST.
set -euo pipefail

[ $# -eq 3 ] || { echo "usage: $0 VERSION SHA256 DEST" >&2; exit 2; }
version=$1
sha256=$2
dest=$(realpath -m "$3")
[[ "$sha256" =~ ^[0-9a-f]{64}$ ]] || { echo "ucx-wheel: SHA256 must be 64 lowercase hex digits" >&2; exit 2; }

stamp_file="$dest/.ucx-wheel"
stamp="libucx-cu12 $version sha256 $sha256"
if [ -f "$stamp_file" ] && [ "$(cat "$stamp_file")" = "$stamp" ]; then
  exit 0
fi

mkdir -p "$(dirname "$dest")"
exec 9>"$(dirname "$dest")/.$(basename "$dest").lock"
flock 9
if [ -f "$stamp_file" ] && [ "$(cat "$stamp_file")" = "$stamp" ]; then
  exit 0
fi

work=$(mktemp -d "$(dirname "$dest")/.ucx-wheel-$version.XXXXXX")
trap 'rm -rf "$work"' EXIT

python3 -m pip download --quiet --no-deps --only-binary=:all: \
  --platform manylinux_2_28_x86_64 --implementation py --python-version 3.11 \
  --dest "$work/download" "libucx-cu12==$version"
wheels=("$work"/download/libucx_cu12-"$version"-*.whl)
[ ${#wheels[@]} -eq 1 ] && [ -f "${wheels[0]}" ] || { echo "ucx-wheel: expected one libucx_cu12-$version wheel, got: ${wheels[*]}" >&2; exit 1; }
actual=$(sha256sum "${wheels[0]}" | cut -d' ' -f1)
[ "$actual" = "$sha256" ] || { echo "ucx-wheel: $(basename "${wheels[0]}"): sha256 $actual, expected $sha256" >&2; exit 1; }

home="$work/home"
mkdir -p "$home"
# libucx/ is UCX; libucx_cu12.libs/ holds libgomp, which the wheel's ucx_perftest needs (by RPATH).
unzip -q "${wheels[0]}" 'libucx/*' 'libucx_cu12.libs/*' -d "$home"
chmod +x "$home"/libucx/bin/*

# The .pc files name the wheel builder's directory; pkg-config must see where UCX lives now.
prefix="$dest/libucx"
for pc in "$home"/libucx/lib/pkgconfig/*.pc; do
  sed -i -E "s|^prefix *=.*|prefix=$prefix|" "$pc"
done
PKG_CONFIG_PATH="$home/libucx/lib/pkgconfig" pkg-config --exact-version="$version" ucx \
  || { echo "ucx-wheel: the wheel's ucx.pc does not say version $version" >&2; exit 1; }
for required in include/ucp/api/ucp.h lib/libucp.so lib/libucs.so bin/ucx_info bin/ucx_perftest; do
  [ -e "$home/libucx/$required" ] || { echo "ucx-wheel: $required missing in the wheel" >&2; exit 1; }
done

cat > "$home/env.sh" <<ENV
# Source this to build and run against UCX $version from $dest.
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig\${PKG_CONFIG_PATH:+:\$PKG_CONFIG_PATH}"
export LD_LIBRARY_PATH="$prefix/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
export PATH="$prefix/bin:\$PATH"
ENV
echo "$stamp" > "$home/.ucx-wheel"

rm -rf "$dest"
mv "$home" "$dest"
# Not `grep -q`: under pipefail a writer cut off by its early exit fails the check (see the Makefile).
LD_LIBRARY_PATH="$prefix/lib" "$prefix/bin/ucx_info" -v | grep "Library version: $version" >/dev/null \
  || { echo "ucx-wheel: $prefix/bin/ucx_info does not report version $version" >&2; exit 1; }
echo "ucx-wheel: UCX $version in $dest"
