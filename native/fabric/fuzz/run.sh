#!/usr/bin/env bash
# Builds and runs the fabric's wire-format fuzz targets (fuzz_targets/: the header, a bundle's
# frames, the same-host path's hello, descriptor and release) for SECONDS each; exits non-zero if
# any target finds a crash (its input is left in fuzz/artifacts/<target>/). Stable Rust:
# RUSTC_BOOTSTRAP=1 lets cargo-fuzz pass its nightly-only sanitizer flags; FUZZ_SANITIZER=none
# builds without one. Same shape as native/cache-proto/fuzz/run.sh.
#
#   native/fabric/fuzz/run.sh 60
set -uo pipefail

seconds="${1:?usage: run.sh SECONDS}"
crate_dir="$(cd "$(dirname "$0")/.." && pwd)"
cd "$crate_dir"

if command -v cargo-fuzz >/dev/null 2>&1; then
    cargo_fuzz=(cargo-fuzz)
elif [ -x "$HOME/.cargo/bin/cargo-fuzz" ]; then
    cargo_fuzz=("$HOME/.cargo/bin/cargo-fuzz")
else
    echo "run.sh: cargo-fuzz is not installed (cargo install cargo-fuzz)" >&2
    exit 2
fi

export RUSTC_BOOTSTRAP=1
sanitizer="${FUZZ_SANITIZER:-address}"
failed=()
for target in fuzz_header fuzz_bundle fuzz_same_host; do
    corpus="fuzz/corpus/$target"
    mkdir -p "$corpus"
    echo "== $target: ${seconds}s (sanitizer: $sanitizer)"
    if ! "${cargo_fuzz[@]}" run -O -s "$sanitizer" "$target" "$corpus" -- \
        -max_total_time="$seconds" -print_final_stats=1 -dict=fuzz/dictionaries/wire.dict 2>"fuzz/$target.log"; then
        failed+=("$target")
        tail -n 40 "fuzz/$target.log" >&2
    else
        grep -E "^Done|stat::number_of_executed_units" "fuzz/$target.log" | tail -n 2
    fi
done

if [ "${#failed[@]}" -gt 0 ]; then
    echo "run.sh: failed: ${failed[*]} (logs in fuzz/<target>.log, crash inputs in $crate_dir/fuzz/artifacts/)" >&2
    exit 1
fi
echo "run.sh: no crash in ${seconds}s per target"
