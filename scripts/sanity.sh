#!/usr/bin/env bash
# ansible-test sanity for the collection.
# - ansible-test needs the collection at .../ansible_collections/<namespace>/<name>: the tracked and new (not
#   ignored) files are copied there.
# - It runs from its own venv (.venv-sanity, requirements-sanity.txt: the versions ansible-test pins), or from the
#   one in SANITY_VENV: make sanity-lines runs it so for each older ansible-core line (tests/sanity/requirements-2.N.txt,
#   ignore-2.N.txt).
# - ansible-test bootstraps pip into its per-test venvs with get-pip.py downloaded from a host that is not
#   reachable here; scripts/get_pip_shim.py is placed in its cache instead (see that file).
# - ansible-test runs pip with a scrubbed environment (HOME and PATH only), so pip settings given as PIP_*
#   variables (index, certificate, find-links) would be lost: they are written to a pip.conf under a
#   HOME of its own (.tmp/sanity-home[-<line venv>], which also caches ansible-test's venvs between runs).
# - Each venv (line) has its own copy and HOME, so that two lines can run side by side (make test does).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
SANITY_VENV=${SANITY_VENV:-$repo/.venv-sanity}
# The newest line (.venv-sanity) keeps the plain names; an older line's venv name is added to them.
tag=$(basename "$SANITY_VENV"); [ "$SANITY_VENV" = "$repo/.venv-sanity" ] && tag=
root=$repo/.tmp/sanity${tag:+-$tag}
dest=$root/ansible_collections/ascend/kvpool

reqs="$SANITY_VENV/lib/python3*/site-packages/ansible_test/_internal/python_requirements.py"
pipver=$(grep -ho "pip='[0-9.]*'" $reqs | head -n 1 | tr -dc '0-9.')
# pip's wheel cache stays the user's (shared by every checkout and line: the first run of a line in a fresh clone
# downloads nothing twice); ansible-test's venvs are kept under that HOME between runs.
export PIP_CACHE_DIR=${PIP_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/pip}
export HOME="$repo/.tmp/sanity-home${tag:+-$tag}"
mkdir -p "$HOME/.ansible/test/cache" "$HOME/.config/pip"
cp scripts/get_pip_shim.py "$HOME/.ansible/test/cache/get_pip_${pipver//./_}.py"
{
  echo "[global]"
  env | grep '^PIP_' | while IFS='=' read -r k v; do
    k=${k#PIP_}; k=${k,,}; echo "${k//_/-} = $v"
  done
} > "$HOME/.config/pip/pip.conf"

rm -rf "$root/ansible_collections"
mkdir -p "$dest"
git ls-files -z --cached --others --exclude-standard \
  | grep -zv '^\.collections/' \
  | xargs -0 -I{} cp --parents -P {} "$dest"/
cd "$dest"
git init -q . && git add -A >/dev/null
py=$("$SANITY_VENV/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
"$SANITY_VENV/bin/ansible-test" sanity --local --python "$py" --color no ${SANITY_ARGS:-} "$@"
