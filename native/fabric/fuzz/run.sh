#!/usr/bin/env bash
# Builds and runs the fabric's fuzz targets of network input (fuzz_targets/: the header, a bundle's
# frames, the same-host path's hello, descriptor and release, and the reassembly of chunked
# messages, whose input is events rather than wire bytes: no dictionary) for SECONDS each
# (tools/fuzz.sh); exits non-zero if any target finds a crash (its input is left in
# fuzz/artifacts/<target>/).
#
#   native/fabric/fuzz/run.sh 60
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
exec "$here/../../../tools/fuzz.sh" "$here/.." "${1:?usage: run.sh SECONDS}" fuzz_header:wire fuzz_bundle:wire fuzz_same_host:wire fuzz_reassembly
