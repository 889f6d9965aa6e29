"""Helpers for the scenario tests: run the operator's playbooks and drive the SIMULATED mock cluster.

The tests call exactly what an operator types (`ansible-playbook verify_network.yml -i inventories/sim`)
and read what the operator reads (the summary on stdout, the JSON report). Faults are injected with
tests/mock/mockctl, the test equipment.
"""

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
INVENTORY = REPO / 'inventories' / 'sim'
MOCKCTL = REPO / 'tests' / 'mock' / 'mockctl'
BIN = Path(sys.executable).parent

# The scenario tests check a message by its parts (what it names, the fix) with the unit tests' helper.
if str(REPO / 'tests' / 'unit') not in sys.path:
    sys.path.insert(0, str(REPO / 'tests' / 'unit'))
import messages  # noqa: E402

assert_names = messages.assert_names


class Run:
    def __init__(self, rc, stdout, report):
        self.rc = rc
        self.stdout = stdout
        self.report = report

    def recap(self):
        """{host: {ok, changed, unreachable, failed, ...}} from the PLAY RECAP."""
        out = {}
        for m in re.finditer(r'^(\S+)\s+:\s+((?:\w+=\d+\s*)+)$', self.stdout, re.M):
            out[m.group(1)] = dict((k, int(v)) for k, v in re.findall(r'(\w+)=(\d+)', m.group(2)))
        return out

    def findings(self, **match):
        return [f for f in (self.report or {}).get('findings', [])
                if all(f.get(k) == v for k, v in match.items())]


def playbook(name='verify_network.yml', *args, extra_vars=None, report_name='npu_network.json', check=False):
    """Run a playbook of the repository root against the mock cluster; return a Run."""
    tmp = Path(tempfile.mkdtemp(prefix='kvpool-test-'))
    report = tmp / report_name
    ev = {'npu_network_report_path': str(report)}
    if check and (extra_vars or {}).get('npu_network_report_in_check_mode') is None:
        ev['npu_network_report_in_check_mode'] = True  # the tests read the report of a --check run too
    ev.update(extra_vars or {})
    argv = [str(BIN / 'ansible-playbook'), str(REPO / name), '-i', str(INVENTORY), '-e', json.dumps(ev)]
    if check:
        argv.append('--check')
    argv.extend(args)
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / 'ansible.cfg'), ANSIBLE_FORCE_COLOR='0', ANSIBLE_NOCOLOR='1')
    proc = subprocess.run(argv, cwd=str(REPO), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, timeout=600, check=False)
    data = json.loads(report.read_text()) if report.exists() else None
    return Run(proc.returncode, proc.stdout, data)


def mockctl(*args):
    proc = subprocess.run([sys.executable, str(MOCKCTL)] + [str(a) for a in args], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, timeout=600, check=False)
    if proc.returncode != 0:
        raise RuntimeError('mockctl %s failed:\n%s' % (' '.join(map(str, args)), proc.stdout))
    return proc.stdout


def node(name):
    """A testinfra host for a mock node, driven through Ansible itself (force_ansible) so that the inventory's
    templated connection settings (the SSH key path) apply exactly as in the playbooks."""
    import testinfra  # pytest-testinfra

    os.environ['ANSIBLE_CONFIG'] = str(REPO / 'ansible.cfg')
    return testinfra.get_host('ansible://%s?ansible_inventory=%s&force_ansible=true' % (name, INVENTORY))


def docker_exec(container, *argv):
    return subprocess.run(['docker', 'exec', container] + list(argv), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, universal_newlines=True, timeout=120, check=False)
