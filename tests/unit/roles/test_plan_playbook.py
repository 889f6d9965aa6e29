# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""playbooks/plan.yml (imported first by benchmark.yml and monitoring.yml) plans the hosts of the node, benchmark
and monitoring node groups, with those group variables set in the inventory (group_vars/all) or as extra vars, and
no other host; a shared default (kvpool_defaults_*) set in the inventory is the one used. Run on the controller
(connection local; the plan contacts no node)."""

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
INVENTORY = {'all': {'hosts': {'prom': {}}, 'children': {
    'npu_nodes': {'hosts': {'node1': {'ansible_host': '10.0.0.1'}, 'node2': {'ansible_host': '10.0.0.2'}}},
    'bench_nodes': {'hosts': {'node2': None, 'node3': {'ansible_host': '10.0.0.3'}}},
    'scraped': {'hosts': {'node4': {'ansible_host': '10.0.0.4'}}},
    'other': {'hosts': {'node5': {'ansible_host': '10.0.0.5'}}}}}}


URLS = "{{ vllm_instance_plan.instances | map(attribute='url') | list | to_json }}"


def planned(tmp_path, group_vars, extra=None, host_vars=None, content=URLS):
    """{host: [instance URL, ...]} of the hosts plan.yml planned (``content``: another view of each plan)."""
    (tmp_path / 'group_vars').mkdir()
    (tmp_path / 'group_vars' / 'all.yml').write_text(yaml.safe_dump(dict(
        group_vars, ansible_connection='local', ansible_python_interpreter=sys.executable)))
    (tmp_path / 'host_vars').mkdir()
    for host, variables in (host_vars or {}).items():
        (tmp_path / 'host_vars' / (host + '.yml')).write_text(yaml.safe_dump(variables))
    (tmp_path / 'hosts.yml').write_text(yaml.safe_dump(INVENTORY))
    out = tmp_path / 'planned'
    out.mkdir()
    (tmp_path / 'pb.yml').write_text(yaml.safe_dump([
        {'ansible.builtin.import_playbook': str(ROOT / 'playbooks' / 'plan.yml')},
        {'hosts': 'all', 'gather_facts': False, 'tasks': [{'ansible.builtin.copy': {
            'content': content,
            'dest': str(out) + '/{{ inventory_hostname }}.json'}, 'when': 'vllm_instance_plan is defined'}]}]))
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / 'ansible.cfg'))
    argv = [str(PLAYBOOK), '-i', str(tmp_path / 'hosts.yml'), str(tmp_path / 'pb.yml')]
    if extra:
        argv += ['-e', json.dumps(extra)]
    run = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=str(tmp_path), check=False)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    return dict((p.stem, json.loads(p.read_text())) for p in out.glob('*.json'))


@pytest.mark.skipif(not PLAYBOOK.exists(), reason='ansible-playbook not next to this Python')
@pytest.mark.parametrize('where', ['inventory', 'extra vars'])
def test_the_benchmark_and_monitoring_groups_are_planned_wherever_they_are_set(tmp_path, where):
    groups = {'kvpool_benchmark_group': 'bench_nodes', 'kvpool_monitoring_node_group': 'scraped'}
    hosts = planned(tmp_path, groups if where == 'inventory' else {}, groups if where == 'extra vars' else None)
    # prom and node5 are in no group a reader takes instances from
    assert hosts == dict(('node%d' % i, ['http://10.0.0.%d:8002' % i]) for i in (1, 2, 3, 4))


@pytest.mark.skipif(not PLAYBOOK.exists(), reason='ansible-playbook not next to this Python')
def test_by_default_only_the_node_group_is_planned(tmp_path):
    assert sorted(planned(tmp_path, {})) == ['node1', 'node2']


@pytest.mark.skipif(not PLAYBOOK.exists(), reason='ansible-playbook not next to this Python')
def test_shared_defaults_set_in_group_vars_or_host_vars_take_effect(tmp_path):
    # The plays load role kvpool_defaults (role-default precedence), so the inventory's values win over its own.
    hosts = planned(tmp_path, {'kvpool_defaults_node_group': 'bench_nodes', 'kvpool_defaults_instance_port': 9100},
                    host_vars={'node3': {'kvpool_defaults_instance_port': 9200}})
    assert hosts == {'node2': ['http://10.0.0.2:9100'], 'node3': ['http://10.0.0.3:9200']}


@pytest.mark.skipif(not PLAYBOOK.exists(), reason='ansible-playbook not next to this Python')
@pytest.mark.parametrize('group_vars, cluster_id', [
    ({'kvpool_master_ha': True, 'kvpool_cluster_id': 'pool-a'}, 'pool-a'),
    # unpinned: derived from the master group's hosts (kvpool_defaults_cluster_id): none here, sha1 of ''
    ({'kvpool_master_ha': True}, 'kvpool-da39a3ee5e'),
    ({'kvpool_cluster_id': 'pool-a'}, '(unset)'),             # no HA masters: the clients read no cluster id
])
def test_the_instances_get_the_pools_cluster_id_with_ha_masters_only(tmp_path, group_vars, cluster_id):
    content = "{{ vllm_instance_plan.instances | map(attribute='env') | map(attribute='MC_STORE_CLUSTER_ID', " \
              "default='(unset)') | list | to_json }}"
    hosts = planned(tmp_path, group_vars, content=content)
    assert hosts == {'node1': [cluster_id], 'node2': [cluster_id]}
