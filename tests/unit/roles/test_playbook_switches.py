# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The playbooks' switches (issue 32): a value that is not a boolean or one of its spellings is refused naming the
variable and the host, before anything else runs ('ture' | bool was False with only a deprecation warning). One run
of site.yml on the controller (connection local, check mode) that stops at the check."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ansible_collections.ascend.kvpool.tests.unit.messages import assert_names

ROOT = Path(__file__).resolve().parents[3]
PLAYBOOK = Path(sys.executable).parent / 'ansible-playbook'
CHECK = {'ansible.builtin.import_tasks': 'tasks/switches.yml'}


def test_every_playbook_that_reads_the_switches_checks_them_first():
    for name in ('site.yml', 'teardown.yml', 'upgrade.yml', 'drill_master_failover.yml', 'preflight.yml',
                 'plan.yml'):  # plan.yml: the first play of benchmark.yml and monitoring.yml
        first = yaml.safe_load((ROOT / 'playbooks' / name).read_text())[0]
        task = (first.get('pre_tasks') or first.get('tasks'))[0]
        assert dict((k, v) for k, v in task.items() if k != 'name') == CHECK, name
    # rolling_restart.yml is upgrade.yml with every instance restarted.
    first = yaml.safe_load((ROOT / 'playbooks' / 'rolling_restart.yml').read_text())[0]
    assert first['ansible.builtin.import_playbook'] == 'upgrade.yml'


@pytest.mark.skipif(not PLAYBOOK.exists(), reason='ansible-playbook not next to this Python')
def test_a_switch_that_is_not_a_boolean_stops_site_yml_naming_it(tmp_path):
    inventory = {'all': {'children': {
        'npu_nodes': {'hosts': {'node1': {'kvpool_router_enabled': 'On', 'mooncake_install_enabled': 1}}},
        'kvpool_router': {'hosts': {'router1': {'kvpool_master_ha': 'yes please'}}}},
        'vars': {'ansible_connection': 'local', 'ansible_python_interpreter': sys.executable}}}
    (tmp_path / 'hosts.yml').write_text(yaml.safe_dump(inventory))
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / 'ansible.cfg'))
    extra = {'kvpool_preflight': 'ture', 'vllm_ascend_container_enabled': 'FALSE'}
    run = subprocess.run([str(PLAYBOOK), '--check', '-i', str(tmp_path / 'hosts.yml'), str(ROOT / 'site.yml'),
                          '-e', json.dumps(extra)], capture_output=True, text=True, env=env, cwd=str(tmp_path),
                         check=False, timeout=300)
    assert run.returncode != 0, run.stdout[-3000:]
    assert_names(run.stdout, 'kvpool_preflight="ture" (host node1)', 'kvpool_master_ha="yes please" (host router1)',
                 'Fix: set it to true or false')
    for good in ('kvpool_router_enabled', 'mooncake_install_enabled', 'vllm_ascend_container_enabled'):
        assert good + '=' not in run.stdout
    assert 'Plan and check the instances' not in run.stdout and 'ok=' in run.stdout   # stopped at the check
