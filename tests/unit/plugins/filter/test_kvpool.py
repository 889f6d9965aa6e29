# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The filters the roles share (plugins/filter/kvpool.py), and the roles' own task expressions built on them.

The task tests render the real expressions of the roles' task files with Ansible's template engine, the filters
resolved through the collection loader, an in-memory inventory and real ``hostvars``. They run in a child Python
(the collection loader is process-wide state the other unit tests must not see).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import json
import os
import subprocess
import sys

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.ascend.kvpool.plugins.filter import kvpool
from ansible_collections.ascend.kvpool.plugins.plugin_utils import preflight
from ansible_collections.ascend.kvpool.tests.unit.messages import assert_names

GIB = 1 << 30
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(preflight.__file__)))          # .../ascend/kvpool
COLLECTIONS = os.path.dirname(os.path.dirname(os.path.dirname(ROOT)))                # holds ansible_collections/


def test_the_filters_are_the_shared_functions():
    # Each filter calls the shared function (imported at the first call: plugin_utils/lazy.py).
    filters = kvpool.FilterModule().filters()
    assert filters['memory_shortfall'](GIB, [4], GIB, GIB) == preflight.memory_shortfall(GIB, [4], GIB, GIB) != ''
    plans = [{'host': 'n1', 'instances': [{'name': 'i0', 'env': {'PYTHONHASHSEED': '1'}}]},
             {'host': 'n2', 'instances': [{'name': 'i0', 'env': {'PYTHONHASHSEED': '2'}}]}]
    assert filters['hash_seed_mismatch'](plans) == preflight.hash_seed_mismatch(plans)
    hostvars = {'m1': {'ansible_host': '10.0.0.1'}}
    assert filters['master_host'](['m1'], hostvars) == preflight.master_host(['m1'], hostvars) == '10.0.0.1'
    assert filters['master_endpoint'](['m1'], hostvars, 50088) == '10.0.0.1:50088'
    assert filters['size_bytes'] is kvpool.size_bytes


def test_size_bytes_filter_fails_the_template_or_gives_the_invalid_value():
    assert kvpool.size_bytes('100GB') == 100 * GIB
    with pytest.raises(AnsibleFilterError, match=r"'1\.5GB' is not a size"):
        kvpool.size_bytes('1.5GB')
    assert kvpool.size_bytes('1.5GB', invalid=0) == 0
    assert kvpool.size_bytes('1.5GB', invalid=None) is None
    assert kvpool.size_bytes('1GB', invalid=-1) == GIB


# --- the roles' expressions, rendered by Ansible -----------------------------------------------------------------

RENDER = r'''
import json, sys, yaml
from ansible.plugins.loader import init_plugin_loader
specs = json.loads(sys.stdin.read())
init_plugin_loader([specs[0]['collections']])
from ansible.inventory.manager import InventoryManager
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template
from ansible.vars.hostvars import HostVars
from ansible.vars.manager import VariableManager

def trusted(value):
    if isinstance(value, dict):  # a task's nested vars (vllm_instance__settings) are templates too
        return dict((k, trusted(v)) for k, v in value.items())
    if isinstance(value, list):
        return [trusted(v) for v in value]
    return trust_as_template(value) if isinstance(value, str) else value

def render(spec):
    loader = DataLoader()
    inventory = InventoryManager(loader=loader)
    for group, hosts in spec['groups'].items():
        inventory.add_group(group)
        for host, hostvars in hosts.items():
            inventory.add_host(host, group=group)
            for key, value in hostvars.items():
                inventory.get_host(host).set_variable(key, trusted(value))
    manager = VariableManager(loader=loader, inventory=inventory)
    with open(spec['file']) as handle:
        task = [t for t in yaml.safe_load(handle) if t['name'] == spec['task']][0]
    module = [k for k in task if k.startswith('ansible.builtin.')][0]
    variables = manager.get_vars(host=inventory.get_host(spec['host']), include_hostvars=True)
    variables['hostvars'] = HostVars(inventory=inventory, variable_manager=manager, loader=loader)
    variables.update((k, trusted(v)) for k, v in dict(spec['vars'], **task.get('vars', {})).items())
    templar = Templar(loader=loader, variables=variables)
    got = {}
    for key in spec['keys']:
        value = task[module][key]
        if isinstance(value, list):  # assert conditions
            got[key] = [templar.template(trust_as_template('{{ %s }}' % v)) for v in value]
        else:
            got[key] = templar.template(trusted(value))
    return got

print(json.dumps([render(spec) for spec in specs]))
'''


