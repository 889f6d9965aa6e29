# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What the collection renders for today's releases: vllm-ascend v0.22 (the guide), v0.23.0 and v0.25.x, and the
master flag spellings of Mooncake 0.3.9 against 0.3.12+ (docs/releases.md has the same table for operators)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest
from hypothesis import given, settings, strategies as st

from ansible_collections.ascend.kvpool.plugins.module_utils import _mooncake
from ansible_collections.ascend.kvpool.plugins.plugin_utils import vllm_plan
from ansible_collections.ascend.kvpool.tests.unit.messages import assert_names
from ansible_collections.ascend.kvpool.tests.unit.plugins.module_utils.vllm_guide import plan

SITE = vllm_plan.ASCEND_LD_LIBRARY_PATH

# release, ASCEND_BUFFER_POOL rendered, transfer variable on A2, LD_LIBRARY_PATH entries, CANN, HDK (A2),
# Mooncake floor, glibc, layerwise needs memcache
RELEASES = [
    ('v0.22.1rc1', '4:8', None, [SITE], '9.0.0', None, '0.3.9', None, False),
    ('v0.23.0', None, 'HCCL_INTRA_ROCE_ENABLE', [SITE + '/mooncake', SITE], '9.1.0', '25.5', '0.3.11.post1', '2.35',
     True),
    ('v0.25.1rc1', None, 'HCCL_INTRA_ROCE_ENABLE', [SITE + '/mooncake', SITE], '9.1.0', '25.5', '0.3.11.post1',
     '2.35', True),
]


def own_warnings(p):
    """The plan's warnings but the preview one of 0.24 / 0.25 (vllm-ascend #14757), which every plan of those has."""
    return [w for w in p['warnings'] if not (p['profile']['preview'] and w.endswith(p['profile']['preview']))]


@pytest.mark.parametrize('version, pool, transfer, ld, cann, hdk, mooncake, glibc, layerwise', RELEASES)
def test_each_release_renders_what_it_reads(version, pool, transfer, ld, cann, hdk, mooncake, glibc, layerwise):
    p = plan(version=version)
    # 0.25 is a preview (vllm-ascend #14757): its one warning; nothing else is warned for a release's own settings.
    assert p['errors'] == [] and p['warnings'] == ([] if version < 'v0.24' else ['node1: ' + p['profile']['preview']])
    inst = p['instances'][0]
    assert inst['kv_transfer_config']['kv_connector'] == 'AscendStoreConnector'
    assert 'lookup_rpc_port' in inst['kv_transfer_config']['kv_connector_extra_config']
    assert inst['env'].get('ASCEND_BUFFER_POOL') == pool
    if transfer:
        assert inst['env'][transfer] == '1'
    assert inst['path_prepend'] == {'LD_LIBRARY_PATH': ld}
    req = p['profile']['requirements']
    assert (req['cann'], req['hdk'], req['mooncake'], req['glibc']) == (cann, hdk, mooncake, glibc)
    assert p['profile']['layerwise_needs_memcache'] is layerwise
    assert 'kv_load_failure_policy' not in inst['kv_transfer_config']  # vLLM's default (fail) unless asked


@pytest.mark.parametrize('version', [r[0] for r in RELEASES])
@pytest.mark.parametrize('policy', ['recompute', 'fail'])
def test_kv_load_failure_policy_is_top_level(version, policy):
    config = plan(version=version, kv_load_failure_policy=policy)['instances'][0]['kv_transfer_config']
    assert config['kv_load_failure_policy'] == policy
    assert 'kv_load_failure_policy' not in config['kv_connector_extra_config']


def test_kv_load_failure_policy_is_checked():
    p = plan(kv_load_failure_policy='retry')
    assert_names('\n'.join(p['errors']), 'kv_load_failure_policy', 'recompute or fail')


@pytest.mark.parametrize('version, warned', [(r[0], r[8]) for r in RELEASES])
@pytest.mark.parametrize('backend', ['mooncake', 'memcache'])
def test_use_layerwise_needs_memcache_from_v023(version, warned, backend):
    p = plan(version=version, kv_connector_extra_config={'use_layerwise': True, 'backend': backend})
    layer = [w for w in p['warnings'] if 'use_layerwise' in w]
    assert bool(layer) == (warned and backend == 'mooncake'), p['warnings']
    if layer:
        assert 'memcache' in layer[0] and 'prefill' in layer[0]


