#!/usr/bin/env bash
# The seed's example end to end, through the `rotifer` command:
#   a formatter gene remembers the indent a user asked for; the second run,
#   without an indent, uses the remembered one; then the gene is replaced by a
#   better formatter in the same domain, which still finds it.
# Run it with `make demo` (which puts the project's .venv on PATH first).
# DEMO_DIR=path keeps the demo project there (default: a new temporary folder).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
demo="${DEMO_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/rotifer-demo.XXXXXX")}"
export ROTIFER_TELEMETRY="${ROTIFER_TELEMETRY:-0}"
unset ROTIFER_PROJECT ROTIFER_MEMORY_URL

# Bold only on a terminal: piped (make demo | tee log), no escape codes.
if [ -t 1 ]; then bold=$'\033[1m' plain=$'\033[0m'; else bold='' plain=''; fi
shown() {  # the command as a line you can paste: words quoted where a shell needs it
    local w out=''
    for w in "$@"; do
        if [[ $w =~ ^[A-Za-z0-9_./:=@%+,-]+$ ]]; then out+=" $w"
        else out+=" '${w//\'/\'\\\'\'}'"; fi
    done
    printf '\n%s$%s%s\n' "$bold" "$out" "$plain"
}
step() { shown "$@"; "$@"; }
expect_indent() {  # the agent's output must report this indent
    python3 -c 'import json,sys; out=json.loads(sys.argv[1]); assert out["indent"] == int(sys.argv[2]), out; print(out["formatted"])' "$1" "$2" \
        || { echo "demo: expected indent $2, got: $1" >&2; exit 1; }
}

run_fmt() {  # sets $out to the agent's output
    shown rotifer agent run fmt --input "$1"
    out=$(rotifer agent run fmt --input "$1"); echo "$out"
}

CODE='function greet(name) {
if (name) {
return "hello " + name;
}
}'
INPUT4=$(python3 -c 'import json,sys; print(json.dumps({"code": sys.argv[1], "indent": 4}))' "$CODE")
INPUT=$(python3 -c 'import json,sys; print(json.dumps({"code": sys.argv[1]}))' "$CODE")

# A rerun with the same DEMO_DIR starts the demo project afresh (the mark says
# this demo made it); a folder that holds another project is left alone.
if [ -d "$demo/.rotifer" ]; then
    if [ -f "$demo/.rotifer/made-by-demo" ]; then
        echo "demo: starting $demo afresh (made by an earlier make demo)"
        rm -rf "$demo/.rotifer" "$demo/genes"
    else
        echo "demo: $demo already holds a rotifer project; pick another DEMO_DIR" >&2
        exit 1
    fi
fi
step rotifer init "$demo"
# mktemp made it 0700; as root, contained genes run as nobody, who must pass through.
[ -n "${DEMO_DIR:-}" ] || chmod 711 "$demo"
: > "$demo/.rotifer/made-by-demo"
cp -R "$here/genes/." "$demo/genes/"
cd "$demo"
step rotifer wrap formatter
step rotifer test formatter
step rotifer agent create fmt --genes formatter --memory-quota 1MB

echo; echo "# First run: the user asks for 4 spaces; the gene remembers it."
run_fmt "$INPUT4"
expect_indent "$out" 4

echo; echo "# Second run: no indent given; the gene uses the remembered one."
run_fmt "$INPUT"
expect_indent "$out" 4

step rotifer agent memory list fmt

echo; echo "# Swap in a better formatter of the same domain: the memory stays."
step rotifer wrap better-formatter
step rotifer agent update-genes fmt --genes better-formatter
run_fmt "$INPUT"
expect_indent "$out" 4

echo; echo "# What was recorded (.rotifer/audit.jsonl):"
cat .rotifer/audit.jsonl
echo
echo "demo: ok -- the better formatter found the indent (4) the first formatter remembered."
echo "demo: project left in $demo"
echo "demo: see it in a browser: rotifer --project $demo console"
echo "demo: next, your own gene: see 'Your first gene' in README.md (rotifer new gene NAME)"
if [ -d "$here/../../node_modules/typescript" ]; then
    echo "demo: TypeScript genes are ready here (node_modules/typescript): rotifer new gene NAME --typescript"
else
    echo "demo: TypeScript genes need the pinned compiler: run 'make node-deps' once in $(cd "$here/../.." && pwd)"
fi
