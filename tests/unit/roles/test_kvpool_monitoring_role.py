# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""monitoring.yml on the controller (connection local): the role writes the target files, the rules, the dashboard
and prometheus.yml into a temporary directory from an in-file inventory whose nodes are never contacted (the role
reads their inventory only). A --check run first writes nothing, a second run changes nothing; the token never
reaches prometheus.yml or the output. With promtool, the written prometheus.yml is checked and its file_sd
discovery run (promtool check config / check service-discovery), as Prometheus would read it.

One ansible-playbook process does the three runs (each one costs seconds of start-up on a loaded machine): the
instances' plan (playbooks/plan.yml, as monitoring.yml imports it), a play of the role in check mode, a play
asserting that it wrote nothing, then monitoring.yml (the plan, then the role) imported twice. Each run's output is
the text between its PLAY headers.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
PLAYBOOK = Path(sys.executable).parent / 'ansible-playbook'
PROMTOOL = shutil.which('promtool')
TOKEN = 'sekrit-token-for-the-test-0123'
INVENTORY = {'all': {'children': {
    'npu_nodes': {'hosts': {
        'node1': {'ansible_host': '10.0.0.1', 'vllm_instance_instances': [
            {'devices': [0, 1], 'port': 8002}, {'devices': [2, 3], 'port': 8003, 'name': 'second'},
            {'devices': [4], 'port': 8004, 'state': 'stopped'}]},
        'node2': {'ansible_host': '10.0.0.2', 'vllm_instance_listen_host': '0.0.0.0'}}},
    'mooncake_master': {'hosts': {'node1': None}}}}}

pytestmark = pytest.mark.skipif(not PLAYBOOK.exists(), reason='ansible-playbook not next to %s' % sys.executable)


# The playbook of the test: the role in check mode (the hosts and roles of playbooks/monitoring.yml), a play
# that fails if the check run wrote anything, then the real playbook twice (first run, then the idempotence run).
TEST_PLAYBOOK = [
    {'ansible.builtin.import_playbook': str(ROOT / 'playbooks' / 'plan.yml')},
    {'name': 'Run 1 of 3 (check mode)', 'hosts': 'localhost', 'gather_facts': False, 'check_mode': True,
     'roles': [{'role': 'ascend.kvpool.kvpool_defaults'}, {'role': 'ascend.kvpool.kvpool_monitoring'}]},
    {'name': 'The check run wrote nothing', 'hosts': 'localhost', 'gather_facts': False, 'tasks': [
        {'name': 'Stat what the role would write', 'ansible.builtin.stat': {'path': '{{ item }}'},
         'loop': ['{{ kvpool_monitoring_file_sd_dir }}', '{{ kvpool_monitoring_prometheus_config_path }}',
                  '{{ kvpool_monitoring_credentials_file }}'],
         'register': 'written_by_check'},
        {'name': 'Assert that none of it exists',
         'ansible.builtin.assert': {'that': ['written_by_check.results | selectattr("stat.exists") | list == []'],
                                    'fail_msg': 'CHECK-RUN-WROTE {{ written_by_check.results | '
                                                'selectattr("stat.exists") | map(attribute="item") | list }}'}}]},
    {'ansible.builtin.import_playbook': str(ROOT / 'monitoring.yml')},
    {'ansible.builtin.import_playbook': str(ROOT / 'monitoring.yml')},
]


