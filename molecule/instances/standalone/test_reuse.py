"""Reuse: an operator-style infra repository (tests/reuse) deploys with the collection's built artifact.

tests/reuse/run.sh builds ascend.kvpool with ansible-galaxy, installs the artifact into a temporary collections
path (the checkout's .collections link is not on that path), and runs the repository's own deploy.yml - its own
group names (ascend_a2, kv_master), ports and paths - on the SIMULATED cluster: first run, second run with 0
changed, every instance answering /v1/models, then its own teardown.yml.
"""

import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / 'tests'))
import instances_lib as lib  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / 'resources'))
import kvpool_testlib as testlib  # noqa: E402


def test_operator_repository_deploys_with_the_built_artifact():
    proc = subprocess.run(['bash', str(lib.REPO / 'tests' / 'reuse' / 'run.sh')], cwd=str(lib.REPO),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, timeout=900,
                          check=False, env=dict(lib.os.environ, ANSIBLE_BIN_DIR=str(lib.BIN)))
    assert proc.returncode == 0, proc.stdout[-6000:]
    assert 'ascend.kvpool resolved from: /tmp/kvpool-reuse-' in proc.stdout
    assert 'second run: must change nothing)\n   changed: 0' in proc.stdout
    testlib.assert_names(proc.stdout, '2 instance(s) on 2 node(s)', '2 healthy')
    assert proc.stdout.rstrip().endswith('reuse: OK')