@pytest.mark.parametrize('version', [r[0] for r in RELEASES])
@pytest.mark.parametrize('install, first', [('image', SITE), ('wheel', SITE + '/mooncake'),
                                            ('source', '/usr/local/lib')])
def test_ld_library_path_follows_the_mooncake_install(version, install, first):
    p = plan(version=version, mooncake_install=install, ld_library_path=['/opt/extra', first])
    ld = p['instances'][0]['path_prepend']['LD_LIBRARY_PATH']
    assert ld[0] == first and ld[-1] == '/opt/extra' and len(ld) == len(set(ld))


@pytest.mark.parametrize('version, ld', [
    ('v0.23.0', [SITE + '/mooncake', SITE]), ('v0.24.0rc1', [SITE + '/mooncake', SITE]),
    ('v0.25.1rc1', [SITE + '/mooncake', SITE]),
    ('v0.26.0rc1', [SITE + '/mooncake']),  # the tag's docs export <site-packages>/mooncake from v0.26.0rc
])
def test_wheel_keeps_the_tags_documented_path_after_its_own(version, ld):
    p = plan(version=version, ld_library_path=[SITE])
    assert p['instances'][0]['path_prepend']['LD_LIBRARY_PATH'] == (ld if SITE in ld else ld + [SITE])
    assert not [w for w in p['warnings'] if 'LD_LIBRARY_PATH' in w]


def test_bad_install_fails():
    p = plan(mooncake_install='pip', mooncake_site_packages='/usr/lib/python3/dist-packages/')
    assert_names('\n'.join(p['errors']), 'vllm_instance_mooncake_install', 'must be one of')


def test_site_packages_of_another_python():
    other = '/usr/local/python3.11/lib/python3.11/site-packages'
    p = plan(version='v0.25.1rc1', mooncake_site_packages=other + '/')
    assert p['instances'][0]['path_prepend']['LD_LIBRARY_PATH'] == [other + '/mooncake', other]


@pytest.mark.parametrize('version', ['v0.22.1rc1', 'v0.23.0', 'v0.25.1rc1'])
def test_a3_gets_fabric_memory_at_every_line_and_no_local_buffer(version):
    p = plan(version=version, npu_type='a3')
    inst = p['instances'][0]
    assert inst['env']['ASCEND_ENABLE_USE_FABRIC_MEM'] == '1'
    assert 'HCCL_INTRA_ROCE_ENABLE' not in inst['env'] and 'ASCEND_BUFFER_POOL' not in inst['env']
    assert inst['uses_local_buffer'] is False and p['local_buffer_tp'] == 0 and p['total_tp'] == 4
    assert own_warnings(p) == []


@pytest.mark.parametrize('version', [r[0] for r in RELEASES])
@pytest.mark.parametrize('how', ['variable', 'environment'])
def test_the_operators_ascend_buffer_pool_reaches_the_instance_on_every_release(version, how):
    settings = ({'ascend_buffer_pool': '0:0'} if how == 'variable'
                else {'environment': {'ASCEND_BUFFER_POOL': '0:0'}})
    p = plan(version=version, **settings)
    assert p['instances'][0]['env']['ASCEND_BUFFER_POOL'] == '0:0'
    assert p['errors'] == [] and own_warnings(p) == []  # Mooncake reads it: no "has no effect" warning
    assert not [w for w in p['warnings'] if 'no longer read' in w]


def test_v022_a3_with_the_operators_buffer_pool_is_the_documented_fallback_without_fabric_memory():
    # kv_pool.md v0.22.1rc1: ASCEND_BUFFER_POOL=4:8 when fabric memory's dependencies are not met; Mooncake v0.3.9
    # refuses both at once.
    env = plan(version='v0.22.1rc1', npu_type='a3', ascend_buffer_pool='4:8')['instances'][0]['env']
    assert env['ASCEND_BUFFER_POOL'] == '4:8' and 'ASCEND_ENABLE_USE_FABRIC_MEM' not in env
    # From v0.23 (Mooncake 0.3.11.post1 has no such refusal) both are passed on as set.
    env = plan(version='v0.23.0', npu_type='a3', ascend_buffer_pool='4:8')['instances'][0]['env']
    assert env['ASCEND_BUFFER_POOL'] == '4:8' and env['ASCEND_ENABLE_USE_FABRIC_MEM'] == '1'