def case(role_file, task, keys, variables, groups, host):
    """What to render: the ``keys`` of a task of ``roles/<role_file>`` for ``host``."""
    return {'collections': COLLECTIONS, 'file': os.path.join(ROOT, 'roles', role_file), 'task': task, 'keys': keys,
            'vars': variables, 'groups': groups, 'host': host}


def render(*cases):
    """``[{key: rendered value}]`` of the cases, in one child Python."""
    env = dict(os.environ, ANSIBLE_INVENTORY_UNPARSED_WARNING='false', ANSIBLE_LOCALHOST_WARNING='false')
    env.pop('ANSIBLE_CONFIG', None)
    run = subprocess.run([sys.executable, '-c', RENDER], input=json.dumps(list(cases)), capture_output=True,
                         text=True, env=env, cwd=os.path.dirname(COLLECTIONS), timeout=120, check=False)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout.strip().splitlines()[-1])


MASTER_TARGET = ('preflight/tasks/master_target.yml',
                 'Work out whether this node is the master and where the nodes reach it')
MOONCAKE_MASTER = ('mooncake_config/tasks/preflight.yml',
                   'Derive the master address from the inventory, keep the sizes in bytes and assemble this node'
                   "'s mooncake.json")


def preflight_vars(**over):
    out = {'preflight_master_group': 'mooncake_master', 'preflight_master_address': '',
           'preflight_master_port': '50088', 'preflight_master_ha': False, 'preflight_checks': ['master']}
    out.update(over)
    return out


def mooncake_vars(**over):
    out = {'mooncake_config_master_group': 'mooncake_master', 'mooncake_config_master_address': '',
           'mooncake_config_master_port': 50088, 'mooncake_config_master_ha': False,
           'mooncake_config_etcd_endpoints': []}
    out.update(over)
    return out


def both(groups, preflight_over=None, mooncake_over=None):
    """(preflight target, mooncake.json master_server_address, mooncake_config_master_host) seen from node2."""
    pre, moon = render(
        case(*MASTER_TARGET, keys=['preflight__master_target'], variables=preflight_vars(**preflight_over or {}),
             groups=groups, host='node2'),
        case(*MOONCAKE_MASTER, keys=['mooncake_config_master_server_address', 'mooncake_config_master_host'],
             variables=mooncake_vars(**mooncake_over or {}), groups=groups, host='node2'))
    return (pre['preflight__master_target'], moon['mooncake_config_master_server_address'],
            moon['mooncake_config_master_host'])


def test_preflight_and_mooncake_config_reach_the_master_at_its_node_address():
    groups = {'mooncake_master': {'node1': {'ansible_host': '172.31.250.11',
                                            'mooncake_config_node_address': "{{ '10.0.0.' ~ 11 }}"}},
              'npu_nodes': {'node2': {'ansible_host': '172.31.250.12'}}}
    assert both(groups) == ('10.0.0.11:50088', '10.0.0.11:50088', '10.0.0.11')


def test_without_node_address_both_take_ansible_host_with_ipv6_brackets():
    groups = {'mooncake_master': {'node1': {'ansible_host': 'fd00::11'}}, 'npu_nodes': {'node2': {}}}
    assert both(groups) == ('[fd00::11]:50088', '[fd00::11]:50088', 'fd00::11')


