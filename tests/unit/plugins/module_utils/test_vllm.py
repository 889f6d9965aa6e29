# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Pure helpers of the vLLM instances: what each vllm-ascend release reads, argv, fingerprints, collisions, plans."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json

import pytest

from ansible_collections.ascend.kvpool.plugins.module_utils import _shared, _vllm
from ansible_collections.ascend.kvpool.plugins.plugin_utils import vllm_plan
from ansible_collections.ascend.kvpool.tests.unit.messages import assert_names
from ansible_collections.ascend.kvpool.tests.unit.plugins.module_utils.vllm_guide import plan


# --- versions ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize('text, parsed', [
    ('v0.22.1rc1', (0, 22, 1, 'rc1')),
    ('0.22.1rc1', (0, 22, 1, 'rc1')),
    ('v0.11.0', (0, 11, 0, '')),
    ('0.13', (0, 13, 0, '')),
    (' v0.25.0.post1 ', (0, 25, 0, '.post1')),
    ('latest', None),
    ('', None),
    (None, None),
])
def test_parse_version(text, parsed):
    assert vllm_plan.parse_version(text) == parsed


@pytest.mark.parametrize('version, connector, port_key, register_buffer, buffer_pool, deprecated', [
    ('v0.11.0', 'MooncakeConnectorStoreV1', 'mooncake_rpc_port', True, True, False),
    ('v0.11.0rc3', 'MooncakeConnectorStoreV1', 'mooncake_rpc_port', True, True, False),
    ('v0.12.0rc1', 'AscendStoreConnector', 'lookup_rpc_port', False, True, False),
    ('v0.13.0', 'AscendStoreConnector', 'lookup_rpc_port', False, True, True),
    ('v0.22.1rc1', 'AscendStoreConnector', 'lookup_rpc_port', False, True, True),
    ('v0.23.0', 'AscendStoreConnector', 'lookup_rpc_port', False, False, True),
    ('v0.25.0', 'AscendStoreConnector', 'lookup_rpc_port', False, False, True),
])
def test_what_each_release_reads(version, connector, port_key, register_buffer, buffer_pool, deprecated):
    prof = vllm_plan.version_profile(version)
    assert prof['connector'] == connector
    assert prof['rpc_port_key'] == port_key
    assert prof['reads_register_buffer'] is register_buffer
    assert (prof['default_buffer_pool'] == '4:8') is buffer_pool
    assert prof['old_connector_deprecated'] is deprecated


def test_transfer_variable_per_npu_generation():
    assert vllm_plan.version_profile('v0.23.0', 'a2')['transfer_env'] == {'HCCL_INTRA_ROCE_ENABLE': '1'}
    assert vllm_plan.version_profile('v0.23.0', 'a3')['transfer_env'] == {'ASCEND_ENABLE_USE_FABRIC_MEM': '1'}
    assert vllm_plan.version_profile('v0.22.1rc1', 'a2')['transfer_env'] == {}
    # vllm-ascend reads ASCEND_ENABLE_USE_FABRIC_MEM from v0.22.1rc1 (mooncake_backend.py:70), "Recommended" on A3.
    assert vllm_plan.version_profile('v0.22.1rc1', 'a3')['transfer_env'] == {'ASCEND_ENABLE_USE_FABRIC_MEM': '1'}
    assert vllm_plan.version_profile('v0.22.1rc1', 'a3')['default_buffer_pool'] is None


def test_unparsable_version_raises():
    with pytest.raises(ValueError, match='not a vllm-ascend version'):
        vllm_plan.version_profile('main')


# --- kv-transfer-config ----------------------------------------------------------------------------------------

def test_guide_settings_on_the_guide_release():
    prof = vllm_plan.version_profile('v0.22.1rc1')
    cfg, warnings, errors = vllm_plan.render_kv_transfer_config(
        prof, 0, extra_config={'use_layerwise': False, 'load_async': True})
    assert cfg == {'kv_connector': 'AscendStoreConnector', 'kv_role': 'kv_both',
                   'kv_connector_extra_config': {'use_layerwise': False, 'load_async': True, 'lookup_rpc_port': 0}}
    assert warnings == [] and errors == []


