#!/usr/bin/env bash
# Record that a make target of the test run begins or ends: scripts/phase.sh <target> begin|end.
# .ci/run prints the table of these times when it exits (scripts/phase_report.py), passed or failed.
mkdir -p .tmp/logs
printf '%s\t%s\t%s\n' "$(date +%s)" "$1" "$2" >> .tmp/logs/phases.tsv