def test_the_address_setting_wins_in_both():
    groups = {'mooncake_master': {'node1': {'mooncake_config_node_address': '10.0.0.11'}}, 'npu_nodes': {'node2': {}}}
    got = both(groups, {'preflight_master_address': 'master.example', 'preflight_master_port': 50099},
               {'mooncake_config_master_address': 'master.example', 'mooncake_config_master_port': '50099'})
    assert got == ('master.example:50099', 'master.example:50099', 'master.example')


def test_ha_masters_are_etcd_for_mooncake_config_and_skipped_by_the_preflight():
    groups = {'mooncake_master': {'node1': {}}, 'npu_nodes': {'node2': {}}}
    got = both(groups, {'preflight_master_ha': True},
               {'mooncake_config_master_ha': True, 'mooncake_config_etcd_endpoints': ['etcd://e1:2379', 'e2:2379']})
    assert got[:2] == ('', 'etcd://e1:2379;e2:2379')


def test_preflight_without_master_check_or_master_has_no_target():
    groups = {'mooncake_master': {'node1': {}}, 'npu_nodes': {'node2': {}}}
    assert both(groups, {'preflight_checks': ['clock']})[0] == ''
    assert both({'npu_nodes': {'node2': {}}})[0] == ''


SIZES = ('mooncake_config/tasks/preflight.yml', 'Check where the master is and that the pool sizes are whole GiB')
NODE1 = {'npu_nodes': {'node1': {}}, 'mooncake_master': {'node1': {}}}
# The role defaults the master part of the check reads.
MASTER_DEFAULTS = {'mooncake_config_master_ha': False, 'mooncake_config_etcd_endpoints': [],
                   'mooncake_config_master_address': '', 'mooncake_config_master_group': 'mooncake_master'}


def test_mooncake_config_size_check_names_its_variable():
    values = {'100GB': True, '100 GiB': True, 1073741824: True, '1536MB': False, '1.5GB': False, 'lots': False,
              0: False}
    got = render(*[case(*SIZES, keys=['that', 'fail_msg'], groups=NODE1, host='node1',
                        variables=dict(MASTER_DEFAULTS, mooncake_config_global_segment_size='1GB',
                                       mooncake_config_local_buffer_size=value)) for value in values])
    for (value, ok), result in zip(values.items(), got):
        assert all(result['that']) is ok, value
        if not ok:
            assert_names(result['fail_msg'], 'node1: ', 'mooncake_config_local_buffer_size', json.dumps(value),
                         'whole number of GiB', 'Give bytes')


def test_mooncake_config_size_check_names_both_variables_when_both_are_wrong():
    got, = render(case(*SIZES, keys=['that', 'fail_msg'], groups=NODE1, host='node1',
                       variables=dict(MASTER_DEFAULTS, mooncake_config_global_segment_size='1.5GB',
                                      mooncake_config_local_buffer_size='lots')))
    assert got['that'] == [True, False]
    assert_names(got['fail_msg'], 'node1: ', 'mooncake_config_global_segment_size', '"1.5GB"',
                 'mooncake_config_local_buffer_size', '"lots"', 'whole number')


def test_mooncake_config_without_a_master_names_the_group_and_with_ha_the_etcd_endpoints():
    sizes = dict(MASTER_DEFAULTS, mooncake_config_global_segment_size='1GB', mooncake_config_local_buffer_size='1GB')
    no_master = {'npu_nodes': {'node1': {}}}
    none, ha, both_wrong = render(
        case(*SIZES, keys=['that', 'fail_msg'], groups=no_master, host='node1', variables=sizes),
        case(*SIZES, keys=['that', 'fail_msg'], groups=NODE1, host='node1',
             variables=dict(sizes, mooncake_config_master_ha=True)),
        case(*SIZES, keys=['that', 'fail_msg'], groups=no_master, host='node1',
             variables=dict(sizes, mooncake_config_local_buffer_size='lots')))
    assert none['that'] == [False, True]
    assert_names(none['fail_msg'], 'node1: ', 'master_server_address', "group 'mooncake_master'",
                 'mooncake_config_master_group')
    assert ha['that'] == [False, True]
    assert_names(ha['fail_msg'], 'mooncake_config_master_ha', 'mooncake_config_etcd_endpoints', 'is empty')
    assert both_wrong['that'] == [False, False]
    assert_names(both_wrong['fail_msg'], 'master_server_address', 'mooncake_config_local_buffer_size', '"lots"')


