# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The rules the pre-flight judgement shares with the mooncake_config and vllm_instance roles (one place each):
the pool's memory need, identical PYTHONHASHSEED, the master's address."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.ascend.kvpool.plugins.plugin_utils.preflight import (
    hash_seed_mismatch, hash_seeds, master_endpoint, master_host, memory_needed, memory_shortfall)
from ansible_collections.ascend.kvpool.tests.unit.messages import assert_names

GIB = 1 << 30


# --- memory ----------------------------------------------------------------------------------------------------

def test_every_rank_of_every_instance_registers_segment_and_buffer():
    assert memory_needed([4], 64 * GIB, GIB, 8 * GIB) == 268 * GIB       # 1 x TP 4 x (64 + 1) + 8
    assert memory_needed([4, 4], 100 * GIB, GIB, 8 * GIB) == 816 * GIB   # 8 ranks x 101 + 8
    assert memory_needed([4, 2], 3 * GIB, GIB) == 24 * GIB
    assert memory_needed([], 100 * GIB, GIB, GIB) == GIB
    assert memory_needed(['4'], '1073741824', '0', '0') == 4 * GIB      # as templated values may come


def test_shortfall_names_the_computation_needed_and_memtotal():
    # mooncake_config's message (molecule/mooncake greps it): 23.4 GiB MemTotal, 64 GiB segments.
    text = memory_shortfall(int(23.4 * GIB), [4], 64 * GIB, GIB, 8 * GIB)
    assert_names(text, '1 instance(s) x TP 4', 'global_segment_size 64 GiB', 'reserve 8 GiB', 'needs 268.0 GiB',
                 'MemTotal is 23.4 GiB')