def test_v011_renders_the_guide_verbatim():
    prof = vllm_plan.version_profile('v0.11.0')
    cfg, warnings, errors = vllm_plan.render_kv_transfer_config(
        prof, 0, extra_config={'use_layerwise': False, 'load_async': True})
    assert cfg['kv_connector'] == 'MooncakeConnectorStoreV1'
    assert cfg['kv_connector_extra_config'] == {'use_layerwise': False, 'load_async': True, 'mooncake_rpc_port': 0,
                                                'register_buffer': True}
    assert warnings == [] and errors == []


@pytest.mark.parametrize('where', ['variable', 'extra_config'])
def test_register_buffer_is_warned_and_left_out_where_ignored(where):
    prof = vllm_plan.version_profile('v0.22.1rc1')
    kwargs = {'register_buffer': True} if where == 'variable' else {'extra_config': {'register_buffer': True}}
    cfg, warnings, errors = vllm_plan.render_kv_transfer_config(prof, 0, where='node1', **kwargs)
    assert 'register_buffer' not in cfg['kv_connector_extra_config']
    assert len(warnings) == 1 and warnings[0].startswith('node1: register_buffer: true')
    assert_names(warnings[0], 'ignored by vllm-ascend', 'v0.22.1rc1')
    assert not errors


def test_register_buffer_false_is_kept_on_v011():
    cfg, warnings, errors = vllm_plan.render_kv_transfer_config(vllm_plan.version_profile('v0.11.0'), 3,
                                                                register_buffer=False)
    assert cfg['kv_connector_extra_config'] == {'register_buffer': False, 'mooncake_rpc_port': 3}


def test_old_connector_name_is_deprecated_from_v013():
    cfg, warnings, errors = vllm_plan.render_kv_transfer_config(vllm_plan.version_profile('v0.13.0'), 0,
                                                                connector='MooncakeConnectorStoreV1')
    assert cfg['kv_connector'] == 'MooncakeConnectorStoreV1'
    assert len(warnings) == 1 and not errors
    assert_names(warnings[0], 'deprecated', 'vllm-ascend v0.13.0')
    cfg, warnings, errors = vllm_plan.render_kv_transfer_config(vllm_plan.version_profile('v0.12.0'), 0,
                                                                connector='MooncakeConnectorStoreV1')
    assert warnings == [] and errors == []


def test_new_connector_name_is_unknown_to_v011():
    cfg, warnings, errors = vllm_plan.render_kv_transfer_config(vllm_plan.version_profile('v0.11.0'), 0,
                                                                connector='AscendStoreConnector')
    assert len(errors) == 1
    assert_names(errors[0], 'unknown to vllm-ascend', 'v0.11.0')


@pytest.mark.parametrize('key', ['lookup_rpc_port', 'mooncake_rpc_port'])
def test_port_keys_belong_to_the_instance(key):
    cfg, warnings, errors = vllm_plan.render_kv_transfer_config(vllm_plan.version_profile('v0.22.1rc1'), 5,
                                                                extra_config={key: '0'})
    assert cfg['kv_connector_extra_config'] == {'lookup_rpc_port': 5}
    assert len(errors) == 1 and 'unique per instance' in errors[0] and key in errors[0]


def test_backend_role_and_layerwise_checks():
    prof = vllm_plan.version_profile('v0.22.1rc1')
    assert vllm_plan.render_kv_transfer_config(prof, 0, extra_config={'backend': 'memcache'})[2] == []
    assert 'backend' in vllm_plan.render_kv_transfer_config(prof, 0, extra_config={'backend': 'redis'})[2][0]
    assert 'kv_role' in vllm_plan.render_kv_transfer_config(prof, 0, kv_role='both')[2][0]
    warn = vllm_plan.render_kv_transfer_config(prof, 0, extra_config={'use_layerwise': True, 'load_async': True})[1]
    assert len(warn) == 1
    assert_names(warn[0], 'vllm_instance', 'load_async is ignored', 'use_layerwise is on')


