#!/usr/bin/env bash
# Builds and runs a crate's cargo-fuzz targets for SECONDS each; exits non-zero if any target finds
# a crash (its input is left in <crate>/fuzz/artifacts/<target>/). Both fuzz crates' run.sh call
# this with their targets. TARGET:DICT gives the target libFuzzer's dictionary
# <crate>/fuzz/dictionaries/DICT.dict. Stable Rust: RUSTC_BOOTSTRAP=1 lets cargo-fuzz pass its
# nightly-only sanitizer flags; FUZZ_SANITIZER=none builds without one.
#
#   tools/fuzz.sh native/fabric 60 fuzz_header:wire fuzz_bundle:wire
set -uo pipefail

crate_dir="$(cd "${1:?usage: fuzz.sh CRATE_DIR SECONDS TARGET[:DICT]...}" && pwd)"
seconds="${2:?usage: fuzz.sh CRATE_DIR SECONDS TARGET[:DICT]...}"
shift 2
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
for spec in "$@"; do
    target="${spec%%:*}"
    dictionary=()
    if [ "$spec" != "$target" ]; then
        dictionary=(-dict="fuzz/dictionaries/${spec#*:}.dict")
    fi
    corpus="fuzz/corpus/$target"
    mkdir -p "$corpus"
    echo "== $target: ${seconds}s (sanitizer: $sanitizer)"
    if ! "${cargo_fuzz[@]}" run -O -s "$sanitizer" "$target" "$corpus" -- \
        -max_total_time="$seconds" -print_final_stats=1 "${dictionary[@]}" 2>"fuzz/$target.log"; then
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