def run(tmp, **extra):
    """The three runs in one ansible-playbook process: (check, first, second), the output of each run."""
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(ROOT / '.collections'), ANSIBLE_STDOUT_CALLBACK='default',
               ANSIBLE_NOCOLOR='1', ANSIBLE_RETRY_FILES_ENABLED='0')
    variables = {
        'kvpool_monitoring_file_sd_dir': str(tmp / 'sd'), 'kvpool_monitoring_rules_dir': str(tmp / 'rules'),
        'kvpool_monitoring_dashboard_dir': str(tmp / 'dash'), 'kvpool_monitoring_prometheus_config': True,
        'kvpool_monitoring_prometheus_config_path': str(tmp / 'prometheus.yml'),
        'kvpool_monitoring_credentials_file': str(tmp / 'vllm.token'), 'kvpool_monitoring_credentials_owner': '',
        'kvpool_monitoring_routers': ['http://10.0.0.5:29000'],
        'ansible_python_interpreter': sys.executable,
    }
    variables.update(extra)
    (tmp / 'vars.json').write_text(json.dumps(variables))
    (tmp / 'test.yml').write_text(yaml.safe_dump(TEST_PLAYBOOK, sort_keys=False))
    res = subprocess.run([str(PLAYBOOK), str(tmp / 'test.yml'), '-i', str(tmp / 'hosts.yml'), '-c', 'local',
                          '-e', '@' + str(tmp / 'vars.json')],
                         cwd=str(ROOT), env=env, capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
    # PLAY headers: the plan, the check run, the assertion play, the plan and the first run, the plan and the
    # second run; then the recap.
    plays = re.split(r'^PLAY \[', res.stdout, flags=re.M)[1:]
    assert len(plays) == 7, res.stdout[-4000:]
    assert all(plays[i].startswith('Plan the vLLM instances of every node') for i in (0, 3, 5))
    assert plays[1].startswith('Run 1 of 3 (check mode)]') and plays[2].startswith('The check run wrote nothing]')
    second, recap = re.split(r'^PLAY RECAP ', plays[6], flags=re.M)
    return plays[1], plays[4], second, res.stdout


@pytest.fixture(scope='module')
def written(tmp_path_factory):
    if PROMTOOL is None:
        pytest.skip('promtool not found (apt-get install prometheus): the role validates prometheus.yml with it')
    tmp = tmp_path_factory.mktemp('monitoring')
    (tmp / 'hosts.yml').write_text(yaml.safe_dump(INVENTORY))
    checked, first, second, everything = run(tmp, kvpool_monitoring_instances_api_key=TOKEN)
    return tmp, checked, first, second, everything


def test_the_check_run_reported_changes_and_wrote_nothing(written):
    checked = written[1]
    # The assertion play ran (and passed, else the run failed): nothing of the check run is on disk.
    assert 'Assert that none of it exists' in written[4]
    assert re.search(r'^changed: \[localhost\]', checked, flags=re.M), checked[-1500:]


def test_target_files_list_every_master_and_started_instance_and_the_router(written):
    tmp = written[0]
    masters = yaml.safe_load((tmp / 'sd' / 'kvpool-mooncake_master.yml').read_text())
    instances = yaml.safe_load((tmp / 'sd' / 'kvpool-vllm_instance.yml').read_text())
    routers = yaml.safe_load((tmp / 'sd' / 'kvpool-router.yml').read_text())
    assert masters == [{'targets': ['10.0.0.1:9003'], 'labels': {
        'cluster': 'kvpool', 'node': 'node1', 'service': 'mooncake-master', 'instance': 'node1/mooncake-master',
        'role': 'mooncake_master', 'pool_address': '10.0.0.1'}}]
    assert [(g['targets'], g['labels']['instance']) for g in instances] == [
        (['10.0.0.1:8002'], 'node1/vllm-8002'), (['10.0.0.1:8003'], 'node1/second'),
        (['10.0.0.2:8002'], 'node2/vllm-8002')]
    assert routers[0]['targets'] == ['10.0.0.5:29000'] and routers[0]['labels']['role'] == 'router'
    rule_files = sorted(p.name for p in (tmp / 'rules').iterdir())
    assert rule_files == ['kvpool-alerts.rules.yml', 'kvpool-recording.rules.yml']
    assert json.loads((tmp / 'dash' / 'kvpool-dashboard.json').read_text())['uid'] == 'ascend-kvpool'
    # the record beside the JSON (which carries no header) names the sha256 of the bytes written (issue 32, ownership)
    digest = hashlib.sha256((tmp / 'dash' / 'kvpool-dashboard.json').read_bytes()).hexdigest()
    record = (tmp / 'dash' / '.kvpool-dashboard.json.kvpool').read_text()
    assert record.startswith('# Written by ascend.kvpool (role kvpool_monitoring)') and 'sha256=%s\n' % digest in record


def test_the_token_is_a_0600_file_read_by_credentials_file_and_never_shown(written):
    tmp, everything = written[0], written[4]
    token = tmp / 'vllm.token'
    assert token.read_text() == TOKEN
    assert stat.S_IMODE(token.stat().st_mode) == 0o600
    token_record = tmp / '.vllm.token.kvpool'
    assert stat.S_IMODE(token_record.stat().st_mode) == 0o600
    assert 'sha256=%s\n' % hashlib.sha256(TOKEN.encode()).hexdigest() in token_record.read_text()
    assert hashlib.sha256(TOKEN.encode()).hexdigest() not in everything
    config = yaml.safe_load((tmp / 'prometheus.yml').read_text())
    jobs = dict((job['job_name'], job) for job in config['scrape_configs'])
    assert jobs['kvpool_vllm_instance']['authorization'] == {'type': 'Bearer', 'credentials_file': str(token)}
    assert 'authorization' not in jobs['kvpool_mooncake_master']
    assert TOKEN not in (tmp / 'prometheus.yml').read_text()
    assert TOKEN not in everything


def test_a_second_run_changes_nothing(written):
    first, second = written[2], written[3]
    assert re.search(r'^changed: \[localhost\]', first, flags=re.M), first[-1500:]  # the first run wrote the files
    assert re.search(r'^ok: \[localhost\]', second, flags=re.M), second[-1500:]
    assert not re.search(r'^(changed|failed|fatal):', second, flags=re.M), second[-3000:]


def test_promtool_reads_the_config_and_discovers_the_targets(written):
    tmp = written[0]
    res = subprocess.run([PROMTOOL, 'check', 'config', str(tmp / 'prometheus.yml')], capture_output=True, text=True,
                         check=False)
    assert res.returncode == 0, res.stdout + res.stderr
    # promtool waits the whole --timeout (default 30 s) before it prints; file_sd reads its files at once, so a
    # short wait does, and a longer one is tried only if the short one found too little.
    for timeout in ('1s', '10s'):
        res = subprocess.run([PROMTOOL, 'check', 'service-discovery', '--timeout=' + timeout,
                              str(tmp / 'prometheus.yml'), 'kvpool_vllm_instance'],
                             capture_output=True, text=True, check=False)
        assert res.returncode == 0, res.stdout + res.stderr
        found = json.loads(res.stdout[res.stdout.index('['):])
        if len(found) >= 3:
            break
    assert sorted(t['labels']['__address__'] for t in found) == ['10.0.0.1:8002', '10.0.0.1:8003', '10.0.0.2:8002']
    assert {t['labels']['job'] for t in found} == {'kvpool_vllm_instance'}