def test_a2_counts_the_local_buffer():
    p = plan(version='v0.23.0')
    assert p['instances'][0]['uses_local_buffer'] is True and p['local_buffer_tp'] == 4


@pytest.mark.parametrize('text, floor, cmp', [
    ('9.1.0', '9.1.0', 0), ('9.1', '9.1.0', 0), ('9.1.0.rc1', '9.1.0', -1), ('9.1.0.alpha001', '9.1.0', -1),
    ('8.0.RC2', '9.1.0', -1), ('8.5.0', '9.0.0', -1), ('9.1.1', '9.1.0', 1),
    ('24.1.rc2', '25.5', -1), ('25.5.0', '25.5', 0), ('25.5.1', '25.5', 1), ('26.0.rc1', '25.5', 1),
    ('0.3.9', '0.3.11.post1', -1), ('0.3.11', '0.3.11.post1', -1), ('0.3.13.post1', '0.3.11.post1', 1),
    ('v0.3.9', '0.3.9', 0), ('2.31', '2.35', -1), ('2.36', '2.35', 1),
    ('', '9.1.0', None), ('V100R001C19', '1', None), (None, '1', None), ('9.1.0', 'latest', None),
])
def test_compare_versions(text, floor, cmp):
    assert vllm_plan.compare_versions(text, floor) == cmp


_VERSION = st.builds(lambda nums, suffix: '.'.join(str(n) for n in nums) + suffix,
                     st.lists(st.integers(0, 40), min_size=1, max_size=4),
                     st.sampled_from(['', '.rc1', '.RC2', 'rc3', '.post1', '.alpha001', '.b060']))


@settings(max_examples=200, deadline=None)
@given(_VERSION, _VERSION, _VERSION)
def test_compare_versions_is_an_order(a, b, c):
    ab, ba = vllm_plan.compare_versions(a, b), vllm_plan.compare_versions(b, a)
    assert ab is not None and ba is not None
    assert ab + ba == 0 and vllm_plan.compare_versions(a, a) == 0
    if ab <= 0 and vllm_plan.compare_versions(b, c) <= 0:
        assert vllm_plan.compare_versions(a, c) <= 0


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40))
def test_version_key_never_raises(text):
    assert vllm_plan.version_key(text) is None or isinstance(vllm_plan.version_key(text), tuple)


# --- mooncake_master flags by Mooncake version ---------------------------------------------------------------------
HA = dict(port=50088, rpc_address='10.0.0.5', metrics_port=9003, metrics_address=None,
          eviction_high_watermark_ratio=0.95, eviction_ratio=0.05, max_threads=32, client_ttl=None,
          default_kv_lease_ttl=None, enable_ha=True, etcd_endpoints=['e1:2379', 'e2:2379'],
          enable_http_metadata_server=False)


@pytest.mark.parametrize('version, expected', [
    ('', ['--port=50088', '--rpc_address=10.0.0.5', '--metrics_port=9003', '--eviction_high_watermark_ratio=0.95',
          '--eviction_ratio=0.05', '--rpc_thread_num=32', '--enable_ha=true', '--etcd_endpoints=e1:2379;e2:2379']),
    ('0.3.9', ['--port=50088', '--rpc_address=10.0.0.5', '--metrics_port=9003', '--eviction_high_watermark_ratio=0.95',
               '--eviction_ratio=0.05', '--rpc_thread_num=32', '--enable_ha=true',
               '--etcd_endpoints=e1:2379;e2:2379']),
    ('0.3.11.post1', ['--port=50088', '--rpc_address=10.0.0.5', '--metrics_port=9003',
                      '--eviction_high_watermark_ratio=0.95', '--eviction_ratio=0.05', '--rpc_thread_num=32',
                      '--enable_ha=true', '--etcd_endpoints=e1:2379;e2:2379']),
    ('0.3.12', ['--rpc_port=50088', '--rpc_address=10.0.0.5', '--metrics_port=9003',
                '--eviction_high_watermark_ratio=0.95', '--eviction_ratio=0.05', '--rpc_thread_num=32',
                '--enable_ha=true', '--ha_backend_type=etcd', '--ha_backend_connstring=e1:2379;e2:2379']),
    ('v0.3.13.post1', ['--rpc_port=50088', '--rpc_address=10.0.0.5', '--metrics_port=9003',
                       '--eviction_high_watermark_ratio=0.95', '--eviction_ratio=0.05', '--rpc_thread_num=32',
                       '--enable_ha=true', '--ha_backend_type=etcd', '--ha_backend_connstring=e1:2379;e2:2379']),
])
def test_master_flags_by_mooncake_version(version, expected):
    argv = _mooncake.build_master_argv('mooncake_master', _mooncake.master_settings(HA), None, version)
    assert argv[1:] == expected