def test_top_level_extras_and_clashes():
    prof = vllm_plan.version_profile('v0.22.1rc1')
    top = {'kv_load_failure_policy': 'recompute'}
    cfg, warnings, errors = vllm_plan.render_kv_transfer_config(prof, 0, top_level=top)
    assert cfg['kv_load_failure_policy'] == 'recompute' and not errors
    cfg, warnings, errors = vllm_plan.render_kv_transfer_config(prof, 0, top_level={'kv_role': 'kv_producer'})
    assert cfg['kv_role'] == 'kv_both' and 'clashes' in errors[0]


# --- environment -------------------------------------------------------------------------------------------------

def test_guide_environment_on_the_guide_release():
    env, warnings, errors = vllm_plan.render_env(vllm_plan.version_profile('v0.22.1rc1'), [0, 1, 2, 3],
                                                 '/etc/ascend-kvpool/mooncake.json', '0', '90.90.100.188')
    assert env == {'MOONCAKE_CONFIG_PATH': '/etc/ascend-kvpool/mooncake.json', 'PYTHONHASHSEED': '0',
                   'VLLM_HOST_IP': '90.90.100.188', 'ASCEND_RT_VISIBLE_DEVICES': '0,1,2,3',
                   'ASCEND_BUFFER_POOL': '4:8'}
    assert warnings == [] and errors == []


def test_v023_passes_the_operators_buffer_pool_on_to_mooncake():
    prof = vllm_plan.version_profile('v0.23.0')
    env, warnings, errors = vllm_plan.render_env(prof, [0], '/m.json', 0)
    assert 'ASCEND_BUFFER_POOL' not in env and env['HCCL_INTRA_ROCE_ENABLE'] == '1' and not warnings
    env, warnings, errors = vllm_plan.render_env(prof, [0], '/m.json', 0, ascend_buffer_pool='8:16')
    assert env['ASCEND_BUFFER_POOL'] == '8:16' and env['HCCL_INTRA_ROCE_ENABLE'] == '1' and not warnings
    env, warnings, errors = vllm_plan.render_env(prof, [0], '/m.json', 0, extra_env={'ASCEND_BUFFER_POOL': '4:8'})
    assert env['ASCEND_BUFFER_POOL'] == '4:8' and not warnings


def test_user_buffer_pool_and_environment_where_read():
    prof = vllm_plan.version_profile('v0.22.1rc1')
    env, warnings, errors = vllm_plan.render_env(prof, [0], '/m.json', 0, ascend_buffer_pool='8:16',
                                                 extra_env={'ASCEND_CONNECT_TIMEOUT': 10000, 'PYTHONHASHSEED': 7})
    assert env['ASCEND_BUFFER_POOL'] == '8:16' and env['ASCEND_CONNECT_TIMEOUT'] == '10000'
    assert env['PYTHONHASHSEED'] == '7' and not warnings and not errors


@pytest.mark.parametrize('kwargs, needle', [
    ({'mooncake_config_path': ''}, 'MOONCAKE_CONFIG_PATH is empty'),
    ({'python_hash_seed': ''}, 'PYTHONHASHSEED is empty'),
    ({'extra_env': {'ASCEND_RT_VISIBLE_DEVICES': '0'}}, 'devices list'),
    ({'extra_env': {'BAD-NAME': 'x'}}, 'not valid'),
    ({'extra_env': {'VLLM_API_KEY': 'sekret'}}, 'vllm_instance_api_key'),
])
def test_environment_errors(kwargs, needle):
    args = dict(devices=[0], mooncake_config_path='/m.json', python_hash_seed='0')
    args.update(kwargs)
    env, warnings, errors = vllm_plan.render_env(vllm_plan.version_profile('v0.22.1rc1'), **args)
    assert len(errors) == 1 and needle in errors[0]
    assert 'VLLM_API_KEY' not in env and 'sekret' not in json.dumps([env, errors])


