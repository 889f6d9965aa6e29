# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The Prometheus targets of the kvpool_monitoring role (plugins/plugin_utils/monitoring.py), from the instances'
plans (the fact vllm_instance_plan, computed here as role vllm_instance does: tests/unit/plugins/instance_plans.py)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import sys

import pytest

from ansible_collections.ascend.kvpool.plugins.plugin_utils import monitoring
from ansible_collections.ascend.kvpool.tests.unit.messages import assert_names

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import instance_plans  # noqa: E402

DEFAULTS = {'node_group': 'npu_nodes', 'master_group': 'mooncake_master', 'master_metrics_port': 9003,
            'router_group': 'kvpool_router', 'router_prometheus_port': 29000}
GROUPS = {'npu_nodes': ['node1', 'node2'], 'mooncake_master': ['node1']}


def plan(hostvars, groups=None, unplanned=(), **settings):
    """The targets, with every node of the node group planned (but ``unplanned``) as the vllm_instance role does."""
    settings.setdefault('defaults', DEFAULTS)
    groups = GROUPS if groups is None else groups
    nodes = [h for h in groups.get('npu_nodes', []) if h not in unplanned]
    hostvars = instance_plans.planned(dict(dict((h, {}) for h in nodes), **hostvars), nodes)
    return monitoring.monitoring_targets(settings, hostvars, groups)


def test_the_guide_two_nodes_one_master_one_instance_each():
    hostvars = {'node1': {'ansible_host': '10.0.0.1'}, 'node2': {'ansible_host': '10.0.0.2'}}
    out = plan(hostvars)
    assert out['errors'] == []
    assert out['mooncake_master'] == [{'targets': ['10.0.0.1:9003'], 'labels': {
        'cluster': 'kvpool', 'node': 'node1', 'service': 'mooncake-master', 'instance': 'node1/mooncake-master',
        'role': 'mooncake_master', 'pool_address': '10.0.0.1'}}]
    assert [g['targets'] for g in out['vllm_instance']] == [['10.0.0.1:8002'], ['10.0.0.2:8002']]
    assert out['vllm_instance'][1]['labels'] == {'cluster': 'kvpool', 'node': 'node2', 'service': 'vllm-8002',
                                                 'instance': 'node2/vllm-8002', 'role': 'vllm_instance',
                                                 'pool_address': '10.0.0.2'}
    assert out['router'] == []
    assert out['counts'] == {'mooncake_master': 1, 'vllm_instance': 2, 'router': 0}


def test_instances_names_ports_listen_hosts_and_stopped_ones_from_the_inventory():
    hostvars = {
        'node1': {'ansible_host': '10.0.0.1', 'vllm_instance_listen_host': '0.0.0.0',
                  'vllm_instance_instances': [{'devices': [0], 'port': 8002},
                                              {'devices': [1], 'port': 8003, 'name': 'b', 'listen_host': '10.9.0.1'},
                                              {'devices': [2], 'port': 8004, 'state': 'stopped'}]},
        'node2': {'vllm_instance_listen_host': 'fd00::2'},
    }
    out = plan(hostvars)
    assert out['errors'] == []
    assert [(g['targets'][0], g['labels']['instance']) for g in out['vllm_instance']] == [
        ('10.0.0.1:8002', 'node1/vllm-8002'),  # a wildcard bind is scraped at ansible_host, not loopback
        ('10.9.0.1:8003', 'node1/b'),
        ('[fd00::2]:8002', 'node2/vllm-8002'),
    ]


def test_the_targets_are_the_plans_instances_and_a_host_without_a_plan_is_named():
    hostvars = {'node1': {'ansible_host': '10.0.0.1', 'vllm_instance_instances': [
        {'devices': [0], 'port': 18002, 'name': 'a'}, {'devices': [1], 'port': 18003, 'state': 'stopped'}]}}
    out = plan(hostvars, groups={'npu_nodes': ['node1', 'node2'], 'mooncake_master': ['node1']}, unplanned=['node2'])
    assert [g['targets'][0] for g in out['vllm_instance']] == ['10.0.0.1:18002']
    assert len(out['errors']) == 1
    assert 'node2: no vllm_instance_plan' in out['errors'][0] and 'monitoring.yml' in out['errors'][0]


def test_master_metrics_port_and_address_of_the_master_host():
    hostvars = {'m': {'ansible_host': '10.0.0.9', 'mooncake_master_metrics_port': 19003,
                      'mooncake_master_metrics_address': '10.1.0.9'}}
    out = plan(hostvars, groups={'npu_nodes': [], 'mooncake_master': ['m']})
    assert out['mooncake_master'][0]['targets'] == ['10.1.0.9:19003']
    hostvars['m']['mooncake_master_metrics_address'] = ''
    assert plan(hostvars, groups={'mooncake_master': ['m']})['mooncake_master'][0]['targets'] == ['10.0.0.9:19003']


def test_routers_urls_and_dicts_with_scheme_and_path_labels():
    out = plan({}, routers=['http://10.0.0.5:29000', {'url': 'https://[fd00::5]:29001/prom', 'name': 'r2',
                                                      'node': 'gw'}], cluster='c1', labels={'dc': 'a'})
    assert out['errors'] == []
    first, second = out['router']
    assert first == {'targets': ['10.0.0.5:29000'], 'labels': {
        'cluster': 'c1', 'node': '10.0.0.5', 'service': 'router', 'instance': '10.0.0.5/router', 'role': 'router',
        'dc': 'a'}}
    assert second['targets'] == ['[fd00::5]:29001']
    assert second['labels']['__scheme__'] == 'https'
    assert second['labels']['__metrics_path__'] == '/prom'
    assert second['labels']['instance'] == 'gw/r2'


