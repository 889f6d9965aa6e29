# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Reports go where an operator expects: beside the inventory (``inventory_dir``/reports), or under the current
directory with an inline inventory; never into the installed collection, whatever ansible.cfg is (here: none).
``--check`` writes no report and says where a run writes it. Run from the built artifact, installed into a temporary
collections path, on localhost (connection local; no node is contacted), with HOME and the current directory in a
temporary directory so that no ansible.cfg is found."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent
REPORTS = {'npu_network_report_path': 'npu_network.json', 'vllm_instance_report_path': 'vllm_instances.json',
           'kvpool_benchmark_report_dir': ''}

pytestmark = pytest.mark.skipif(not (BIN / 'ansible-playbook').exists(),
                                reason='ansible-playbook not next to this Python')


@pytest.fixture(scope='module')
def installed(tmp_path_factory):
    """The built artifact installed into a temporary collections path: {'collection': its path, 'env': env}."""
    tmp = tmp_path_factory.mktemp('artifact')
    home = tmp / 'home'
    home.mkdir()
    env = dict((k, v) for k, v in os.environ.items() if not k.startswith('ANSIBLE_'))
    env.update(HOME=str(home), ANSIBLE_COLLECTIONS_PATH=str(tmp / 'collections'), ANSIBLE_NOCOLOR='1',
               ANSIBLE_FORCE_COLOR='0', ANSIBLE_RETRY_FILES_ENABLED='0')
    galaxy = str(BIN / 'ansible-galaxy')

    def run(*argv):
        done = subprocess.run([galaxy, 'collection'] + list(argv), capture_output=True, text=True, env=env,
                              cwd=str(home), check=False)
        assert done.returncode == 0, done.stdout + done.stderr

    run('build', '--output-path', str(tmp / 'dist'), str(ROOT))
    (artifact,) = (tmp / 'dist').glob('ascend-kvpool-*.tar.gz')
    run('install', '--offline', '--no-deps', '-p', str(tmp / 'collections'), str(artifact))
    collection = tmp / 'collections' / 'ansible_collections' / 'ascend' / 'kvpool'
    assert (collection / 'roles' / 'npu_network' / 'tasks' / 'report.yml').is_file()
    return {'collection': collection, 'env': env}


def play(installed, tmp_path, inventory, *extra):
    """Run a playbook from a working directory with no ansible.cfg: it prints the three report defaults (role
    defaults files of the installed collection) and runs role npu_network's report step (its action writes the
    report; no node results, so it warns). Returns (stdout, {variable: value})."""
    work = tmp_path / 'work'
    work.mkdir(exist_ok=True)
    roles = installed['collection'] / 'roles'
    (tmp_path / 'pb.yml').write_text(yaml.safe_dump([{
        'hosts': 'all', 'gather_facts': False,
        'vars_files': [str(roles / r / 'defaults' / 'main.yml') for r in ('npu_network', 'vllm_instance',
                                                                          'kvpool_benchmark')],
        'tasks': [
            {'name': 'Defaults', 'ansible.builtin.debug': {
                'msg': '{{ {"cfg": ansible_config_file, %s} | to_json }}'
                       % ', '.join('"%s": %s' % (v, v) for v in REPORTS)}},
            {'name': 'Report',
             'ansible.builtin.include_role': {'name': 'ascend.kvpool.npu_network', 'tasks_from': 'report.yml'},
             'vars': {'npu_network_fail_on_error': False}},
        ]}]))
    argv = [str(BIN / 'ansible-playbook'), '-i', inventory, str(tmp_path / 'pb.yml')] + list(extra)
    run = subprocess.run(argv, capture_output=True, text=True, env=installed['env'], cwd=str(work), check=False)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    line = next(line for line in run.stdout.splitlines() if '"msg": "{' in line or '"msg": {' in line)
    msg = json.loads(line.split('"msg": ', 1)[1])
    values = json.loads(msg) if isinstance(msg, str) else msg
    return run.stdout, values


def inventory_file(tmp_path):
    inv = tmp_path / 'site' / 'inventory'
    inv.mkdir(parents=True)
    (inv / 'hosts.yml').write_text(yaml.safe_dump({'all': {'hosts': {'node1': {
        'ansible_connection': 'local', 'ansible_python_interpreter': sys.executable}}}}))
    return inv


def test_reports_go_beside_the_inventory_not_into_the_collection(installed, tmp_path):
    inv = inventory_file(tmp_path)
    out, values = play(installed, tmp_path, str(inv / 'hosts.yml'))
    assert not values['cfg']                                    # no ansible.cfg in play
    for variable, name in REPORTS.items():
        assert values[variable].rstrip('/') == ('%s/reports/%s' % (inv, name)).rstrip('/'), variable
    report = inv / 'reports' / 'npu_network.json'
    assert json.loads(report.read_text())['written_by'] == 'ascend.kvpool.npu_network_report'
    assert 'report: %s' % report in out
    assert not list(installed['collection'].rglob('reports')), 'a report inside the installed collection'


def test_check_mode_writes_no_report_and_says_where(installed, tmp_path):
    inv = inventory_file(tmp_path)
    out, dummy = play(installed, tmp_path, str(inv / 'hosts.yml'), '--check')
    assert not (inv / 'reports').exists()
    assert 'check mode: no report written (a run writes %s/reports/npu_network.json)' % inv in out


def test_an_inline_inventory_writes_under_the_current_directory(installed, tmp_path):
    out, values = play(installed, tmp_path, 'node1,', '-e', json.dumps({
        'ansible_connection': 'local', 'ansible_python_interpreter': sys.executable}))
    assert values['npu_network_report_path'] == './reports/npu_network.json'
    report = tmp_path / 'work' / 'reports' / 'npu_network.json'
    assert report.is_file() and 'report: %s' % report in out
    assert not list(installed['collection'].rglob('reports'))