def test_shortfall_of_instances_with_different_tp_counts_the_ranks():
    text = memory_shortfall(20 * GIB, [4, 2], 2 * GIB + GIB // 2, GIB, GIB // 2)
    assert_names(text, '2 instance(s)', '6 TP rank(s) in all', 'global_segment_size 2.5 GiB', 'reserve 0.5 GiB',
                 'needs 21.5 GiB')


def test_what_fits_exactly_is_no_shortfall():
    assert memory_shortfall(268 * GIB, [4], 64 * GIB, GIB, 8 * GIB) == ''
    assert memory_shortfall(268 * GIB - 1, [4], 64 * GIB, GIB, 8 * GIB) != ''
    assert memory_shortfall(str(268 * GIB), [4], 64 * GIB, GIB, 8 * GIB) == ''


# --- PYTHONHASHSEED --------------------------------------------------------------------------------------------

def plan(host, *seeds):
    return {'host': host, 'instances': [
        {'name': 'vllm-%d' % (8002 + i), 'env': {} if seed is None else {'PYTHONHASHSEED': seed}}
        for i, seed in enumerate(seeds)]}


def test_seeds_that_differ_list_every_instance_with_its_seed():
    assert hash_seed_mismatch([plan('node1', '0'), plan('node2', '1')]) == ['node1/vllm-8002=0', 'node2/vllm-8002=1']


def test_one_instance_that_differs_on_a_node_lists_all():
    got = hash_seed_mismatch([plan('node1', '0', '0'), plan('node2', '0', '7')])
    assert got == ['node1/vllm-8002=0', 'node1/vllm-8003=0', 'node2/vllm-8002=0', 'node2/vllm-8003=7']


def test_identical_seeds_are_no_mismatch():
    assert hash_seed_mismatch([plan('node1', '0', '0'), plan('node2', 0)]) == []   # '0' and 0 are one seed
    assert hash_seed_mismatch([plan('node1', '1234')]) == []
    assert hash_seed_mismatch([]) == [] and hash_seed_mismatch(None) == []


def test_an_unset_seed_differs_from_a_set_one():
    got = hash_seed_mismatch([plan('node1', '0'), plan('node2', None)])
    assert got == ['node1/vllm-8002=0', 'node2/vllm-8002=unset']
    assert hash_seeds([plan('node2', None, '')]) == [('node2', 'vllm-8002', 'unset'), ('node2', 'vllm-8003', 'unset')]


# --- master address --------------------------------------------------------------------------------------------

HOSTVARS = {
    'node1': {'ansible_host': '172.31.250.11', 'mooncake_config_node_address': '10.0.0.11'},
    'node2': {'ansible_host': '172.31.250.12'},
    'node3': {'ansible_host': 'fd00::13'},
    'node4': {},
}


def test_node_address_of_the_master_host_wins_over_its_ansible_host():
    assert master_host(['node1', 'node2'], HOSTVARS) == '10.0.0.11'
    assert master_endpoint(['node1', 'node2'], HOSTVARS, 50088) == '10.0.0.11:50088'


@pytest.mark.parametrize('hosts, expected', [
    (['node2', 'node1'], '172.31.250.12:50088'),   # the first host of the group, at its ansible_host
    (['node3'], '[fd00::13]:50088'),               # IPv6 in brackets
    (['node4'], 'node4:50088'),                    # no address: the inventory name
])
def test_without_node_address_the_first_hosts_ansible_host_or_name(hosts, expected):
    assert master_endpoint(hosts, HOSTVARS, '50088') == expected


def test_the_address_setting_overrides_the_inventory():
    assert master_endpoint(['node1'], HOSTVARS, 50088, 'master.example') == 'master.example:50088'
    assert master_endpoint([], {}, 50088, 'fe80::1') == '[fe80::1]:50088'
    assert master_endpoint([], {}, 50088, '[fe80::1]') == '[fe80::1]:50088'   # already bracketed
    assert master_host(['node1'], HOSTVARS, 'master.example') == 'master.example'


def test_no_master_host_and_no_address_is_empty():
    assert master_endpoint([], HOSTVARS, 50088) == '' and master_host([], HOSTVARS) == ''


def test_ha_masters_are_the_etcd_endpoints():
    got = master_endpoint(['node1'], HOSTVARS, 50088, ha=True, etcd_endpoints=['etcd://10.0.0.1:2379', '10.0.0.2:2379'])
    assert got == 'etcd://10.0.0.1:2379;10.0.0.2:2379'


def test_fabric_memory_ranks_register_no_local_buffer():
    # ASCEND_ENABLE_USE_FABRIC_MEM=1: mooncake_backend.py passes local_buffer_size=0 at every release.
    assert memory_needed([4], 64 * GIB, GIB, 8 * GIB, buffer_ranks=0) == 264 * GIB
    assert memory_needed([4, 4], 64 * GIB, GIB, 0, buffer_ranks=4) == 516 * GIB
    assert memory_shortfall(264 * GIB, [4], 64 * GIB, GIB, 8 * GIB, 0) == ''
    text = memory_shortfall(264 * GIB, [4, 4], 64 * GIB, GIB, 8 * GIB, 4)
    assert 'on 4 rank(s) only' in text and 'ASCEND_ENABLE_USE_FABRIC_MEM=1' in text


@pytest.mark.parametrize('kwargs, names', [
    ({'address': '10.0.0.1:50051'}, ["mooncake_config_master_address='10.0.0.1:50051'", 'a port (:50051)',
                                     'mooncake_config_master_port']),
    ({'address': 'http://10.0.0.1'}, ["mooncake_config_master_address='http://10.0.0.1'", 'a scheme (http://)']),
    ({'address': '10.0.0.1', 'port': -5}, ['mooncake_config_master_port=-5', 'is out of range 1-65535']),
    ({'address': '10.0.0.1', 'port': '70000'}, ['mooncake_config_master_port=70000', 'is out of range 1-65535']),
    ({'ha': True, 'etcd_endpoints': ['10.0.0.1:2379', '10.0.0.2']},
     ["mooncake_config_etcd_endpoints[1]='10.0.0.2' is not host:port", 'for example 10.0.0.1:2379']),
    ({'ha': True, 'etcd_endpoints': ['http://10.0.0.1:2379']}, ['mooncake_config_etcd_endpoints[0]', 'a scheme']),
    ({'ha': True, 'etcd_endpoints': ['10.0.0.1:0']}, ['mooncake_config_etcd_endpoints[0]=0', 'out of range']),
])
def test_a_master_address_port_or_etcd_endpoint_that_is_not_one_is_refused_naming_the_variable(kwargs, names):
    """Issue 32: 10.0.0.1:50051 gave [10.0.0.1:50051]:50051, http://10.0.0.1 and port -5 / 70000 passed, an etcd
    endpoint without its port became etcd://10.0.0.1."""
    from ansible.errors import AnsibleFilterError

    from ansible_collections.ascend.kvpool.plugins.filter.kvpool import FilterModule
    from ansible_collections.ascend.kvpool.plugins.module_utils._errors import KvpoolError
    args = dict({'port': 50088}, **kwargs)
    with pytest.raises(KvpoolError) as exc:
        master_endpoint(['node1'], HOSTVARS, **args)
    assert_names(str(exc.value), *names)
    with pytest.raises(AnsibleFilterError, match='master_endpoint: '):
        FilterModule().filters()['master_endpoint'](['node1'], HOSTVARS, **args)
    got = master_endpoint([], {}, 50088, ha=True, etcd_endpoints=['etcd://10.0.0.1:2379', '[fd00::1]:2379'])
    assert got == 'etcd://10.0.0.1:2379;[fd00::1]:2379'


def test_the_inventorys_master_address_with_a_port_names_the_host_and_the_preflight_names_its_own_variables():
    from ansible_collections.ascend.kvpool.plugins.module_utils._errors import KvpoolError
    with pytest.raises(KvpoolError) as exc:
        master_endpoint(['m'], {'m': {'ansible_host': '10.0.0.9:22'}}, 50088)
    assert_names(str(exc.value), 'master host m', 'mooncake_config_node_address', 'a port (:22)')
    with pytest.raises(KvpoolError) as exc:
        master_endpoint([], {}, 70000, 'x', address_var='preflight_master_address', port_var='preflight_master_port')
    assert_names(str(exc.value), 'preflight_master_port=70000')
