# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""One instance plan: the router's workers, the monitoring targets and the benchmark's instances are the plan's
names and URLs (plugin_utils/vllm_plan.py plans; router_plan.py, monitoring.py and bench_plan.py only read it)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import sys

from ansible_collections.ascend.kvpool.plugins.plugin_utils import bench_plan, monitoring, router_plan, vllm_plan

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import instance_plans  # noqa: E402

# Every address rule at once: the role's default listen address (the node's own), a wildcard (IPv4 and IPv6), an
# explicit listen address, an IPv6 node, a named and a stopped instance.
INVENTORY = {
    'node1': {'ansible_host': '10.0.0.1', 'vllm_instance_instances': [
        {'devices': [0, 1], 'port': 8002}, {'devices': [2, 3], 'port': 8003, 'name': 'second',
                                            'listen_host': '0.0.0.0'},
        {'devices': [4], 'port': 8004, 'state': 'stopped'}]},
    'node2': {'ansible_host': 'fd00::2', 'vllm_instance_listen_host': '::'},
    'node3': {'ansible_host': '10.0.0.3', 'vllm_instance_instances': [
        {'devices': [0], 'port': 9002, 'listen_host': '10.9.0.3'}]},
}
NODES = ['node1', 'node2', 'node3']
GROUPS = {'npu_nodes': NODES, 'mooncake_master': ['node1']}
DEFAULTS = {'node_group': 'npu_nodes', 'master_group': 'mooncake_master', 'master_metrics_port': 9003,
            'router_group': 'kvpool_router', 'router_prometheus_port': 29000}
HOSTVARS = instance_plans.planned(INVENTORY)


def started():
    """``[(host, name, url)]`` of every started instance, as the plan says."""
    return [(h, i['name'], i['url']) for h in NODES for i in HOSTVARS[h]['vllm_instance_plan']['instances']
            if i['state'] == 'started']


def test_the_plan_names_and_places_every_instance_once():
    assert all(HOSTVARS[h]['vllm_instance_plan']['errors'] == [] for h in NODES)
    assert started() == [
        ('node1', 'vllm-8002', 'http://10.0.0.1:8002'), ('node1', 'second', 'http://10.0.0.1:8003'),
        ('node2', 'vllm-8002', 'http://[fd00::2]:8002'), ('node3', 'vllm-9002', 'http://10.9.0.3:9002')]
    second = HOSTVARS['node1']['vllm_instance_plan']['instances'][1]
    assert (second['endpoint'], second['loopback']) == ('http://127.0.0.1:8003', False)  # polled on its node
    assert vllm_plan.instance_name(8002) == 'vllm-8002'


def test_the_router_routes_to_the_plans_urls():
    assert router_plan.router_workers(NODES, HOSTVARS) == sorted(url for _h, _n, url in started())


def test_monitoring_scrapes_the_plans_names_at_the_plans_addresses():
    out = monitoring.monitoring_targets({'defaults': DEFAULTS}, HOSTVARS, GROUPS)
    assert out['errors'] == []
    assert [('http://' + g['targets'][0], g['labels']['node'], g['labels']['service']) for g in out['vllm_instance']] \
        == [(url, host, name) for host, name, url in started()]


def test_the_benchmark_measures_the_plans_instances():
    settings = {'defaults': DEFAULTS, 'instance1': {'host': 'node1', 'instance': 'second'}}
    out = bench_plan.kvpool_benchmark_plan(settings, HOSTVARS, GROUPS)
    assert out['errors'] == []
    plan = dict(((h, n), u) for h, n, u in started())
    for role, host in (('instance1', 'node1'), ('instance2', 'node2')):
        inst = out[role]
        assert plan[(host, inst['name'])] == inst['url'], role
    assert (out['instance1']['name'], out['instance2']['name']) == ('second', 'vllm-8002')
