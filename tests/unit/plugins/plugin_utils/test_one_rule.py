# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""One rule, one place: the plan of role vllm_instance (``plan_instances``) and the module ``vllm_server`` check an
instance's values with the same functions (``module_utils/_vllm.py``, ``_validate.py``), so the same bad value gets
the same message from both. The role's message names the role's variable (or the key of the instance's entry), the
module's its option; everything else is the same sentence, after the host and instance in the plan.

The module runs over the in-memory service manager of service_harness.py (nothing is started)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import sys
from pathlib import Path

import pytest

from ansible_collections.ascend.kvpool.plugins.module_utils import _vllm
from ansible_collections.ascend.kvpool.tests.unit.messages import assert_names
from ansible_collections.ascend.kvpool.tests.unit.plugins.module_utils.vllm_guide import GUIDE
from ansible_collections.ascend.kvpool.tests.unit.plugins.modules import service_harness as svc
from ansible_collections.ascend.kvpool.plugins.plugin_utils import vllm_plan

manager = svc.manager  # the fixture

INSTANCE = {'name': 'a', 'devices': [0, 1, 2, 3], 'port': 8002}
TP_ROLE_FIX = 'omit it for one worker per NPU of devices'


def plan_errors(instance=None, **settings):
    s = dict(GUIDE)
    s['serve_flags'] = dict(GUIDE['serve_flags'], **settings.pop('serve_flags', {}))
    s.update(settings)
    return vllm_plan.plan_instances([dict(INSTANCE, **(instance or {}))], s, 'node1')['errors']


def module_message(capsys, **params):
    params.setdefault('wait', False)
    params.setdefault('name', 'a')
    res = svc.vllm(capsys, **params)
    assert res.get('failed'), res
    return res['msg']


# (rule, the instance's entry, the role's settings, the module's parameters, the role's name of the option, the
# module's name of it)
CASES = [
    ('port range', {'port': 70000}, {}, {'port': 70000}, 'port', 'port'),
    ('tensor parallel size at least 1', {'tensor_parallel_size': -2}, {}, {'tensor_parallel_size': -2},
     'tensor_parallel_size', 'tensor_parallel_size'),
    ('tensor parallel size vs NPUs', {'devices': [0, 1], 'tensor_parallel_size': 4}, {},
     {'visible_devices': [0, 1], 'tensor_parallel_size': 4}, 'devices', 'visible_devices'),
    ('NPU id range', {'devices': [16]}, {}, {'visible_devices': [16]}, 'devices', 'visible_devices'),
    ('NPU id negative', {'devices': [0, -1]}, {}, {'visible_devices': [0, -1]}, 'devices', 'visible_devices'),
    ('NPU listed twice', {'devices': [2, 3, 2]}, {}, {'visible_devices': [2, 3, 2]}, 'devices', 'visible_devices'),
    ('no NPU', {'devices': []}, {}, {'visible_devices': []}, 'devices', 'visible_devices'),
    ('listen address with a port', {'listen_host': '172.31.250.11:8002'}, {}, {'host': '172.31.250.11:8002'},
     'listen_host', 'host'),
    ('name', {'name': 'a b'}, {}, {'name': 'a b'}, 'name', 'name'),
    ('lookup_rpc_port', {'lookup_rpc_port': -1}, {},
     {'kv_transfer_config': {'kv_role': 'kv_both', 'kv_connector_extra_config': {'lookup_rpc_port': -1}}},
     'lookup_rpc_port', 'kv_transfer_config.kv_connector_extra_config.lookup_rpc_port'),
    ('environment names', {'environment': {'A=B': '1'}}, {}, {'env': {'A=B': '1'}}, 'environment', 'env'),
    ('API key in the environment', {'environment': {'VLLM_API_KEY': 'sekret'}}, {},
     {'env': {'VLLM_API_KEY': 'sekret'}}, 'vllm_instance_api_key', 'api_key'),
    ('API key in the arguments', {'extra_args': ['--api-key', 'sekret']}, {},
     {'extra_args': ['--api-key', 'sekret']}, 'vllm_instance_api_key', 'api_key'),
    ('model', {}, {'model_path': ''}, {'model': ''}, 'vllm_instance_model_path (or model_path of the instance)',
     'model'),
    ('max_model_len', {'max_model_len': 0}, {}, {'serve_flags': {'max_model_len': 0}}, 'max_model_len',
     'serve_flags.max_model_len'),
    ('gpu_memory_utilization', {'gpu_memory_utilization': 1.5}, {},
     {'serve_flags': {'gpu_memory_utilization': 1.5}}, 'gpu_memory_utilization', 'serve_flags.gpu_memory_utilization'),
]


@pytest.mark.parametrize('rule, instance, settings, params, role_option, module_option', CASES,
                         ids=[c[0] for c in CASES])
def test_the_plan_and_the_module_give_the_same_message(manager, capsys, rule, instance, settings, params,
                                                       role_option, module_option):
    message = module_message(capsys, **params)
    assert module_option in message, message
    # The plan says where: the instance by its name, or by its place in the list when the name is the bad value.
    where = 'node1: vllm_instance_instances[0]' if rule == 'name' else 'node1: instance a'
    # The fix of an unset-able flag differs: a module user omits the option; omitting a role variable or an
    # instance's key gives the role's value, so the role says "set it to null" (the tensor parallel size: omit it
    # for one worker per NPU).
    fix = TP_ROLE_FIX if role_option == 'tensor_parallel_size' else _vllm.UNSET_ROLE
    expected = '%s: %s' % (where, message.replace(module_option, role_option, 1).replace(_vllm.UNSET, fix))
    errors = plan_errors(instance, **settings)
    assert expected in errors, (rule, errors)
    assert 'sekret' not in message and 'sekret' not in ' '.join(errors)


def test_the_tensor_parallel_message_names_what_the_instances_scenario_looks_for():
    """molecule/instances/tests/test_site.py (test_collisions_fail_before_anything_starts) looks for these parts in
    site.yml's output: the host and instance, the variable and value, the NPUs and the fix."""
    s = dict(GUIDE, serve_flags=dict(GUIDE['serve_flags']))
    errors = vllm_plan.plan_instances([{'devices': [0, 1], 'port': 8002, 'tensor_parallel_size': 4}], s,
                                      'node1')['errors']
    assert len(errors) == 1, errors
    assert_names(errors[0], 'node1: instance vllm-8002', 'tensor_parallel_size 4', '2 NPU(s) [0, 1]',
                 'give as many NPUs')


BOUNDED = [f for f in _vllm.SERVE_FLAGS if not f.own and (f.low is not None or f.above is not None)]


@pytest.mark.parametrize('flag', BOUNDED, ids=[f.name for f in BOUNDED])
@pytest.mark.parametrize('level', ['instance', 'role'])
def test_every_flag_of_the_table_has_one_rule_for_role_and_module(manager, capsys, flag, level):
    """Each bounded flag of the table, just out of range, as an instance's override and as the role's variable."""
    bad = (flag.low - 1) if flag.low is not None else flag.above
    message = module_message(capsys, serve_flags={flag.name: bad})
    module_option = 'serve_flags.' + flag.name
    if level == 'instance':
        errors = plan_errors({flag.name: bad})
        expected = 'node1: instance a: ' + message.replace(module_option, flag.name, 1)
    else:
        errors = plan_errors(serve_flags={'vllm_instance_' + flag.name: bad})
        expected = 'node1: ' + message.replace(module_option, 'vllm_instance_' + flag.name, 1)
    expected = expected.replace(_vllm.UNSET, _vllm.UNSET_ROLE)
    assert expected in errors, errors
    assert len(errors) == 1, errors  # a role variable is checked once per host, not once per instance


def test_a_flag_of_an_instance_overrides_the_roles_and_unset_leaves_vllms_default():
    s = dict(GUIDE)
    instances = [dict(INSTANCE, max_model_len='1024'), dict(INSTANCE, name='b', port=8003, devices=[4, 5, 6, 7])]
    settings = dict(s, serve_flags=dict(s['serve_flags'], vllm_instance_dtype=None))
    plan = vllm_plan.plan_instances(instances, settings, 'node1')
    assert plan['errors'] == []
    first, second = plan['instances']
    assert first['serve_flags']['max_model_len'] == 1024  # a templated value comes as text
    assert second['serve_flags']['max_model_len'] == 25600
    assert 'dtype' not in first['serve_flags']
    argv = _vllm.build_argv('vllm', dict(first, model=first['model']))
    assert '--dtype' not in argv and argv[argv.index('--max-model-len') + 1] == '1024'


# --- a flag end to end: --max-num-seqs ------------------------------------------------------------------------------

def standin_serve_parser():
    """The vllm serve parser of the mock nodes' SIMULATED vLLM stand-in (tests/mock/vllm), as the nodes run it."""
    root = Path(__file__).resolve().parents[3] / 'mock' / 'vllm'
    sys.path.insert(0, str(root))
    try:
        from vllm_standin.cli import build_serve_parser
    finally:
        sys.path.pop(0)
    return build_serve_parser()


def test_max_num_seqs_is_off_by_default_and_reaches_the_command_line_when_set(manager, capsys):
    unset = dict(GUIDE, serve_flags=dict(GUIDE['serve_flags'], vllm_instance_max_num_seqs=None))
    default = vllm_plan.plan_instances([INSTANCE], unset, 'node1')['instances'][0]
    assert 'max_num_seqs' not in default['serve_flags']  # the guide does not set it: vLLM's default, same argv
    settings = dict(GUIDE, serve_flags=dict(GUIDE['serve_flags'], vllm_instance_max_num_seqs='128'))
    first, second = vllm_plan.plan_instances([INSTANCE, dict(INSTANCE, name='b', port=8003, devices=[4, 5, 6, 7],
                                                             max_num_seqs=64)], settings, 'node1')['instances']
    assert first['serve_flags']['max_num_seqs'] == 128 and second['serve_flags']['max_num_seqs'] == 64
    res = svc.vllm(capsys, name='a', wait=False, serve_flags=first['serve_flags'])
    argv = res['argv']
    assert argv[argv.index('--max-num-seqs') + 1] == '128', argv
    assert argv.index('--max-num-seqs') > argv.index('--gpu-memory-utilization')  # last: older argv unchanged
    assert standin_serve_parser().parse_args(argv[2:]).max_num_seqs == 128  # the stand-in reads it as vLLM does


@pytest.mark.parametrize('instances, state', [
    ([], 'started'),  # teardown.yml, prune.yml: no instance listed
    ([INSTANCE], 'stopped'),  # the role's state stopped
    ([dict(INSTANCE, state='stopped')], 'started'),  # the only instance is stopped
])
def test_a_flags_role_variable_is_not_checked_when_no_instance_starts(instances, state):
    """An inventory with a bad flag value (vllm_instance_max_model_len: 0) can still be torn down or stopped."""
    settings = dict(GUIDE, state=state, serve_flags=dict(GUIDE['serve_flags'], vllm_instance_max_model_len=0))
    plan = vllm_plan.plan_instances(instances, settings, 'node1')
    assert plan['errors'] == []
    started = vllm_plan.plan_instances([INSTANCE], dict(settings, state='started'), 'node1')['errors']
    assert len(started) == 1
    assert_names(started[0], 'node1: ', 'vllm_instance_max_model_len')


@pytest.mark.parametrize('level', ['instance', 'role'])
def test_the_role_says_set_it_to_null_and_the_module_says_omit_it(manager, capsys, level):
    """Omitting a role variable gives the role's default, not vLLM's: the role's fix is null."""
    if level == 'instance':
        errors = plan_errors({'max_model_len': 0})
    else:
        errors = plan_errors(serve_flags={'vllm_instance_max_model_len': 0})
    assert len(errors) == 1, errors
    assert_names(errors[0], 'max_model_len=0', 'set it to null')
    assert 'omit it' not in errors[0]
    assert_names(module_message(capsys, serve_flags={'max_model_len': 0}), 'serve_flags.max_model_len=0', 'omit it')


def test_a_key_in_the_environment_is_an_error_and_never_enters_the_plan():
    s = dict(GUIDE, serve_flags=dict(GUIDE['serve_flags']))
    plan = vllm_plan.plan_instances([dict(INSTANCE, environment={'VLLM_API_KEY': 'sekret', 'A': '1'})], s, 'node1')
    assert len(plan['errors']) == 1
    assert_names(plan['errors'][0], 'node1: instance a', 'vllm_instance_api_key', 'VLLM_API_KEY')
    assert 'sekret' not in repr(plan)
    assert plan['instances'][0]['env']['A'] == '1'


@pytest.mark.parametrize('key', ['dtype', 'max_model_len', 'vllm_instance_max_num_seqs'])
def test_a_flag_among_the_settings_is_an_error_not_ignored(key):
    """The settings' layout before the table (dtype, max_model_len, ... at the top level) fails naming the key and
    where it goes, instead of being ignored."""
    settings = dict(GUIDE, serve_flags=dict(GUIDE['serve_flags']))
    settings[key] = '1'
    errors = vllm_plan.plan_instances([INSTANCE], settings, 'node1')['errors']
    assert len(errors) == 1, errors
    variable = 'vllm_instance_' + key.replace('vllm_instance_', '')
    assert_names(errors[0], 'node1: ', key, 'settings.serve_flags', variable)


def test_the_router_and_prometheus_refuse_a_loopback_instance_with_the_same_rule():
    """An instance bound to loopback only: the router plan and the monitoring plan both refuse it with
    vllm_plan.loopback_only, naming the host, the instance, the address and the listen-address variables."""
    from ansible_collections.ascend.kvpool.plugins.plugin_utils import monitoring, router_plan

    hostvars = {'node1': {'ansible_host': '10.0.0.1', 'inventory_hostname': 'node1',
                          'vllm_instance_plan': {'instances': [
                              dict(vllm_plan.instance_where('127.0.0.1', 8002, '10.0.0.1'), name='a', port=8002)]}}}
    with pytest.raises(router_plan.RouterPlanError) as err:
        router_plan.router_workers(['node1'], hostvars)
    settings = {'defaults': {'node_group': 'npu_nodes', 'master_group': 'mooncake_master',
                             'router_group': 'kvpool_router', 'master_metrics_port': 9003,
                             'router_prometheus_port': 29000}, 'monitoring_host': 'prometheus1'}
    groups = {'npu_nodes': ['node1'], 'mooncake_master': ['node1']}
    errors = monitoring.monitoring_targets(settings, hostvars, groups)['errors']
    for message, reader in ((str(err.value), 'the router'), (errors[0], 'Prometheus')):
        assert_names(message, 'node1: instance a', '127.0.0.1 only', reader, 'vllm_instance_listen_host',
                     'listen_host', 'site.yml --tags instances')
    assert str(err.value).replace('the router', 'Prometheus').startswith('kvpool_router: ' + errors[0])