# --- argv, fingerprint, diff text ---------------------------------------------------------------------------------

def test_argv_is_the_guides_command_line():
    argv = _vllm.build_argv('vllm', dict(
        model='/models/Qwen2.5-72B-Instruct/', served_model_name='qwen', tensor_parallel_size=4, host='90.90.100.188',
        port=8002, serve_flags=dict(dtype='bfloat16', max_model_len=25600, max_num_batched_tokens=4096,
                                    gpu_memory_utilization=0.9),
        kv_transfer_config={'kv_role': 'kv_both', 'kv_connector': 'AscendStoreConnector'},
        extra_args=['--enforce-eager']))
    assert argv == ['vllm', 'serve', '/models/Qwen2.5-72B-Instruct/', '--served-model-name', 'qwen', '--dtype',
                    'bfloat16', '--max-model-len', '25600', '--tensor-parallel-size', '4', '--host', '90.90.100.188',
                    '--port', '8002', '--max-num-batched-tokens', '4096', '--gpu-memory-utilization', '0.9',
                    '--kv-transfer-config', '{"kv_connector":"AscendStoreConnector","kv_role":"kv_both"}',
                    '--enforce-eager']


def test_unset_parameters_keep_vllms_defaults():
    params = {'model': 'm', 'port': 8000, 'serve_flags': {'dtype': None}, 'host': ''}
    assert _vllm.build_argv('/usr/bin/vllm', params) == ['/usr/bin/vllm', 'serve', 'm', '--port', '8000']


@pytest.mark.parametrize('value, text', [(0.9, '0.9'), (1.0, '1'), (0.95, '0.95'), (4096, '4096'), (True, 'true')])
def test_format_number(value, text):
    assert _vllm.format_number(value) == text


def test_fingerprint_is_stable_and_sensitive():
    argv = ['vllm', 'serve', 'm', '--port', '8002']
    fp = _vllm.fingerprint(argv, {'A': '1', 'B': '2'}, {'LD_LIBRARY_PATH': ['/x']})
    assert fp == _vllm.fingerprint(list(argv), {'B': '2', 'A': '1'}, {'LD_LIBRARY_PATH': ['/x']})
    assert fp != _vllm.fingerprint(argv, {'A': '1', 'B': '3'}, {'LD_LIBRARY_PATH': ['/x']})
    assert fp != _vllm.fingerprint(argv + ['--enforce-eager'], {'A': '1', 'B': '2'}, {'LD_LIBRARY_PATH': ['/x']})
    assert fp != _vllm.fingerprint(argv, {'A': '1', 'B': '2'}, {'LD_LIBRARY_PATH': ['/y']})
    assert _vllm.kv_config_json({'b': 1, 'a': {'d': 1, 'c': 2}}) == '{"a":{"c":2,"d":1},"b":1}'


def test_settings_text_one_flag_per_line():
    text = _vllm.settings_text(['vllm', 'serve', 'm', '--port', '8002', '--enforce-eager', '--kv-transfer-config',
                                '{"b":1,"a":2}'], {'PYTHONHASHSEED': '0'}, {'LD_LIBRARY_PATH': ['/x', '/y']})
    assert text == ('vllm serve m\n  --port 8002\n  --enforce-eager\n  --kv-transfer-config {"a": 2, "b": 1}\n'
                    '  env PYTHONHASHSEED=0\n  env LD_LIBRARY_PATH=/x:/y:$LD_LIBRARY_PATH\n')
    assert _vllm.settings_text(None) == ''


# --- API key: only a salted digest is recorded and shown ----------------------------------------------------------

def test_api_key_digest_is_salted():
    digest = _vllm.api_key_digest('sekret', 'salt1')
    assert len(digest) == 64 and digest == _vllm.api_key_digest('sekret', 'salt1')
    assert digest != _vllm.api_key_digest('sekret', 'salt2') != _vllm.api_key_digest('other', 'salt1')
    assert digest != hashlib.sha256(b'sekret').hexdigest()  # not the plain hash of the key


