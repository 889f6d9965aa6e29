#!/usr/bin/env bash
# venv.sh DIR REQUIREMENTS...: make the venv DIR with these requirements files, or reuse it.
# It is reused while DIR/.req-hash holds the hash of the files and of the Python that made it; otherwise it is made
# anew (a changed pin never leaves a venv half upgraded). Used by the Makefile for the venvs of the older ansible-core
# lines and of the tools (ansible-builder), which must not go into the shared .venv.
set -euo pipefail
dir=$1; shift
hash=$( { python3 -VV; cat "$@"; } | sha256sum | cut -c1-16)
if [ -x "$dir/bin/python" ] && [ "$(cat "$dir/.req-hash" 2>/dev/null)" = "$hash" ]; then
  exit 0
fi
echo "venv: making $dir from $*"
rm -rf "$dir"
python3 -m venv "$dir"
args=()
for r in "$@"; do args+=(-r "$r"); done
"$dir/bin/pip" install -q "${args[@]}"
echo "$hash" > "$dir/.req-hash"