def test_the_deployed_router_is_scraped_at_its_hosts_address_unless_it_is_off():
    groups = dict(GROUPS, kvpool_router=['node1', 'node2'])
    hostvars = {'node1': {'ansible_host': '10.0.0.1', 'kvpool_router_enabled': True},
                'node2': {'ansible_host': 'fd00::2', 'kvpool_router_enabled': 'true',
                          'kvpool_router_prometheus_host': '::', 'kvpool_router_prometheus_port': 29001}}
    out = plan(hostvars, groups=groups)
    assert out['errors'] == []
    assert [g['targets'] for g in out['router']] == [['10.0.0.1:29000'], ['[fd00::2]:29001']]
    assert out['router'][0]['labels'] == {'cluster': 'kvpool', 'node': 'node1', 'service': 'router',
                                          'instance': 'node1/router', 'role': 'router'}
    hostvars['node2']['kvpool_router_enabled'] = False
    assert [g['targets'] for g in plan(hostvars, groups=groups)['router']] == [['10.0.0.1:29000']]
    other = plan(hostvars, groups=dict(GROUPS, edge=['node2']), router_group='edge')
    assert other['router'] == []


def test_loopback_servers_are_refused_unless_prometheus_runs_on_their_host():
    groups = dict(GROUPS, kvpool_router=['node1'])
    hostvars = {'node1': {'ansible_host': '10.0.0.1', 'kvpool_router_enabled': True, 'kvpool_router_host': '127.0.0.1',
                          'mooncake_master_metrics_address': '127.0.0.1', 'vllm_instance_listen_host': '127.0.0.1'},
                'node2': {'ansible_host': '10.0.0.2'}}
    errors = plan(hostvars, groups=groups, monitoring_host='localhost')['errors']
    assert len(errors) == 3, errors
    for error, name in zip(errors, ['mooncake_master_metrics_address', 'instance vllm-8002', 'kvpool_router_host']):
        assert_names(error, 'node1: ', name)
    assert all('127.0.0.1' in e and 'site.yml --tags' in e for e in errors)
    local = plan(hostvars, groups=groups, monitoring_host='node1')
    assert local['errors'] == []
    assert [g['targets'] for g in local['router']] == [['127.0.0.1:29000']]


def test_the_router_is_scraped_where_the_role_binds_its_metrics():
    groups = dict(GROUPS, kvpool_router=['node1'])
    hostvars = {'node1': {'ansible_host': '10.0.0.1', 'kvpool_router_enabled': True, 'kvpool_router_host': '10.9.0.1'}}
    assert [g['targets'] for g in plan(hostvars, groups=groups)['router']] == [['10.9.0.1:29000']]
    hostvars['node1']['kvpool_router_prometheus_host'] = '10.8.0.1'
    assert [g['targets'] for g in plan(hostvars, groups=groups)['router']] == [['10.8.0.1:29000']]


@pytest.mark.parametrize('settings, hostvars, groups, error', [
    ({}, {'node1': {'kvpool_router_enabled': True, 'kvpool_router_prometheus_host': '127.0.0.1'}},
     dict(GROUPS, kvpool_router=['node1']), 'node1: kvpool_router_prometheus_host is 127.0.0.1'),
    ({}, {'node1': {'kvpool_router_enabled': True, 'kvpool_router_prometheus_port': 0}},
     dict(GROUPS, kvpool_router=['node1']), 'node1: kvpool_router_prometheus_port 0'),
    ({}, {}, {'npu_nodes': []}, "no host in the master group 'mooncake_master'"),
    ({'routers': ['10.0.0.5']}, {}, None, 'routers[0]'),
    ({'routers': 'http://x:1'}, {}, None, 'must be a list'),
    ({'labels': {'role': 'x'}}, {}, None, 'set by the role itself'),
    ({'labels': {'bad-name': 'x'}}, {}, None, 'not valid Prometheus label name'),
    ({}, {'node1': {'mooncake_master_metrics_port': 'nine'}}, None, 'mooncake_master_metrics_port'),
    ({}, {'node1': {'ansible_host': '10.0.0.1'}, 'node2': {'ansible_host': '10.0.0.1'}}, None, 'already is'),
])
def test_inventory_mistakes_are_named(settings, hostvars, groups, error):
    out = plan(hostvars, groups=groups, **settings)
    assert any(error in e for e in out['errors']), out['errors']


def test_settings_without_the_shared_defaults_are_refused():
    with pytest.raises(ValueError) as exc:
        monitoring.monitoring_targets({'defaults': {'node_group': 'a', 'master_group': 'b',
                                                    'master_metrics_port': 1}}, {}, {})
    assert_names(str(exc.value), 'router_group', 'router_prometheus_port')
    with pytest.raises(ValueError, match='must be a dict'):
        monitoring.monitoring_targets([], {}, {})


def test_pool_address_is_the_nodes_data_plane_address_and_the_scrape_stays_on_http():
    hostvars = {'node1': {'ansible_host': '10.0.0.1', 'mooncake_config_node_address': '192.168.7.1'},
                'node2': {'ansible_host': '10.0.0.2'}}
    out = plan(hostvars)
    assert out['errors'] == []
    assert [(g['targets'][0], g['labels']['pool_address']) for g in out['mooncake_master']] == [
        ('10.0.0.1:9003', '192.168.7.1')]
    assert [(g['targets'][0], g['labels']['pool_address']) for g in out['vllm_instance']] == [
        ('10.0.0.1:8002', '192.168.7.1'), ('10.0.0.2:8002', '10.0.0.2')]
    # The same address is the instances' VLLM_HOST_IP in the plan they come from.
    assert instance_plans.host_plan('node1', hostvars['node1'])['instances'][0]['env']['VLLM_HOST_IP'] == '192.168.7.1'