def test_fingerprint_and_diff_text_carry_the_digest_not_the_key():
    argv = ['vllm', 'serve', 'm', '--port', '8002']
    plain = _vllm.fingerprint(argv, {'A': '1'})
    # Without a key the fingerprint is what it always was (no restart of keyless instances on upgrade).
    assert plain == hashlib.sha256(json.dumps({'argv': argv, 'env': {'A': '1'}, 'path_prepend': {}},
                                              sort_keys=True).encode()).hexdigest()
    one, two = _vllm.api_key_digest('key-1', 's'), _vllm.api_key_digest('key-2', 's')
    assert len(set([plain, _vllm.fingerprint(argv, {'A': '1'}, None, one),
                    _vllm.fingerprint(argv, {'A': '1'}, None, two)])) == 3
    text = _vllm.settings_text(argv, {'A': '1'}, None, one)
    assert '  env VLLM_API_KEY=<secret, salted sha256 %s...>\n' % one[:12] in text and 'key-1' not in text
    assert text != _vllm.settings_text(argv, {'A': '1'}, None, two)
    assert 'VLLM_API_KEY' not in _vllm.settings_text(argv, {'A': '1'})


@pytest.mark.parametrize('env, extra_args, found', [
    ({}, [], []),
    ({'VLLM_API_KEY': 'x'}, [], ['VLLM_API_KEY in the environment']),
    ({}, ['--api-key', 'x'], ['--api-key in the arguments']),
    ({}, ['--api-key=x'], ['--api-key in the arguments']),
    ({}, ['--api-keys-file', 'x'], []),
])
def test_forbidden_key_settings(env, extra_args, found):
    assert _vllm.forbidden_key_settings(env, extra_args) == found


@pytest.mark.parametrize('args, kept', [
    (['--seed', '0'], ['--seed', '0']),
    (['--api-key', 'k1', '--seed', '0'], ['--seed', '0']),
    (['--api-key', 'k1', 'k2'], []),
    (['--enforce-eager', '--api-key=k1'], ['--enforce-eager']),
])
def test_drop_api_key_args(args, kept):
    assert _vllm.drop_api_key_args(args) == (kept, kept != args)


def test_plan_refuses_a_key_in_the_environment_or_the_arguments_and_keeps_it_out():
    p = plan([{'devices': [0], 'port': 8002, 'environment': {'VLLM_API_KEY': 'sekret-1'},
               'extra_args': ['--api-key', 'sekret-2']}], extra_args=['--api-key=sekret-3', '--seed', '0'])
    assert len(p['errors']) == 2 and all('vllm_instance_api_key' in e for e in p['errors'])
    (inst,) = p['instances']
    assert inst['extra_args'] == ['--seed', '0'] and 'VLLM_API_KEY' not in inst['env']
    assert 'sekret' not in json.dumps(p)  # the plan is a fact: shown with -v


# --- health answers and process identity ---------------------------------------------------------------------

@pytest.mark.parametrize('body, ids', [
    ('{"object":"list","data":[{"id":"qwen","object":"model","owned_by":"vllm","root":"/models/q"}]}', ['qwen']),
    ('{"object":"list","data":[{"id":"a"},{"id":"b"}]}', ['a', 'b']),
    ('{"object":"list","data":[]}', []),
    ('{"detail":"Not Found"}', []),
    ('Internal Server Error', []),
    ('', []),
])
def test_parse_models(body, ids):
    assert _vllm.parse_models(body) == ids


@pytest.mark.parametrize('host, probe', [('0.0.0.0', '127.0.0.1'), (None, '127.0.0.1'), ('::', '127.0.0.1'),
                                         ('172.31.250.11', '172.31.250.11')])
def test_probe_host(host, probe):
    assert _vllm.probe_host(host) == probe


def test_format_host_port():
    assert _vllm.format_host_port('10.0.0.1', 8002) == '10.0.0.1:8002'
    assert _vllm.format_host_port('fe80::1', 8002) == '[fe80::1]:8002'
    assert _vllm.format_host_port is _shared.format_host_port  # one rule for every endpoint


