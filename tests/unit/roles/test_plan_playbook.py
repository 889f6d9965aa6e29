# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""playbooks/plan.yml (imported first by benchmark.yml and monitoring.yml) plans the hosts of the node, benchmark
and monitoring node groups, with those group variables set in the inventory (group_vars/all) or as extra vars, and
no other host; a shared default (kvpool_defaults_*) set in the inventory is the one used. Run on the controller
(connection local; the plan contacts no node)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import concurrent.futures
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


GROUPS = {'kvpool_benchmark_group': 'bench_nodes', 'kvpool_monitoring_node_group': 'scraped'}
CLUSTER_ID = "{{ vllm_instance_plan.instances | map(attribute='env') | map(attribute='MC_STORE_CLUSTER_ID', " \
             "default='(unset)') | list | to_json }}"
HA_CASES = [
    ({'kvpool_master_ha': True, 'kvpool_cluster_id': 'pool-a'}, 'pool-a'),
    # unpinned: derived from the master group's hosts (kvpool_defaults_cluster_id): none here, sha1 of ''
    ({'kvpool_master_ha': True}, 'kvpool-da39a3ee5e'),
    ({'kvpool_cluster_id': 'pool-a'}, '(unset)'),             # no HA masters: the clients read no cluster id
]
# Every test's plan.yml run, keyed by the test (the arguments of planned()).
RUNS = {
    'inventory': dict(group_vars=GROUPS),
    'extra vars': dict(group_vars={}, extra=GROUPS),
    'default': dict(group_vars={}),
    'shared defaults': dict(group_vars={'kvpool_defaults_node_group': 'bench_nodes',
                                        'kvpool_defaults_instance_port': 9100},
                            host_vars={'node3': {'kvpool_defaults_instance_port': 9200}}),
}
RUNS.update(('cluster id %d' % i, dict(group_vars=group_vars, content=CLUSTER_ID))
            for i, (group_vars, dummy) in enumerate(HA_CASES))


@pytest.fixture(scope='module')
def runs(tmp_path_factory):
    """The ansible-playbook runs of every test, two at a time (each is seconds of one busy process; the tests only
    read what it planned): {key: planned hosts, or the exception planned() raised, re-raised by its test}."""
    def one(key):
        try:
            return key, planned(tmp_path_factory.mktemp('plan'), **RUNS[key])
        except Exception as exc:  # pylint: disable=broad-except  # AssertionError of the run: its test fails
            return key, exc
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        return dict(pool.map(one, RUNS))


def outcome(runs, key):
    if isinstance(runs[key], Exception):
        raise runs[key]
    return runs[key]


@pytest.mark.skipif(not PLAYBOOK.exists(), reason='ansible-playbook not next to this Python')
@pytest.mark.parametrize('where', ['inventory', 'extra vars'])
def test_the_benchmark_and_monitoring_groups_are_planned_wherever_they_are_set(runs, where):
    hosts = outcome(runs, where)
    # prom and node5 are in no group a reader takes instances from
    assert hosts == dict(('node%d' % i, ['http://10.0.0.%d:8002' % i]) for i in (1, 2, 3, 4))


@pytest.mark.skipif(not PLAYBOOK.exists(), reason='ansible-playbook not next to this Python')
def test_by_default_only_the_node_group_is_planned(runs):
    assert sorted(outcome(runs, 'default')) == ['node1', 'node2']


@pytest.mark.skipif(not PLAYBOOK.exists(), reason='ansible-playbook not next to this Python')
def test_shared_defaults_set_in_group_vars_or_host_vars_take_effect(runs):
    # The plays load role kvpool_defaults (role-default precedence), so the inventory's values win over its own.
    hosts = outcome(runs, 'shared defaults')
    assert hosts == {'node2': ['http://10.0.0.2:9100'], 'node3': ['http://10.0.0.3:9200']}


@pytest.mark.skipif(not PLAYBOOK.exists(), reason='ansible-playbook not next to this Python')
@pytest.mark.parametrize('case', range(len(HA_CASES)), ids=[c[1] for c in HA_CASES])
def test_the_instances_get_the_pools_cluster_id_with_ha_masters_only(runs, case):
    cluster_id = HA_CASES[case][1]
    hosts = outcome(runs, 'cluster id %d' % case)
    assert hosts == {'node1': [cluster_id], 'node2': [cluster_id]}
