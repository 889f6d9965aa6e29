#!/usr/bin/env bash
# Checks meta/execution-environment.yml with ansible-builder, without building an image (no registry is reachable):
#   1. `ansible-builder create` on it writes a build context: a Containerfile that installs the claimed ansible-core
#      range, and the Python and bindep requirements it names;
#   2. the built artifact ships the file (build_ignore leaves it in): `ansible-builder introspect` on the installed
#      artifact and its dependencies finds ascend.kvpool's requirements and community.docker's, as an execution
#      environment that lists ascend.kvpool would get them.
#   BUILDER_VENV: the venv with ansible-builder (default .tmp/venv/builder, made by `make ee-check`).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
builder=${BUILDER_VENV:-$repo/.tmp/venv/builder}/bin/ansible-builder
bin=$repo/.venv/bin
work=$(mktemp -d /tmp/kvpool-ee-XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
export ANSIBLE_FORCE_COLOR=0 ANSIBLE_NOCOLOR=1

echo "== ansible-builder create -f meta/execution-environment.yml"
# As an operator runs it, on the file itself: its paths are relative to meta/ for create, and the links at the
# collection root give introspection the same files (meta/execution-environment.yml says why).
"$builder" create -f "$repo/meta/execution-environment.yml" --context "$work/context" --output-filename Containerfile \
  >"$work/create.log" 2>&1 || { cat "$work/create.log"; fail "ansible-builder create"; }
ctx=$work/context
# The ansible-core requirement of the definition (a floor, as meta/runtime.yml's requires_ansible) reaches the build.
core=$("$bin/python" -c 'import sys, yaml; print(yaml.safe_load(open(sys.argv[1]))["dependencies"]["ansible_core"]["package_pip"])' \
  "$repo/meta/execution-environment.yml")
[ "$core" = "ansible-core>=2.16" ] || fail "meta/execution-environment.yml installs $core, not ansible-core>=2.16"
grep -qF "'$core'" "$ctx/Containerfile" || grep -qF "$core " "$ctx/Containerfile" \
  || fail "the Containerfile does not install $core"
grep -q '^matplotlib' "$ctx/_build/requirements.txt" || fail "_build/requirements.txt lacks matplotlib"
grep -q '^openssh-client \[platform:dpkg\]' "$ctx/_build/bindep.txt" || fail "_build/bindep.txt lacks openssh-client"
echo "   context: $(cd "$ctx" && find . -type f | sort | tr '\n' ' ')"

echo "== the artifact ships it: ansible-builder introspect on the installed collections"
"$bin/ansible-galaxy" collection build "$repo" --output-path "$work/dist" >/dev/null
tar -tzf "$work"/dist/ascend-kvpool-*.tar.gz >"$work/files"
for f in meta/execution-environment.yml meta/ee-requirements.txt meta/ee-bindep.txt ee-requirements.txt ee-bindep.txt; do
  grep -qx "$f" "$work/files" || fail "$f is not in the artifact (build_ignore?)"
done
bundle=$("$bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/ansible_collections
deps=()
while read -r line; do deps+=("${line##*: }"); done < <("$bin/python" "$repo/tests/install/build_deps.py" \
  --source "$bundle" --galaxy "$bin/ansible-galaxy" --output "$repo/.tmp/galaxy-deps")
ANSIBLE_COLLECTIONS_PATH="$work/collections" "$bin/ansible-galaxy" collection install --offline \
  "$work"/dist/ascend-kvpool-*.tar.gz "${deps[@]}" -p "$work/collections" >/dev/null
"$builder" introspect "$work/collections" >"$work/introspect.log" 2>&1 || { cat "$work/introspect.log"; fail "introspect"; }
grep -q "'matplotlib>=3.5 *# from collection ascend.kvpool'" "$work/introspect.log" \
  || { cat "$work/introspect.log"; fail "introspect does not list ascend.kvpool's matplotlib"; }
grep -q "'openssh-client \[platform:dpkg\] *# from collection ascend.kvpool'" "$work/introspect.log" \
  || { cat "$work/introspect.log"; fail "introspect does not list ascend.kvpool's openssh-client"; }
grep -q '# from collection community.docker' "$work/introspect.log" \
  || { cat "$work/introspect.log"; fail "introspect does not list community.docker's requirements"; }
grep '# from collection' "$work/introspect.log" | sed 's/^/   /'
echo "ee-check: OK"
