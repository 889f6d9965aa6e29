#!/usr/bin/env bash
# The slow set-up of the parts with the REAL vLLM engine (test equipment: the conformance venv, the tiny model and
# the mock node image with the engine), made in the background while `make test` runs its checks, which keep about
# one of two cores busy. `make real-engine` and `make conformance` wait for it, then reuse what it made (each step
# is cached by hash and makes what is missing itself, so a failed prefetch only costs that time again).
#   prefetch-engine.sh start   start it in the background (log: .tmp/logs/prefetch.log)
#   prefetch-engine.sh wait    wait until a started prefetch has finished (at once when none runs)
set -uo pipefail
cd "$(dirname "$0")/.."
mkdir -p .tmp/logs
case ${1:-} in
  start)
    nohup nice -n 10 bash "$0" run > .tmp/logs/prefetch.log 2>&1 < /dev/null &
    echo "prefetch: the real vLLM engine's venv, model and image are made in the background (.tmp/logs/prefetch.log)"
    ;;
  run)
    exec 9> .tmp/prefetch.lock
    flock 9
    t0=$(date +%s)
    bash scripts/conformance-venv.sh .tmp/venv-vllm-real \
      && { test -f .tmp/tiny-model/model.safetensors \
           || HF_HUB_OFFLINE=1 .tmp/venv-vllm-real/bin/python tests/conformance/make_tiny_model.py .tmp/tiny-model; } \
      && .venv/bin/python tests/mock/mockctl image --engine
    rc=$?
    echo "prefetch: rc $rc after $(( $(date +%s) - t0 )) s"
    ;;
  wait)
    exec 9> .tmp/prefetch.lock
    flock 9
    test -f .tmp/logs/prefetch.log && tail -n 3 .tmp/logs/prefetch.log
    ;;
  *)
    echo "usage: $0 start|wait" >&2
    exit 2
    ;;
esac
