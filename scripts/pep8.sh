#!/usr/bin/env bash
# The pep8 test of ansible-test sanity, run early in make lint: ruff does not check continuation-line indents
# (E12x), which ansible-test's pycodestyle does. Same settings as ansible-test 2.19
# (_util/controller/sanity/pep8/current-ignore.txt, --max-line-length 160).
set -euo pipefail
cd "$(dirname "$0")/.."
git ls-files -z --cached --others --exclude-standard '*.py' | grep -zv '^\.collections/' \
  | xargs -0 "${1:-pycodestyle}" --max-line-length 160 --ignore E402,W503,W504,E741,E203,E701,E704
