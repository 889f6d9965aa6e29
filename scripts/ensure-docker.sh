#!/usr/bin/env bash
# Make sure a docker engine answers on this machine (installs Debian's docker.io and starts dockerd if needed),
# that debootstrap is there to build the mock node image, and the libraries the Mooncake wheel needs. Idempotent.
set -euo pipefail

need=()
command -v dockerd >/dev/null 2>&1 || need+=(docker.io)
command -v debootstrap >/dev/null 2>&1 || need+=(debootstrap)
command -v ssh-keygen >/dev/null 2>&1 || need+=(openssh-client)
# The test CA of the ha scenario's peer TLS test (molecule/ha/tests/test_ha.py).
command -v openssl >/dev/null 2>&1 || need+=(openssl)
# Runtime libraries of the PyPI Mooncake wheel used by the tests on the controller.
for lib in libibverbs1 ibverbs-providers librdmacm1 libnuma1 libcurl4; do
  dpkg -s "$lib" >/dev/null 2>&1 || need+=("$lib")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "ensure-docker: installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need[@]}" >/dev/null
fi

if docker info >/dev/null 2>&1; then
  exit 0
fi
log=/var/log/kvpool-dockerd.log
echo "ensure-docker: starting dockerd (log: $log)"
nohup dockerd >"$log" 2>&1 &
for _ in $(seq 1 600); do
  docker info >/dev/null 2>&1 && { echo "ensure-docker: engine up"; exit 0; }
  sleep 0.1
done
echo "ensure-docker: dockerd did not answer within 60 s; last lines of $log:" >&2
tail -n 30 "$log" >&2
exit 1
