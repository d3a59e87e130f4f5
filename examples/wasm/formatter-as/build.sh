#!/bin/sh
# Build gene.wasm from assembly/index.ts with the AssemblyScript compiler:
#   ./build.sh            -> gene.wasm next to this script
#   ./build.sh OUT.wasm   -> OUT.wasm
# then `rotifer compile formatter-as` checks it and records its id.
#
# Needs asc (npm install --save-dev assemblyscript; rotifer's own checkout pins
# it in package.json, `make node-deps`).  Set ASC to choose one; otherwise asc
# on PATH, else node_modules/.bin/asc in this folder or any folder above it,
# else in $ROTIFER_NODE_MODULES, else in the checkout of the rotifer on PATH
# (so a copy in another project's genes/ finds the one `make node-deps` put there).
# ASC_FLAGS adds options (e.g. --use abort= to drop the env.abort import).
# Exit status 3: no asc was found.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/gene.wasm}
asc=${ASC:-}
if [ -z "$asc" ]; then
    asc=$(command -v asc 2>/dev/null || true)
    dir=$here
    while [ -z "$asc" ] && [ "$dir" != / ]; do
        if [ -x "$dir/node_modules/.bin/asc" ]; then asc=$dir/node_modules/.bin/asc; fi
        dir=$(dirname "$dir")
    done
fi
if [ -z "$asc" ] && [ -n "${ROTIFER_NODE_MODULES:-}" ] && [ -x "$ROTIFER_NODE_MODULES/.bin/asc" ]; then
    asc=$ROTIFER_NODE_MODULES/.bin/asc
fi
if [ -z "$asc" ] && rotifer=$(command -v rotifer 2>/dev/null); then
    # The Python beside the rotifer script knows where the package is; a source
    # checkout's node_modules is two folders above src/rotifer.
    py=$(dirname "$rotifer")/python
    [ -x "$py" ] || py=python3
    checkout=$("$py" -c 'import pathlib, rotifer; print(pathlib.Path(rotifer.__file__).resolve().parents[2])' 2>/dev/null || true)
    if [ -n "$checkout" ] && [ -x "$checkout/node_modules/.bin/asc" ]; then
        asc=$checkout/node_modules/.bin/asc
    fi
fi
if [ -z "$asc" ] || ! [ -x "$asc" ]; then
    echo "build.sh: no asc found (npm install --save-dev assemblyscript, or set ASC)" >&2
    exit 3
fi

if ! command -v node >/dev/null 2>&1; then
    echo "build.sh: asc needs node (install nodejs)" >&2
    exit 3
fi

# Default options plus --optimize: the module imports env.abort (which rotifer
# provides: an abort fails the run with its message), the rotifer functions
# the gene calls, and exports memory, express and alloc.
# shellcheck disable=SC2086  # ASC_FLAGS is a list of options
exec "$asc" "$here/assembly/index.ts" --optimize -o "$out" ${ASC_FLAGS:-}
