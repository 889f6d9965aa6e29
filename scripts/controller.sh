#!/usr/bin/env bash
# Runs a part of make test in the controller image (TEST EQUIPMENT: Debian 13 with Python 3.13, built and cached by
# `tests/mock/mockctl controller-image`): the ansible-core lines 2.20 and 2.21 need Python 3.12+, this machine's is
# 3.11. The checkout is mounted at the same path; files it writes stay under .tmp/ of the checkout.
#   controller.sh sanity 2.N   ansible-test sanity of line 2.N (scripts/sanity.sh with /opt/kvpool/sanity-2.N)
#   controller.sh smoke        tests/install/run.sh --site with ansible-core 2.21 alone and the collections of the
#                              newest ansible bundle (/opt/kvpool/bundle): the artifact installs, the container role
#                              runs (docker socket), site.yml and teardown.yml on the mock cluster (which must be up)
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
py=${PY:-$repo/.venv/bin/python}
[ -x "$py" ] || py=python3
image=$("$py" tests/mock/mockctl controller-image | tail -n 1)
name=kvpool-controller-$$
args=(--rm --name "$name" --label kvpool.controller=1 -v "$repo:$repo" -w "$repo" -e HOME=/root -e LANG=C.UTF-8)
# A worktree's .git is a file naming the main repository's git directory: that is mounted too.
common=$(cd "$repo" && git rev-parse --path-format=absolute --git-common-dir)
case "$common" in "$repo"/*) ;; *) args+=(-v "$common:$common") ;; esac
# pip (ansible-test's per-test venvs) goes through this machine's CA bundle, as the image build did; its wheel cache
# is the user's, shared with the other lines.
for ca in "${PIP_CERT:-}" /etc/ssl/certs/ca-certificates.crt; do
  if [ -n "$ca" ] && [ -f "$ca" ]; then args+=(-v "$ca:/etc/ssl/certs/kvpool-build-ca.crt:ro"
    -e PIP_CERT=/etc/ssl/certs/kvpool-build-ca.crt); break; fi
done
cache=${PIP_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/pip}
mkdir -p "$cache"
args+=(-v "$cache:/root/.cache/pip" -e PIP_CACHE_DIR=/root/.cache/pip -e PIP_DISABLE_PIP_VERSION_CHECK=1)
[ -n "${PIP_DEFAULT_TIMEOUT:-}" ] && args+=(-e PIP_DEFAULT_TIMEOUT="$PIP_DEFAULT_TIMEOUT")
trap 'docker rm -f "$name" >/dev/null 2>&1 || true' EXIT

case "${1:-}" in
  sanity)
    line=${2:?controller.sh sanity 2.N}
    # The container's processes are not this script's children: the niceness it runs at (make checks-static: 5) is
    # applied inside, and a low CPU weight keeps the mock nodes and the molecule controller ahead when both are busy.
    prio=$(nice)
    [ "$prio" -gt 0 ] && args+=(--cpu-shares 128)
    docker run "${args[@]}" -e SANITY_VENV="/opt/kvpool/sanity-$line" -e SANITY_ARGS="${SANITY_ARGS:-}" "$image" \
      nice -n "$prio" bash scripts/sanity.sh
    ;;
  smoke)
    # On the mock cluster's network (a fixed address its nodes never get), the docker socket for the container role.
    docker run "${args[@]}" --network kvpool-sim --ip 172.31.250.250 -v /var/run/docker.sock:/var/run/docker.sock \
      -e CORE_VENV=/opt/kvpool/core-2.21 -e KVPOOL_BUNDLE=/opt/kvpool/bundle/ansible_collections \
      -e KVPOOL_LOCAL_PYTHON=/opt/kvpool/core-2.21/bin/python "$image" bash tests/install/run.sh --site
    ;;
  *)
    echo "usage: controller.sh sanity 2.N | smoke" >&2
    exit 2
    ;;
esac
