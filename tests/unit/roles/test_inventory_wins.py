# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The inventory wins (issue 33): the plays take the shared defaults from role kvpool_defaults (role-default
precedence, below the inventory), never from a vars file (which outranks group_vars and host_vars), and the etcd
leadership default follows the master group the operator names (mooncake_master_group), in the inventory's order.
The run of a shared default set in group_vars and host_vars is in test_plan_playbook.py."""

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
PLAYBOOK = Path(sys.executable).parent / 'ansible-playbook'
SHARED = 'ascend.kvpool.kvpool_defaults'


def plays():
    for path in sorted((ROOT / 'playbooks').glob('*.yml')):
        for play in yaml.safe_load(path.read_text()):
            if 'hosts' in play:
                yield path.name, play


def test_every_play_loads_the_shared_defaults_as_a_role_and_no_vars_file_pins_one():
    seen = 0
    for name, play in plays():
        seen += 1
        roles = [r['role'] if isinstance(r, dict) else r for r in play.get('roles') or []]
        assert roles[:1] == [SHARED], (name, play['name'])
        for vars_file in play.get('vars_files') or []:
            assert 'kvpool_defaults' not in vars_file, (name, play['name'])
            pinned = [k for k in yaml.safe_load((ROOT / 'playbooks' / vars_file).read_text())
                      if k.startswith('kvpool_defaults_')]
            assert pinned == [], (name, vars_file)
    assert seen >= 20  # every play of site.yml, teardown.yml and the others


# The etcd members in an order no sort gives; the masters in the operator's group kv_masters, and a host in the
# default group mooncake_master that is no master of this inventory.
MEMBERS = ('m1', 'e5', 'm2', 'e3', 'e4')
INVENTORY = {'all': {'children': {
    'etcd': {'hosts': dict((h, {'ansible_host': '10.0.0.%d' % i}) for i, h in enumerate(MEMBERS, 1))},
    'kv_masters': {'hosts': {'m1': None, 'm2': None}},
    'mooncake_master': {'hosts': {'e5': None}}},
    'vars': {'ansible_connection': 'local', 'ansible_python_interpreter': sys.executable}}}


def leader_hosts(tmp_path, group_vars):
    """kvpool_etcd_leader_hosts as role kvpool_etcd defaults it, with ``group_vars`` in group_vars/all."""
    (tmp_path / 'group_vars').mkdir()
    (tmp_path / 'group_vars' / 'all.yml').write_text(yaml.safe_dump(group_vars))
    (tmp_path / 'hosts.yml').write_text(yaml.safe_dump(INVENTORY, sort_keys=False))
    out = tmp_path / 'leaders.json'
    (tmp_path / 'pb.yml').write_text(yaml.safe_dump([{
        'hosts': 'etcd', 'gather_facts': False, 'roles': [SHARED], 'tasks': [
            {'ansible.builtin.import_role': {'name': 'ascend.kvpool.kvpool_etcd', 'tasks_from': 'plan.yml'}},
            {'ansible.builtin.copy': {'content': '{{ kvpool_etcd_leader_hosts | to_json }}', 'dest': str(out)},
             'run_once': True}]}]))
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / 'ansible.cfg'))
    run = subprocess.run([str(PLAYBOOK), '-i', str(tmp_path / 'hosts.yml'), str(tmp_path / 'pb.yml')],
                         capture_output=True, text=True, env=env, cwd=str(tmp_path), check=False, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    return json.loads(out.read_text())


@pytest.mark.skipif(not PLAYBOOK.exists(), reason='ansible-playbook not next to this Python')
@pytest.mark.parametrize('group_vars, leaders', [
    ({'mooncake_master_group': 'kv_masters'}, ['e5', 'e3', 'e4']),
    ({}, ['m1', 'm2', 'e3', 'e4']),  # the default master group, mooncake_master
    ({'kvpool_defaults_master_group': 'kv_masters'}, ['e5', 'e3', 'e4']),  # the shared default, from the inventory
])
def test_the_etcd_leadership_default_is_the_members_outside_the_master_group_in_inventory_order(
        tmp_path, group_vars, leaders):
    assert leader_hosts(tmp_path, group_vars) == leaders
