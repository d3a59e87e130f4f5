#!/usr/bin/env bash
# A LangGraph graph keeps a user's preferences in an agent's rotifer memory:
# run it twice (the second run remembers), let the agent's own gene read the
# same entry, then look at the memory and its audit log with rotifer's commands.
# Needs rotifer with the langgraph extra on PATH (make install; then
# PATH=.venv/bin:$PATH bash examples/langgraph/demo.sh).
# DEMO_DIR=path keeps the demo project there (default: a new temporary folder).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
demo="${DEMO_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/rotifer-langgraph.XXXXXX")}"
python="${PYTHON:-python3}"
export ROTIFER_TELEMETRY="${ROTIFER_TELEMETRY:-0}"
unset ROTIFER_PROJECT ROTIFER_MEMORY_URL

step() { local w b='' e='' l=''; if [ -t 1 ]; then b=$'\033[1m' e=$'\033[0m'; fi; for w in "$@"; do if [[ $w =~ ^[A-Za-z0-9_./:=@%+,-]+$ ]]; then l+=" $w"; else l+=" '${w//\'/\'\\\'\'}'"; fi; done; printf '\n%s$%s%s\n' "$b" "$l" "$e"; "$@"; }

step rotifer init "$demo"
cp -R "$here/genes/." "$demo/genes/"
cd "$demo"
step rotifer wrap prefs
step rotifer agent create assistant --genes prefs --memory-quota 1MB

echo; echo "# First run: alice asks for a dark theme in French; the graph remembers."
step "$python" "$here/graph.py" --agent assistant --gene prefs --user alice --set theme=dark --set lang=fr

echo; echo "# Second run, a new process: nothing given; the graph finds what it kept."
out=$("$python" "$here/graph.py" --agent assistant --gene prefs --user alice)
echo "$out"
"$python" -c 'import json,sys; p=json.loads(sys.argv[1])["preferences"]; assert p == {"theme": "dark", "lang": "fr"}, p' "$out" \
    || { echo "demo: the second run did not remember alice's preferences" >&2; exit 1; }

echo; echo "# The agent's gene reads the same entry through its own ctx.memory."
step rotifer agent run assistant --input '{"user": "alice"}'

step rotifer agent memory list assistant
step rotifer agent audit show assistant
step rotifer agent audit verify assistant
echo
echo "demo: ok -- the graph remembered alice's preferences across runs."
echo "demo: project left in $demo"
