#!/usr/bin/env bash
# Run molecule with the given arguments, keep its whole output in a log, and when it fails print what failed at the
# end: the failed actions, Ansible's fatal/failed results and pytest's failures, each with a few lines of context.
# A CI log is often shown cut to its beginning and end; the failure then stays in view. The time of each finished
# action goes to .tmp/logs/molecule-times.tsv (scripts/phase_report.py sums them per scenario).
#   scripts/molecule-run.sh <log> <molecule arguments...>
set -uo pipefail
log=$1
shift
mkdir -p "$(dirname "$log")" .tmp/logs
times=.tmp/logs/molecule-times.tsv
printf '%s\tstart\n' "$(date +%s)" >> "$times"
molecule "$@" 2>&1 | while IFS= read -r line || [ -n "$line" ]; do
  printf '%s\n' "$line"
  case $line in *"Executed:"*) printf '%s\t%s\n' "$(date +%s)" "$line" >> "$times" ;; esac
done | tee "$log"
rc=${PIPESTATUS[0]}
if [ "$rc" -ne 0 ]; then
  echo
  echo "==== molecule failed (rc $rc): what failed (whole log: $log) ===="
  sed 's/\x1b\[[0-9;]*m//g' "$log" \
    | grep -a -n -A 25 -E 'fatal: \[|FAILED! =>|failed: \[|Executed: Failed|^(E   |_{5,} test_)|^FAILED |Error: ' \
    | tail -n 400
fi
exit "$rc"