def test_log_errors_finds_the_fatal_lines():
    log = ('INFO 11-29 17:00:01 api_server.py:1 vLLM API server version 0.22.1\n'
           'Traceback (most recent call last):\n  File "x.py", line 1\n'
           'ValueError: The environment variable \'MOONCAKE_CONFIG_PATH\' is not set.\n'
           'ERROR 11-29 17:00:02 core.py:1 EngineCore failed to start.\n')
    assert _vllm.log_errors(log) == ["ValueError: The environment variable 'MOONCAKE_CONFIG_PATH' is not set.",
                                     'ERROR 11-29 17:00:02 core.py:1 EngineCore failed to start.']
    assert _vllm.log_errors(None) == []


# --- plans and collisions ------------------------------------------------------------------------------------

def test_default_plan_is_the_guides_instance():
    p = plan()
    assert p['errors'] == [] and p['warnings'] == []
    (inst,) = p['instances']
    assert inst['name'] == 'vllm-8002' and inst['tensor_parallel_size'] == 4 and inst['lookup_rpc_port'] == 0
    assert inst['kv_transfer_config']['kv_connector'] == 'AscendStoreConnector'
    assert inst['env']['ASCEND_RT_VISIBLE_DEVICES'] == '0,1,2,3' and inst['env']['ASCEND_BUFFER_POOL'] == '4:8'
    assert inst['path_prepend'] == {'LD_LIBRARY_PATH': [vllm_plan.ASCEND_LD_LIBRARY_PATH]}
    assert p['devices'] == [0, 1, 2, 3] and p['ports'] == [8002] and p['total_tp'] == 4
    assert inst['devices_text'] == '0-3'


def test_two_instances_per_host_get_their_own_lookup_port():
    p = plan([{'devices': [0, 1, 2, 3], 'port': 8002}, {'devices': [4, 5, 6, 7], 'port': 8003}])
    assert p['errors'] == []
    assert [i['lookup_rpc_port'] for i in p['instances']] == [0, 1]
    assert [i['kv_transfer_config']['kv_connector_extra_config']['lookup_rpc_port'] for i in p['instances']] == [0, 1]
    assert p['devices'] == list(range(8)) and p['total_tp'] == 8


@pytest.mark.parametrize('instances, needle', [
    ([{'devices': [0, 1], 'port': 8002}, {'devices': [2, 3], 'port': 8002}], 'port 8002 is used by both'),
    ([{'devices': [0, 1], 'port': 8002}, {'devices': [1, 2], 'port': 8003}], 'NPU 1 is given to both'),
    ([{'devices': [0], 'port': 8002, 'lookup_rpc_port': 4}, {'devices': [1], 'port': 8003, 'lookup_rpc_port': 4}],
     'lookup_rpc_port 4 is used by both'),
    ([{'devices': [0], 'port': 8002, 'name': 'a'}, {'devices': [1], 'port': 8003, 'name': 'a'}], 'name a is used'),
    ([{'devices': [0, 1], 'port': 8002, 'tensor_parallel_size': 4}], 'tensor_parallel_size 4 does not match'),
    ([{'devices': [0, 0], 'port': 8002}], 'lists NPU 0 more than once'),
    ([{'devices': [16], 'port': 8002}], 'NPU ids are whole numbers 0-15'),
    ([{'devices': [], 'port': 8002}], 'must list the NPU ids'),
    ([{'devices': [0], 'port': 70000}], 'port=70000 is out of range 1-65535'),
    ([{'devices': [0], 'port': 8002, 'prot': 1}], 'unknown key(s) prot'),
    ([{'devices': [0], 'port': 8002, 'name': 'a b'}], 'name'),
    ([{'devices': [0], 'port': 8002, 'state': 'gone'}], 'state must be one of'),
    (['8002'], 'must be a dict'),
    ({'devices': [0]}, 'must be a list'),
])
def test_collisions_and_bad_instances_fail_before_anything_starts(instances, needle):
    errors = plan(instances)['errors']
    assert any(needle in e for e in errors), errors
    assert all(e.startswith('node1: ') for e in errors)


