# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Role kvpool_monitoring never replaces a file it did not write (issue 32, ownership): a file_sd target file
without the header, a Grafana dashboard of that name without the role's record, a token file of someone else. The
role runs on the controller (connection local) into a temporary directory, in check mode and for real, in one
ansible-playbook process (each run's failure caught by a rescue and printed); both fail naming every such file, its
variable and the fix, and every file stays as it was."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ansible_collections.ascend.kvpool.tests.unit.messages import assert_names

ROOT = Path(__file__).resolve().parents[3]
PLAYBOOK = Path(sys.executable).parent / 'ansible-playbook'
INVENTORY = {'all': {'children': {
    'npu_nodes': {'hosts': {'node1': {'ansible_host': '10.0.0.1'}}},
    'mooncake_master': {'hosts': {'node1': None}}}}}
TOKEN = 'sekrit-token-for-the-ownership-test'
FOREIGN = {'sd/kvpool-router.yml': '- targets: [10.9.9.9:29000]\n',
           'dash/kvpool-dashboard.json': '{"uid": "theirs", "title": "hand-made"}\n',
           'vllm.token': 'their-own-token\n'}

pytestmark = pytest.mark.skipif(not PLAYBOOK.exists(), reason='ansible-playbook not next to %s' % sys.executable)


def role_play(name, check):
    return {'name': name, 'hosts': 'localhost', 'gather_facts': False, 'check_mode': check,
            'roles': ['ascend.kvpool.kvpool_defaults'],  # as the plays of playbooks/ load the shared defaults
            'tasks': [{'block': [{'ansible.builtin.include_role': {'name': 'ascend.kvpool.kvpool_monitoring'}}],
                       'rescue': [{'ansible.builtin.debug': {
                           'msg': 'OWNERSHIP-REFUSED {{ ansible_failed_result.msg }} END'}}]}]}


@pytest.fixture(scope='module')
def refused(tmp_path_factory):
    tmp = tmp_path_factory.mktemp('ownership')
    for rel, text in FOREIGN.items():
        (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp / rel).write_text(text)
    (tmp / 'hosts.yml').write_text(yaml.safe_dump(INVENTORY))
    plays = [{'ansible.builtin.import_playbook': str(ROOT / 'playbooks' / 'plan.yml')},
             role_play('check run', True), role_play('real run', False)]
    (tmp / 'test.yml').write_text(yaml.safe_dump(plays, sort_keys=False))
    variables = {'kvpool_monitoring_file_sd_dir': str(tmp / 'sd'), 'kvpool_monitoring_rules_dir': str(tmp / 'rules'),
                 'kvpool_monitoring_dashboard_dir': str(tmp / 'dash'), 'kvpool_monitoring_prometheus_config': False,
                 'kvpool_monitoring_credentials_file': str(tmp / 'vllm.token'),
                 'kvpool_monitoring_credentials_owner': '', 'kvpool_monitoring_instances_api_key': TOKEN,
                 'ansible_python_interpreter': sys.executable}
    (tmp / 'vars.json').write_text(json.dumps(variables))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(ROOT / '.collections'), ANSIBLE_STDOUT_CALLBACK='default',
               ANSIBLE_NOCOLOR='1', ANSIBLE_RETRY_FILES_ENABLED='0')
    res = subprocess.run([str(PLAYBOOK), str(tmp / 'test.yml'), '-i', str(tmp / 'hosts.yml'), '-c', 'local',
                          '-e', '@' + str(tmp / 'vars.json')], cwd=str(ROOT), env=env, capture_output=True, text=True,
                         check=False)
    messages = re.findall(r'OWNERSHIP-REFUSED (.*?) END', res.stdout, flags=re.S)
    return tmp, messages, res.stdout + res.stderr


def test_both_runs_fail_naming_every_file_the_role_did_not_write(refused):
    tmp, messages, out = refused
    assert len(messages) == 2, out[-4000:]  # the check run and the real run
    for msg in messages:
        msg = ' '.join(msg.split())  # the callback folds long lines
        assert_names(msg, 'localhost: ', str(tmp / 'sd' / 'kvpool-router.yml'), 'kvpool_monitoring_file_sd_dir',
                     'not written by ascend.kvpool', str(tmp / 'dash' / 'kvpool-dashboard.json'),
                     'kvpool_monitoring_dashboard_dir',
                     'no record %s' % (tmp / 'dash' / '.kvpool-dashboard.json.kvpool'),
                     str(tmp / 'vllm.token'), 'kvpool_monitoring_credentials_file', 'Fix: if it is yours, set')
        # the role's own files that are missing are no problem
        assert 'kvpool-mooncake_master.yml' not in msg and 'rules' not in msg


def test_every_file_stays_and_nothing_is_written(refused):
    tmp, dummy, out = refused
    for rel, text in FOREIGN.items():
        assert (tmp / rel).read_text() == text, rel
    assert sorted(p.name for p in (tmp / 'sd').iterdir()) == ['kvpool-router.yml']
    assert sorted(p.name for p in (tmp / 'dash').iterdir()) == ['kvpool-dashboard.json']
    assert not (tmp / 'rules').exists() and not (tmp / '.vllm.token.kvpool').exists()


def test_no_token_and_no_hash_of_it_is_shown(refused):
    out = refused[2]
    assert TOKEN not in out and 'their-own-token' not in out
    assert __import__('hashlib').sha256(TOKEN.encode()).hexdigest() not in out
