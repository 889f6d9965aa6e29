# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The router's workers from the instances' plans (plugin_utils/router_plan.py) and the filter's errors."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import sys

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.ascend.kvpool.plugins.filter import router as router_filter
from ansible_collections.ascend.kvpool.plugins.plugin_utils import router_plan
from ansible_collections.ascend.kvpool.tests.unit.messages import assert_names

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import instance_plans  # noqa: E402


def plan(*instances, **hostvars):
    """One host's variables with its plan, as role vllm_instance makes it from these instances."""
    hostvars['vllm_instance_instances'] = [dict(i, devices=[n]) for n, i in enumerate(instances)]
    return instance_plans.planned({'h': hostvars})['h']


HOSTVARS = {
    'node1': plan({'name': 'a', 'port': 8002}, {'name': 'b', 'port': 8003, 'state': 'stopped'},
                  ansible_host='172.31.250.11'),
    'node2': plan({'name': 'a', 'listen_host': '0.0.0.0', 'port': 8002}, ansible_host='172.31.250.12'),
    'node3': plan({'name': 'a', 'listen_host': '::', 'port': 8002}, ansible_host='fd00::3'),
}


def test_every_instance_not_stopped_sorted_wildcards_at_ansible_host_ipv6_bracketed():
    assert router_plan.router_workers(['node3', 'node2', 'node1'], HOSTVARS) == [
        'http://172.31.250.11:8002', 'http://172.31.250.12:8002', 'http://[fd00::3]:8002']


@pytest.mark.parametrize('instance_listen_host, role_listen_host', [
    ('0.0.0.0', None), ('::', None), ('*', None), (None, ''), (None, '0.0.0.0')])
@pytest.mark.parametrize('node_address', ['127.0.0.1', 'localhost'])
def test_a_wildcard_bind_on_a_node_reached_at_loopback_is_routed_to(instance_listen_host, role_listen_host,
                                                                    node_address):
    """A one-node lab (ansible_host 127.0.0.1 or localhost): an instance bound to every address is not bound to
    loopback only; the router (on that node) reaches it at the node's address."""
    instance = {'name': 'a', 'port': 8002}
    hostvars = {'ansible_host': node_address}
    if instance_listen_host is not None:
        instance['listen_host'] = instance_listen_host
    if role_listen_host is not None:
        hostvars['vllm_instance_listen_host'] = role_listen_host
    hostvars = {'lab': plan(instance, **hostvars)}
    assert hostvars['lab']['vllm_instance_plan']['instances'][0]['loopback'] is False
    assert router_plan.router_workers(['lab'], hostvars) == ['http://%s:8002' % node_address]


def test_the_default_bind_on_a_node_reached_at_loopback_is_loopback_only():
    """The role's default listen address is the node's own (ansible_host): 127.0.0.1 there is a loopback bind."""
    hostvars = {'lab': plan({'name': 'a', 'port': 8002}, ansible_host='127.0.0.1')}
    with pytest.raises(router_plan.RouterPlanError) as err:
        router_plan.router_workers(['lab'], hostvars)
    assert_names(str(err.value), 'instance a of host lab', 'loopback address 127.0.0.1')


def test_explicit_urls_win():
    assert router_plan.router_workers(['nodeX'], {}, ['http://b:1/', 'http://a:1']) == ['http://a:1', 'http://b:1']


@pytest.mark.parametrize('hosts, hostvars, words', [
    (['node1', 'nodeX'], HOSTVARS, 'nodeX of the worker group have no vllm_instance_plan'),
    ([], HOSTVARS, 'no instance to route to on the worker group'),
    (['node1'], {'node1': plan({'name': 'a', 'port': 8002, 'state': 'stopped'})}, 'every one is stopped'),
    (['node1'], {'node1': plan({'name': 'lo', 'listen_host': '127.0.0.1', 'port': 8002})},
     ('instance lo of host node1', 'loopback address 127.0.0.1 only', 'vllm_instance_listen_host', 'listen_host',
      'kvpool_router_worker_urls')),
    (['node1'], {'node1': plan({'name': 'lo', 'listen_host': '[::1]', 'port': 8002})},
     ('instance lo of host node1', 'loopback address ::1 only')),
])
def test_errors_name_the_host_and_the_fix(hosts, hostvars, words):
    with pytest.raises(router_plan.RouterPlanError, match='kvpool_router') as err:
        router_plan.router_workers(hosts, hostvars)
    assert_names(str(err.value), *((words,) if isinstance(words, str) else words))
    with pytest.raises(AnsibleFilterError):
        router_filter.kvpool_router_workers(hosts, hostvars)


def test_policy_filter_refuses_an_unknown_policy_and_a_401():
    with pytest.raises(AnsibleFilterError, match='is not a policy'):
        router_filter.kvpool_router_policy('fastest')
    choice = router_filter.kvpool_router_policy('auto', {'http://a:1': 401}, warn=False)
    assert 'kvpool_router_api_key' in choice['error']
