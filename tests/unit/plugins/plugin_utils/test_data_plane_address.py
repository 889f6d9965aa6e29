# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""One data-plane address per node (issue 39): ``mooncake_config_node_address`` (else ``ansible_host``) is every
instance's ``VLLM_HOST_IP`` (vLLM's ``get_ip()``, where vllm-ascend registers the Mooncake segments at every tag),
the master's address, the probe's and the monitoring's; ``vllm_instance_host_ip`` may only repeat it; mooncake.json
carries no ``local_hostname`` (no release line reads it)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest
import yaml

from ansible_collections.ascend.kvpool.plugins.plugin_utils import vllm_plan
from ansible_collections.ascend.kvpool.tests.unit.messages import assert_names
from ansible_collections.ascend.kvpool.tests.unit.plugins import instance_plans
from ansible_collections.ascend.kvpool.tests.unit.plugins.filter.test_kvpool import MOONCAKE_MASTER, ROOT, case, render
from ansible_collections.ascend.kvpool.tests.unit.plugins.module_utils.vllm_guide import plan


def _defaults(role):
    with open(os.path.join(ROOT, 'roles', role, 'defaults', 'main.yml')) as handle:
        return yaml.safe_load(handle)


def test_vllm_host_ip_is_the_data_plane_address():
    p = plan(data_address='192.168.7.1')
    assert p['errors'] == [] and p['data_address'] == '192.168.7.1'
    assert p['instances'][0]['env']['VLLM_HOST_IP'] == '192.168.7.1'
    assert p['instances'][0]['url'] == 'http://90.90.100.188:8002'  # the API stays on its listen address


@pytest.mark.parametrize('host_ip, data', [('192.168.7.1', '192.168.7.1'), ('[FD00::1]', 'fd00::1')])
def test_vllm_instance_host_ip_equal_to_it_is_accepted(host_ip, data):
    p = plan(host_ip=host_ip, data_address=data)
    assert p['errors'] == [] and p['instances'][0]['env']['VLLM_HOST_IP'] == host_ip


def test_vllm_instance_host_ip_elsewhere_is_refused_naming_both_and_the_fix():
    p = plan(host_ip='192.168.7.1', data_address='90.90.100.188')
    assert len(p['errors']) == 1
    assert_names(p['errors'][0], 'node1', 'vllm_instance_host_ip is 192.168.7.1', 'mooncake_config_node_address',
                 '90.90.100.188', 'VLLM_HOST_IP', 'mooncake_config_node_address: 192.168.7.1',
                 'remove vllm_instance_host_ip')
    assert plan(host_ip='192.168.7.1', data_address='90.90.100.188', state='stopped')['errors'] == []


@pytest.mark.parametrize('address, carries', [
    ('192.168.7.1:22', 'a port (:22)'), ('http://192.168.7.1', 'a scheme (http://)')])
def test_a_data_plane_address_with_a_port_or_a_scheme_is_refused_naming_the_variable_and_the_fix(address, carries):
    # mooncake_config_node_address becomes VLLM_HOST_IP, which vLLM takes as the segment's host: one address only,
    # the rule of vllm_instance_host_ip and of the master's address (issue 32).
    p = plan(data_address=address)
    assert len(p['errors']) == 1, p['errors']
    assert_names(p['errors'][0], 'node1', 'mooncake_config_node_address=%r' % address, 'is not one address',
                 carries, 'give the address alone (for example 172.31.250.11)')
    assert plan(data_address=address, state='stopped')['errors'] == []  # a stop never fails on it


def test_a_caller_without_data_address_keeps_host_ip_or_the_node_address():
    assert plan(host_ip='192.168.7.1', data_address='')['instances'][0]['env']['VLLM_HOST_IP'] == '192.168.7.1'
    assert plan(data_address='')['instances'][0]['env']['VLLM_HOST_IP'] == '90.90.100.188'


def test_role_defaults_take_mooncake_config_node_address_once():
    # Through the role's own settings (tasks/preflight.yml, defaults): one variable per node.
    second = instance_plans.host_plan('node1', {'ansible_host': '10.0.0.1',
                                                'mooncake_config_node_address': '192.168.7.1'})
    assert second['errors'] == [] and second['instances'][0]['env']['VLLM_HOST_IP'] == '192.168.7.1'
    plain = instance_plans.host_plan('node2', {'ansible_host': '10.0.0.2'})
    assert plain['instances'][0]['env']['VLLM_HOST_IP'] == '10.0.0.2'
    # An inventory of before: vllm_instance_host_ip on the second network, mooncake_config_node_address unset.
    legacy = instance_plans.host_plan('node3', {'ansible_host': '10.0.0.3', 'vllm_instance_host_ip': '192.168.7.3'})
    assert_names('\n'.join(legacy['errors']), 'node3', 'vllm_instance_host_ip', 'mooncake_config_node_address',
                 '10.0.0.3')


def _role_vars(host_vars, *roles):
    out = dict(_defaults('kvpool_defaults'))
    for role in roles:
        out.update(_defaults(role))
    return dict((k, v) for k, v in out.items() if k not in host_vars)


def test_the_role_template_renders_vllm_host_ip_from_mooncake_config_node_address():
    host_vars = {'ansible_host': '10.0.0.1', 'mooncake_config_node_address': '192.168.7.1'}
    variables = _role_vars(host_vars, 'vllm_instance')
    got = render(case('vllm_instance/tasks/preflight.yml', 'Render this host\'s instances for vllm-ascend '
                      '{{ vllm_instance_vllm_ascend_version }}', ['vllm_instance_plan'], variables,
                      {'npu_nodes': {'node1': host_vars}}, 'node1'))[0]['vllm_instance_plan']
    assert got['errors'] == [] and got['data_address'] == '192.168.7.1'
    assert got['instances'][0]['env']['VLLM_HOST_IP'] == '192.168.7.1'


@pytest.mark.parametrize('write', [None, True])
def test_mooncake_json_has_local_hostname_only_when_asked(write):
    assert _defaults('mooncake_config')['mooncake_config_write_local_hostname'] is vllm_plan.READS_LOCAL_HOSTNAME
    host_vars = {'ansible_host': '10.0.0.1', 'mooncake_config_node_address': '192.168.7.1'}
    if write is not None:
        host_vars['mooncake_config_write_local_hostname'] = write
    groups = {'mooncake_master': {'node1': host_vars}}
    doc = render(case(*MOONCAKE_MASTER, keys=['mooncake_config_document', 'mooncake_config_master_server_address'],
                      variables=_role_vars(host_vars, 'mooncake_config'), groups=groups, host='node1'))[0]
    keys = set(doc['mooncake_config_document'])
    read = set(r[0] for r in vllm_plan.RELEASE_READS if r[2] == 'mooncake.json' and r[0] != 'local_hostname')
    assert read <= keys  # every key a release reads is written
    assert ('local_hostname' in keys) is bool(write)
    if write:
        assert doc['mooncake_config_document']['local_hostname'] == '192.168.7.1'
    assert doc['mooncake_config_master_server_address'] == '192.168.7.1:50088'
