#!/bin/sh
# Build gene.wasm from src/lib.rs with plain rustc (no cargo, no crates):
#   ./build.sh            -> gene.wasm next to this script
#   ./build.sh OUT.wasm   -> OUT.wasm
# then `rotifer compile formatter-rust` checks it and records its id.
#
# rustc needs the wasm32-unknown-unknown target (Debian: libstd-rust-dev-wasm32;
# rustup: `rustup target add wasm32-unknown-unknown`).  Set RUSTC to choose one;
# otherwise the first rustc that has the target wins (rustup's rustc on PATH
# often has no wasm target while Debian's /usr/bin/rustc does).
# Exit status 3: no rustc with the target was found.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/gene.wasm}
target=wasm32-unknown-unknown

has_target() {  # $1: a rustc; true when its sysroot holds the wasm32 std
    sysroot=$("$1" --print sysroot 2>/dev/null) || return 1
    [ -d "$sysroot/lib/rustlib/$target/lib" ]
}

if [ -n "${RUSTC:-}" ]; then
    rustc=$RUSTC
else
    rustc=
    for candidate in $(command -v rustc 2>/dev/null) /usr/bin/rustc /usr/local/bin/rustc; do
        if [ -x "$candidate" ] && has_target "$candidate"; then rustc=$candidate; break; fi
    done
fi
if [ -z "$rustc" ] || ! has_target "$rustc"; then
    echo "build.sh: no rustc with the $target target (install libstd-rust-dev-wasm32, or" \
         "run 'rustup target add $target', or set RUSTC)" >&2
    exit 3
fi

# --edition 2021: plain rustc defaults to 2015.  strip=debuginfo keeps function
# names (for readable traps) and drops the 5 MB of std's debug info.
exec "$rustc" --edition 2021 --target "$target" -O -C strip=debuginfo \
    --crate-type cdylib "$here/src/lib.rs" -o "$out"
