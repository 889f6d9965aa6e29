#!/usr/bin/env bash
# Make sure promtool is on PATH for the Prometheus tests of role kvpool_monitoring (tests/prometheus/,
# tests/unit/roles/test_kvpool_monitoring_*.py), which skip without it. Debian ships promtool in its prometheus
# package (bookworm: 2.42); it is installed without its recommends (prometheus-node-exporter would listen on every
# interface). The package starts its service where systemd runs: a server this script installed only for promtool
# is stopped and disabled again. Idempotent.
set -euo pipefail

command -v promtool >/dev/null 2>&1 && exit 0
echo "ensure-promtool: installing Debian's prometheus (for promtool), without recommends"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends prometheus >/dev/null
if [ -d /run/systemd/system ]; then
  systemctl disable --now prometheus >/dev/null 2>&1 || true
elif [ -x /etc/init.d/prometheus ]; then
  /etc/init.d/prometheus stop >/dev/null 2>&1 || true
fi
command -v promtool >/dev/null 2>&1 || { echo "ensure-promtool: promtool still not on PATH" >&2; exit 1; }