MEMORY = ('mooncake_config/tasks/host_checks.yml', "Check that the pool's share fits in the host's memory")


def test_mooncake_config_memory_check_message():
    meminfo = 'MemTotal:       24536064 kB\nMemFree:        1000 kB\n'  # 23.4 GiB
    variables = {'mooncake_config_meminfo': {'content': base64.b64encode(meminfo.encode()).decode()},
                 'mooncake_config_instances_per_node': 1, 'mooncake_config_tensor_parallel_size': 4,
                 'mooncake_config_global_segment_bytes': 64 * GIB, 'mooncake_config_local_buffer_bytes': GIB,
                 'mooncake_config_memory_reserve_gib': 8}
    fits = dict(variables, mooncake_config_global_segment_bytes=GIB, mooncake_config_memory_reserve_gib=0)
    short, enough = render(case(*MEMORY, keys=['that', 'fail_msg'], variables=variables, groups=NODE1, host='node1'),
                           case(*MEMORY, keys=['that'], variables=fits, groups=NODE1, host='node1'))
    assert short['that'] == [False]
    # molecule/mooncake's test_oversized_segment_fails_naming_host_needed_and_available looks for this
    assert_names(short['fail_msg'], 'node1: ', 'needs 268.0 GiB', 'MemTotal is 23.4 GiB',
                 'mooncake_config_global_segment_size', 'add memory')
    assert enough['that'] == [True]  # 1 x 4 x (1 + 1) GiB fits


SEEDS = ('vllm_instance/tasks/preflight.yml',
         'Check that PYTHONHASHSEED is identical on every node (else cross-node prefix hits never happen)')


def planned(host, seed):
    return {'vllm_instance_plan': {'host': host, 'instances': [{'name': 'vllm-8002', 'env': {'PYTHONHASHSEED': seed}}]}}


def test_vllm_instance_hash_seed_check_lists_every_instance_and_the_fix():
    play = {'ansible_play_hosts': ['node1', 'node2', 'node3']}
    differ = {'npu_nodes': {'node1': planned('node1', '0'), 'node2': planned('node2', '1'), 'node3': {}}}
    same = {'npu_nodes': {'node1': planned('node1', '0'), 'node2': planned('node2', '0'), 'node3': {}}}
    got, agree = render(case(*SEEDS, keys=['that', 'fail_msg'], variables=play, groups=differ, host='node1'),
                        case(*SEEDS, keys=['that'], variables=play, groups=same, host='node1'))
    assert got['that'] == [False]
    assert_names(got['fail_msg'], 'PYTHONHASHSEED differs', 'node1/vllm-8002=0', 'node2/vllm-8002=1',
                 'vllm_instance_python_hash_seed', 'vllm_instance_environment')
    assert agree['that'] == [True]


PREFLIGHT_SETTINGS = ('preflight/tasks/validate.yml', 'Check the pre-flight settings')


def test_preflight_size_settings_are_checked():
    segments = {'100GB': True, 107374182400: True, '0': True, '1.5GB': False, '100 PB': False}
    got = render(*[case(*PREFLIGHT_SETTINGS, keys=['that'], groups=NODE1, host='node1',
                        variables={'preflight_checks': ['memory'], 'preflight_max_clock_skew_s': 2.0,
                                   'preflight_global_segment_size': segment, 'preflight_local_buffer_size': '1GB',
                                   'preflight_hugepages': 'auto', 'preflight_extra_ports': {}})
                   for segment in segments])
    for (segment, ok), result in zip(segments.items(), got):
        assert all(result['that']) is ok, segment


