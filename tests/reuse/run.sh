#!/usr/bin/env bash
# Build ascend.kvpool, install the artifact into a temporary collections path, and deploy with this operator-style
# repository against the SIMULATED mock cluster: first run, second run (0 changed), health of every instance,
# teardown. Needs the mock cluster up (make sim-up) and the venv's ansible on PATH (or ANSIBLE_BIN_DIR).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
bin=${ANSIBLE_BIN_DIR:-$repo/.venv/bin}
work=$(mktemp -d /tmp/kvpool-reuse-XXXXXX)
trap 'rm -rf "$work"' EXIT

echo "== build the collection artifact"
"$bin/ansible-galaxy" collection build "$repo" --output-path "$work/dist" --force >/dev/null
artifact=$(ls "$work"/dist/ascend-kvpool-*.tar.gz)
echo "   $(basename "$artifact")"

cd "$here"
export ANSIBLE_CONFIG="$here/ansible.cfg"
export ANSIBLE_COLLECTIONS_PATH="$work/collections"
echo "== install it into $work/collections"
# --offline: the declared dependencies (community.docker) are satisfied by the ansible bundle of the venv.
"$bin/ansible-galaxy" collection install --offline --force "$artifact" -p "$work/collections" >/dev/null
export ANSIBLE_FORCE_COLOR=0 ANSIBLE_NOCOLOR=1
export KVPOOL_SIM_KEY=${KVPOOL_SIM_KEY:-$repo/.sim/id_ed25519}
export KVPOOL_REUSE_REPORT="$work/vllm.json"
found=$("$bin/ansible-galaxy" collection list ascend.kvpool 2>/dev/null | grep -c 'ascend.kvpool' || true)
where=$("$bin/ansible-galaxy" collection list ascend.kvpool 2>/dev/null | grep '^# ' | head -n 1)
echo "   ascend.kvpool resolved from: ${where#\# } ($found copy)"
[ "$found" = 1 ] && [[ "$where" == *"$work/collections"* ]] || { echo "FAIL: the collection does not come from the artifact"; exit 1; }

recap_changed() { awk '/^[^ ]+ +: ok=/ { for (i = 1; i <= NF; i++) if ($i ~ /^changed=/) { split($i, kv, "="); n += kv[2] } } END { print n + 0 }' "$1"; }

echo "== deploy.yml (first run)"
"$bin/ansible-playbook" deploy.yml >"$work/first.log" 2>&1 || { tail -n 80 "$work/first.log"; echo "FAIL: first run"; exit 1; }
echo "   changed: $(recap_changed "$work/first.log")"
echo "== deploy.yml (second run: must change nothing)"
"$bin/ansible-playbook" deploy.yml >"$work/second.log" 2>&1 || { tail -n 80 "$work/second.log"; echo "FAIL: second run"; exit 1; }
second=$(recap_changed "$work/second.log")
echo "   changed: $second"
[ "$second" = 0 ] || { grep -B4 '^changed:' "$work/second.log"; echo "FAIL: second run changed $second"; exit 1; }
python3 - "$work/vllm.json" <<'PY'
import json, sys, urllib.request
report = json.load(open(sys.argv[1]))
print("\n".join("   " + line for line in report["lines"]))
assert report["ok"] and report["healthy"] == 2, report["lines"]
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
for rows in report["status"].values():
    for st in rows:
        data = json.load(opener.open(st["endpoint"] + "/v1/models", timeout=10))
        assert [m["id"] for m in data["data"]] == ["qwen"], data
PY
echo "== teardown.yml"
"$bin/ansible-playbook" teardown.yml >"$work/teardown.log" 2>&1 || { tail -n 60 "$work/teardown.log"; echo "FAIL: teardown"; exit 1; }
echo "reuse: OK"
