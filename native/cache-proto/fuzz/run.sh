#!/usr/bin/env bash
# Builds and runs cache-proto's fuzz targets for SECONDS each (tools/fuzz.sh); exits non-zero if
# any target finds a crash (its input is left in fuzz/artifacts/<target>/).
#
#   native/cache-proto/fuzz/run.sh 60
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
exec "$here/../../../tools/fuzz.sh" "$here/.." "${1:?usage: run.sh SECONDS}" fuzz_text:text fuzz_meta:text fuzz_binary