def test_reserved_ports_and_unparsable_version():
    errors = plan(reserved_ports={'8002': 'mooncake_master metrics'})['errors']
    assert len(errors) == 1
    assert_names(errors[0], 'node1: port 8002', 'instance vllm-8002', 'already used', 'mooncake_master metrics')
    errors = plan(version='main')['errors']
    assert len(errors) == 1 and 'vllm_instance_vllm_ascend_version' in errors[0]
    assert plan(npu_type='a4')['errors'][0].startswith('node1: vllm_instance_npu_type')


def test_role_level_ignored_setting_warns_once_per_host():
    two = [{'devices': [0, 1, 2, 3], 'port': 8002}, {'devices': [4, 5, 6, 7], 'port': 8003}]
    p = plan(two, register_buffer=True, ascend_buffer_pool='4:8', version='v0.23.0')
    assert len(p['warnings']) == 1, p['warnings']  # ASCEND_BUFFER_POOL is Mooncake's: passed on, not warned
    assert p['warnings'][0].startswith('node1: register_buffer: true')
    p = plan(register_buffer=True)
    assert len(p['warnings']) == 1, p['warnings']
    assert_names(p['warnings'][0], 'node1: instance vllm-8002', 'register_buffer: true',
                 'vllm_instance_register_buffer', 'v0.22.1rc1', 'not rendered')


def test_per_instance_overrides_merge():
    p = plan([{'devices': [0], 'port': 8002, 'served_model_name': 'small', 'environment': {'X': 1},
               'kv_connector_extra_config': {'backend': 'memcache'}, 'extra_args': ['--enforce-eager'],
               'listen_host': '0.0.0.0', 'state': 'stopped'}],
             environment={'Y': '2'}, extra_args=['--seed', '0'])
    (inst,) = p['instances']
    assert inst['served_model_name'] == 'small' and inst['host'] == '0.0.0.0' and inst['state'] == 'stopped'
    assert inst['env']['X'] == '1' and inst['env']['Y'] == '2'
    assert inst['kv_transfer_config']['kv_connector_extra_config'] == {
        'use_layerwise': False, 'load_async': True, 'backend': 'memcache', 'lookup_rpc_port': 0}
    assert inst['extra_args'] == ['--seed', '0', '--enforce-eager']
    # A stopped instance needs no NPU and no port.
    assert p['devices'] == [] and p['ports'] == [] and p['total_tp'] == 0


def test_old_release_plan_is_the_guide_verbatim():
    p = plan(version='v0.11.0')
    cfg = p['instances'][0]['kv_transfer_config']
    assert json.loads(_vllm.kv_config_json(cfg)) == {
        'kv_connector': 'MooncakeConnectorStoreV1', 'kv_role': 'kv_both',
        'kv_connector_extra_config': {'use_layerwise': False, 'mooncake_rpc_port': 0, 'load_async': True,
                                      'register_buffer': True}}
    assert_names(plan(version='v0.10.0')['warnings'][0], 'node1', 'vllm-ascend v0.10.0', 'older than v0.11')


def test_main_error_prefers_the_root_cause():
    log = ('ERROR 11-29 18:42:11 [core.py] EngineCore failed to start.\nTraceback (most recent call last):\n'
           "FileNotFoundError: [Errno 2] No such file or directory: '/etc/ascend-kvpool/mooncake.json'\n"
           'RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}\n')
    assert _vllm.main_error(log) == ("FileNotFoundError: [Errno 2] No such file or directory: "
                                     "'/etc/ascend-kvpool/mooncake.json' (RuntimeError: Engine core initialization "
                                     "failed. See root cause above. Failed core proc(s): {})")
    assert _vllm.main_error('ValueError: x\n') == 'ValueError: x'
    assert _vllm.main_error('all fine\n') is None