def test_guide_master_keeps_its_argv_and_fingerprint():
    guide = dict(HA, rpc_address=None, max_threads=None, enable_ha=False, etcd_endpoints=[])
    settings_ = _mooncake.master_settings(guide)
    guide_argv = ['m', '--port=50088', '--metrics_port=9003', '--eviction_high_watermark_ratio=0.95',
                  '--eviction_ratio=0.05']
    assert _mooncake.build_master_argv('m', settings_, None, '0.3.9') == guide_argv
    assert _mooncake.build_master_argv('m', settings_) == guide_argv


@pytest.mark.parametrize('text', ['latest', '0.3', 'x0.3.9', '0.3.9-foo'])
def test_bad_mooncake_version_raises(text):
    if text == '0.3':
        assert _mooncake.parse_mooncake_version(text) == (0, 3, 0)
        return
    with pytest.raises(ValueError, match='not a Mooncake version'):
        _mooncake.parse_mooncake_version(text)


@pytest.mark.parametrize('flag', ['rpc_port', 'ha_backend_type', 'ha_backend_connstring', 'metrics_host'])
def test_an_older_master_rejecting_a_new_flag_names_the_fix(flag):
    hint = _mooncake.unknown_flag_hint("ERROR: unknown command line flag '%s'\n" % flag)
    assert 'mooncake_master_mooncake_version' in hint and '--%s' % flag in hint


def test_a_master_without_rpc_thread_num_names_the_thread_variable():
    # every release of the table has it, whatever the declared version: declaring one would not help
    hint = _mooncake.unknown_flag_hint("ERROR: unknown command line flag 'rpc_thread_num'\n")
    assert_names(hint, 'mooncake_master_max_threads', 'max_threads: 0', '0.3.9')


# What the real masters of PyPI's wheels know (tests/mooncake_matrix starts each with these flags).
@pytest.mark.parametrize('version, metrics_host', [
    ('0.3.9', False), ('0.3.11.post1', False), ('0.3.12.post1', False), ('0.3.13.post1', True), ('0.3.14', True),
])
def test_metrics_host_only_where_the_release_has_it_and_a_warning_otherwise(version, metrics_host):
    settings_ = _mooncake.master_settings(dict(HA, metrics_address='10.0.0.5'))
    argv = _mooncake.build_master_argv('m', settings_, None, version)
    assert ('--metrics_host=10.0.0.5' in argv) is metrics_host
    warnings = _mooncake.unsupported_settings(settings_, version)
    if metrics_host:
        assert warnings == []
    else:
        [(name, text)] = warnings
        assert name == 'metrics_address' and version in text and 'every address' in text and '0.3.13' in text
        assert 'mooncake_master_mooncake_version' in text


def test_undeclared_version_writes_metrics_host_as_asked_and_warns_nothing():
    settings_ = _mooncake.master_settings(dict(HA, metrics_address='10.0.0.5'))
    assert '--metrics_host=10.0.0.5' in _mooncake.build_master_argv('m', settings_)
    assert _mooncake.unsupported_settings(settings_) == []
    # unset address: nothing to honour
    assert _mooncake.unsupported_settings(_mooncake.master_settings(HA), '0.3.9') == []


@pytest.mark.parametrize('version', ['', '0.3.9', '0.3.11.post1', '0.3.12.post1', '0.3.13.post1'])
def test_thread_count_is_rpc_thread_num_on_every_release(version):
    # --max_threads is capped at the CPU count by every release (the real masters' startup line shows it)
    argv = _mooncake.build_master_argv('m', _mooncake.master_settings(HA), None, version)
    assert '--rpc_thread_num=32' in argv and not any(a.startswith('--max_threads') for a in argv)