def test_preflight_hugepages_and_extra_ports_are_checked():
    cases = [('auto', {}, True), ('400GB', {}, True), (0, {'30000': 'router'}, True), ('lots', {}, False),
             ('auto', {'router': 30000}, False), ('auto', [30000], False)]
    got = render(*[case(*PREFLIGHT_SETTINGS, keys=['that'], groups=NODE1, host='node1',
                        variables={'preflight_checks': ['adxl_ports'], 'preflight_max_clock_skew_s': 2.0,
                                   'preflight_global_segment_size': '1GB', 'preflight_local_buffer_size': '1GB',
                                   'preflight_hugepages': hugepages, 'preflight_extra_ports': ports})
                   for hugepages, ports, _ok in cases])
    for (hugepages, ports, ok), result in zip(cases, got):
        assert all(result['that']) is ok, (hugepages, ports)


MASTER_SETTINGS = ('mooncake_master/tasks/preflight.yml',
                   "Check the master's ports, eviction ratios, HA settings and RPC address")


def master_settings(**over):
    out = {'mooncake_master_port': 50088, 'mooncake_master_metrics_port': 9003,
           'mooncake_master_eviction_high_watermark_ratio': 0.95, 'mooncake_master_eviction_ratio': 0.05,
           'mooncake_master_enable_ha': False, 'mooncake_master_etcd_endpoints': [], 'mooncake_master_rpc_address': ''}
    out.update(over)
    return out


def test_mooncake_master_settings_check_names_what_is_wrong():
    cases = [master_settings(), master_settings(mooncake_master_port=9003), master_settings(mooncake_master_port=0),
             master_settings(mooncake_master_eviction_ratio=1.5), master_settings(mooncake_master_enable_ha=True),
             master_settings(mooncake_master_enable_ha=True, mooncake_master_etcd_endpoints=['e1:2379'],
                             mooncake_master_rpc_address='10.0.0.11', mooncake_config_node_address='10.0.0.11'),
             master_settings(mooncake_master_port=70000, mooncake_master_enable_ha=True)]
    got = render(*[case(*MASTER_SETTINGS, keys=['that', 'fail_msg'], variables=v, groups=NODE1, host='node1')
                   for v in cases])
    assert [all(r['that']) for r in got] == [True, False, False, False, False, True, False]
    ports = 'two different ports 1-65535'
    ha = ('mooncake_master_enable_ha', 'etcd_endpoints (now [])', "rpc_address (now '')", 'turn HA off')
    assert_names(got[1]['fail_msg'], 'node1: ', 'mooncake_master_port (9003)', 'metrics_port (9003)', ports)
    assert_names(got[3]['fail_msg'], ports)
    assert 'turn HA off' not in got[3]['fail_msg']
    assert_names(got[4]['fail_msg'], 'node1: ', *ha)
    assert ports not in got[4]['fail_msg']
    assert_names(got[6]['fail_msg'], ports, *ha)


def test_the_masters_rpc_address_is_the_nodes_data_plane_address():
    cases = [master_settings(mooncake_master_rpc_address='192.168.7.1', mooncake_config_node_address='192.168.7.1'),
             master_settings(mooncake_master_rpc_address='[FD00::1]', mooncake_config_node_address='fd00::1'),
             master_settings(mooncake_master_rpc_address='0.0.0.0', mooncake_config_node_address='192.168.7.1'),
             master_settings(mooncake_master_rpc_address='10.0.0.1', mooncake_config_master_address='vip.example',
                             mooncake_config_node_address='192.168.7.1'),
             master_settings(mooncake_master_rpc_address='10.0.0.1', mooncake_config_node_address='192.168.7.1')]
    got = render(*[case(*MASTER_SETTINGS, keys=['that', 'fail_msg'], variables=v, groups=NODE1, host='node1')
                   for v in cases])
    assert [all(r['that']) for r in got] == [True, True, True, True, False]
    assert_names(got[4]['fail_msg'], 'node1: ', "mooncake_master_rpc_address is '10.0.0.1'",
                 "mooncake_config_node_address, is '192.168.7.1'", 'mooncake_config_node_address: 10.0.0.1',
                 'remove mooncake_master_rpc_address')
