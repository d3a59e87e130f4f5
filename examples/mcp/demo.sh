#!/usr/bin/env bash
# A project with the agent 'assistant' (genes notes and planner), then a session of an
# MCP client with `rotifer mcp assistant --as notes`, and the audit lines it left.
# Run from the repository: PATH=.venv/bin:$PATH bash examples/mcp/demo.sh
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
work="$(mktemp -d)"
chmod 711 "$work"  # as root, contained genes run as nobody, who must pass through it
trap 'rm -rf "$work"' EXIT
# rotifer and python as found now, made absolute (PATH may hold a relative .venv/bin)
bin="$(cd "$(dirname "$(command -v rotifer)")" && pwd)"
PATH="$bin:$PATH"
python="$bin/python"
step() { echo "\$ $*"; "$@"; }

cd "$work"
step rotifer init project > /dev/null
cd project
for gene in notes planner; do
  mkdir -p "genes/$gene"
  printf '{"name": "%s", "domain": "assistant", "version": "1.0.0", "fidelity": "Native", "inputSchema": {}, "outputSchema": {}}\n' "$gene" > "genes/$gene/phenotype.json"
  printf 'def express(input, ctx):\n    return input\n' > "genes/$gene/gene.py"
  rotifer wrap "$gene" > /dev/null
done
step rotifer agent create assistant --genes notes,planner --memory-quota 4KB
step "$python" "$here/session.py" "$PWD"
step rotifer agent audit show assistant
step rotifer agent audit show assistant --key notes/meeting --json
