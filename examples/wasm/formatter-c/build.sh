#!/bin/sh
# Build gene.wasm from gene.c with clang, freestanding (no libc, no WASI):
#   ./build.sh            -> gene.wasm next to this script
#   ./build.sh OUT.wasm   -> OUT.wasm
# then `rotifer compile formatter-c` checks it and records its id.
#
# Needs clang and wasm-ld (Debian: clang, lld).  Set CC to choose a clang.
# Exit status 3: no clang that can link wasm32 was found.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/gene.wasm}
cc=${CC:-}
if [ -z "$cc" ]; then
    for candidate in clang clang-19 clang-18 clang-17 clang-16 clang-15 clang-14; do
        if command -v "$candidate" >/dev/null 2>&1; then cc=$candidate; break; fi
    done
fi
if [ -z "$cc" ] || ! command -v "$cc" >/dev/null 2>&1; then
    echo "build.sh: no clang found (install clang and lld, or set CC)" >&2
    exit 3
fi
if ! command -v wasm-ld >/dev/null 2>&1 && ! "$cc" -print-prog-name=wasm-ld | grep -q /; then
    echo "build.sh: no wasm-ld found (install lld)" >&2
    exit 3
fi

# -nostdlib: nothing but rotifer's host functions is imported.
# -mbulk-memory: copies and fills become memory.copy/memory.fill, not calls
#   to memcpy/memset (which a freestanding module does not have).
# --no-entry: a gene is a library with exports, not a program with main.
# wasm-ld exports the linear memory as "memory"; `express` and `alloc` are
# marked export_name in the source.
exec "$cc" --target=wasm32-unknown-unknown -O2 -nostdlib -mbulk-memory \
    -Wall -Wextra -Wl,--no-entry -Wl,--strip-debug \
    -o "$out" "$here/gene.c"