def test_changed_defaults_are_recorded():
    assert dict((f, (old, new)) for f, old, new in _mooncake.CHANGED_DEFAULTS) == {
        'eviction_high_watermark_ratio': (0.95, 0.90), 'default_kv_lease_ttl': (5000, 10000)}


@pytest.mark.parametrize('value', ['0', '', 'true'])
def test_fabric_memory_other_than_1_is_refused_as_mooncake_and_vllm_ascend_disagree(value):
    p = plan(version='v0.23.0', npu_type='a3', environment={'ASCEND_ENABLE_USE_FABRIC_MEM': value})
    assert_names('\n'.join(p['errors']), 'node1', 'ASCEND_ENABLE_USE_FABRIC_MEM=%s' % value, 'client_service.cpp',
                 'mooncake_backend.py', 'vllm_instance_environment', 'vllm_instance_npu_type: a2')
    assert plan(version='v0.23.0', environment={'ASCEND_ENABLE_USE_FABRIC_MEM': '1'})['errors'] == []


@pytest.mark.parametrize('name, key', [('MOONCAKE_MASTER', 'master_server_address'),
                                       ('MOONCAKE_GLOBAL_SEGMENT_SIZE', 'global_segment_size')])
def test_mooncake_overrides_in_the_environment_are_warned(name, key):
    p = plan(version='v0.25.1rc1', environment={name: '10.0.0.9:50088'})
    assert p['errors'] == [] and p['instances'][0]['env'][name] == '10.0.0.9:50088'
    assert_names('\n'.join(p['warnings']), 'node1', name, key, 'mooncake.json', 'remove %s' % name)


@pytest.mark.parametrize('version', [r[0] for r in RELEASES])
def test_ha_instances_get_the_pools_cluster_id_and_others_none(version):
    # With HA masters the store clients look the leader up under mooncake-store/<MC_STORE_CLUSTER_ID>/master_view:
    # the role passes the pool's id (kvpool_cluster_id), "" without HA.
    ha = plan(version=version, mooncake_cluster_id='kvpool-0123456789')
    assert ha['errors'] == [] and own_warnings(ha) == []
    assert ha['instances'][0]['env']['MC_STORE_CLUSTER_ID'] == 'kvpool-0123456789'
    for single in (plan(version=version), plan(version=version, mooncake_cluster_id='')):
        assert single['errors'] == [] and 'MC_STORE_CLUSTER_ID' not in single['instances'][0]['env']


@pytest.mark.parametrize('where', ['role', 'instance'])
def test_another_cluster_id_in_the_environment_is_an_error_naming_the_instance_and_the_fix(where):
    theirs = {'MC_STORE_CLUSTER_ID': 'mooncake_cluster'}
    instances = [{'devices': [0, 1, 2, 3], 'port': 8002, 'name': 'prefill'}]
    if where == 'instance':
        instances[0]['environment'] = theirs
    p = plan(instances, mooncake_cluster_id='kvpool-0123456789', environment=theirs if where == 'role' else {})
    [error] = p['errors']
    assert_names(error, 'node1: instance prefill', 'MC_STORE_CLUSTER_ID=mooncake_cluster', 'kvpool-0123456789',
                 'mooncake-store/mooncake_cluster/master_view', 'vllm_instance_environment', 'set kvpool_cluster_id')
    # the pool's id is what the instance would have got, never the other value
    assert p['instances'][0]['env']['MC_STORE_CLUSTER_ID'] == 'kvpool-0123456789'


def test_the_pools_own_cluster_id_in_the_environment_is_fine():
    same = plan(mooncake_cluster_id='kvpool-0123456789', environment={'MC_STORE_CLUSTER_ID': 'kvpool-0123456789'})
    assert same['errors'] == [] and same['instances'][0]['env']['MC_STORE_CLUSTER_ID'] == 'kvpool-0123456789'
    # without HA masters the pool has no id and the store client reads none: the operator's value is passed on
    single = plan(environment={'MC_STORE_CLUSTER_ID': 'mine'})
    assert single['errors'] == [] and single['instances'][0]['env']['MC_STORE_CLUSTER_ID'] == 'mine'
