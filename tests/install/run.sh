#!/usr/bin/env bash
# The built artifact installs and works in an environment with ansible-core only (no `ansible` bundle):
#   1. build ascend.kvpool and the collections its galaxy.yml depends on (tests/install/build_deps.py builds those
#      offline from the copies in the bundle of the project venv: Galaxy is not reachable here);
#   2. installing the artifact alone, offline, fails and names community.docker (the dependency is declared);
#   3. installing it with the dependency artifacts gives exactly those collections in a fresh collections path;
#   4. tests/install/playbook.yml runs the container role (community.docker.docker_container) from there.
# With --site it then runs site.yml and teardown.yml of this checkout on the SIMULATED mock cluster (which must be
# up) with that ansible-core and those collections: the smoke run of the oldest claimed line.
# No run may print a deprecation warning, nor that ascend.kvpool does not support the line (meta/runtime.yml).
#   CORE_VENV: the ansible-core-only venv (default .tmp/venv/core-2.16, made by `make install-test`).
#   KVPOOL_BUNDLE: the ansible_collections directory the dependency artifacts are built from (default: the project
#     venv's ansible bundle); KVPOOL_LOCAL_PYTHON: the Python of the localhost play (needs requests; default: the
#     project venv's). scripts/controller.sh smoke sets both for the newest line.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
core=${CORE_VENV:-$repo/.tmp/venv/core-2.16}
bundle=${KVPOOL_BUNDLE:-$("$repo/.venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/ansible_collections}
local_python=${KVPOOL_LOCAL_PYTHON:-$repo/.venv/bin/python}
work=$(mktemp -d /tmp/kvpool-install-XXXXXX)
trap 'rm -rf "$work"' EXIT
export ANSIBLE_FORCE_COLOR=0 ANSIBLE_NOCOLOR=1
fail() { echo "FAIL: $*"; exit 1; }
# A run's log must hold no deprecation warning and no "does not support Ansible version" (the claimed lines).
clean_run() {
  if grep -n -A3 '\[DEPRECATION WARNING\]\|does not support Ansible version' "$1"; then
    fail "$2 printed the warnings above on $(head -n 1 "$work/version")"
  fi
}

"$core/bin/ansible" --version >"$work/version"
echo "== controller: $(head -n 1 "$work/version")"
"$core/bin/python" -c 'import ansible_collections' 2>/dev/null && fail "$core has collections of its own"
echo "== build ascend.kvpool and its dependencies"
"$core/bin/ansible-galaxy" collection build "$repo" --output-path "$work/dist" >/dev/null
artifact=$(ls "$work"/dist/ascend-kvpool-*.tar.gz)
echo "   $(basename "$artifact")"
"$core/bin/python" "$here/build_deps.py" --source "$bundle" --galaxy "$core/bin/ansible-galaxy" \
  --output "$repo/.tmp/galaxy-deps" >"$work/deps"
sed 's/^/   /' "$work/deps"
deps=()
while read -r line; do deps+=("${line##*: }"); done <"$work/deps"

export ANSIBLE_COLLECTIONS_PATH="$work/collections"
echo "== install the artifact alone (offline): must fail on the missing dependency"
if "$core/bin/ansible-galaxy" collection install --offline "$artifact" -p "$work/collections" >"$work/alone.log" 2>&1; then
  fail "the artifact installed without its dependencies"
fi
grep -q 'community.docker' "$work/alone.log" || { cat "$work/alone.log"; fail "the error does not name community.docker"; }
echo "   refused: $(grep -o 'community.docker[^ ]*' "$work/alone.log" | head -n 1) (dependency of ascend.kvpool)"
rm -rf "$work/collections"
echo "== install the artifact with its dependencies (offline)"
"$core/bin/ansible-galaxy" collection install --offline "$artifact" "${deps[@]}" -p "$work/collections" >/dev/null
listed=$("$core/bin/ansible-galaxy" collection list -p "$work/collections" 2>/dev/null \
  | awk '$1 ~ /^[a-z0-9_]+\.[a-z0-9_]+$/ { print $1 }' | sort | tr '\n' ' ')
echo "   installed: $listed"
[ "$listed" = "ascend.kvpool community.docker community.library_inventory_filtering_v1 " ] \
  || fail "unexpected collections in $work/collections"

echo "== the container role from the installed collection (check mode, localhost)"
# community.docker's modules need the Python package requests on the target: this machine, through the project venv.
printf '[defaults]\nretry_files_enabled = false\n' >"$work/ansible.cfg"
(cd "$work" && ANSIBLE_CONFIG="$work/ansible.cfg" "$core/bin/ansible-playbook" -i localhost, --check \
  -e ansible_python_interpreter="$local_python" "$here/playbook.yml") >"$work/play.log" 2>&1 \
  || { tail -n 40 "$work/play.log"; fail "the playbook failed"; }
grep -q '^localhost *: ok=[1-9].* failed=0' "$work/play.log" || { cat "$work/play.log"; fail "the playbook failed"; }
clean_run "$work/play.log" "the container role's playbook"
echo "   community.docker.docker_container ran: ok"

if [ "${1:-}" = --site ]; then
  cd "$repo"
  export ANSIBLE_CONFIG="$repo/ansible.cfg"
  report=$work/vllm_instances.json
  for play in site.yml teardown.yml; do
    echo "== $play on the mock cluster (SIMULATED), ascend.kvpool from the artifact"
    start=$(date +%s)
    "$core/bin/ansible-playbook" "$play" -i inventories/sim -e kvpool_teardown_confirm=true \
      -e vllm_instance_report_path="$report" >"$work/$play.log" 2>&1 || { tail -n 80 "$work/$play.log"; fail "$play"; }
    clean_run "$work/$play.log" "$play"
    echo "   ok in $(( $(date +%s) - start )) s: $(grep -c '^ok: \|^changed: ' "$work/$play.log") task results"
    if [ "$play" = site.yml ]; then
      "$core/bin/python" - "$report" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
print("\n".join("   " + line for line in report["lines"]))
assert report["ok"] and report["healthy"] == 2, report["lines"]
PY
    fi
  done
fi
echo "install: OK"
