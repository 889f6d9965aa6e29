# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The pre-flight checks of today's releases (docs/preflight.md): versions, glibc, hugepages, adxl_ports, hccl_roce,
timeouts, client_ttl, judged as pure functions over records built from real plans, for each release."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.ascend.kvpool.plugins.plugin_utils import vllm_plan
from ansible_collections.ascend.kvpool.plugins.plugin_utils.preflight import adxl_range, preflight_findings
from ansible_collections.ascend.kvpool.tests.unit.messages import assert_names
from ansible_collections.ascend.kvpool.tests.unit.plugins.module_utils.vllm_guide import GUIDE

GIB = 1024 ** 3
RELEASES = ['v0.22.1rc1', 'v0.23.0', 'v0.25.1rc1']
NEW = RELEASES[1:]
TOOLKIT_INFO = '/usr/local/Ascend/ascend-toolkit/latest/x86_64-linux/ascend_toolkit_install.info'
HEALTHY_ASCEND = {'install_info': {'path': '/etc/ascend_install.info', 'exists': True,
                                   'driver_path': '/usr/local/Ascend'},
                  'driver': {'path': '/usr/local/Ascend/driver/version.info', 'exists': True, 'version': '25.5.0'},
                  'toolkit': {'path': TOOLKIT_INFO, 'version': '9.1.0'}}
CHIPS_910B = {'driver_loaded': True, 'processes': [],
              'npus': [{'npu': i, 'name': '910B3', 'chip': 0, 'healthy': True} for i in range(8)]}


def real_plan(version, instances=None, **settings):
    s = dict(GUIDE, version=version)
    s.update(settings)
    return vllm_plan.plan_instances(instances or [{'devices': [0, 1, 2, 3], 'port': 8002}], s, 'node1')


def node(version='v0.23.0', host='node1', instances=None, ascend=None, glibc='2.36', hugepages=0, protocol='ascend',
         is_master=True, master=None, pool=None, container=False, npu=None, extra_ports=None, **settings):
    plan = real_plan(version, instances, **settings)
    facts = {'changed': False, 'epoch': 1.0, 'ports': {}, 'paths': {}, 'connect': {}, 'container': {},
             'memory': {'MemTotal': 1500 * GIB, 'HugePages_Total': hugepages, 'Hugepagesize': 2048 * 1024},
             'ascend': HEALTHY_ASCEND if ascend is None else ascend,
             'glibc': {'version': glibc, 'source': 'ldd', 'raw': 'ldd (GNU libc) %s' % glibc}}
    m = {'is_master': is_master, 'target': '', 'port': 50088, 'metrics_port': 9003, 'lease_ttl_ms': 0,
         'client_ttl_s': 0, 'mooncake_version': '0.3.13.post1' if version != 'v0.22.1rc1' else '0.3.9'}
    m.update(master or {})
    p = {'protocol': protocol, 'ssd_offload': False, 'hugepages': 'auto'}
    p.update(pool or {})
    return {'host': host, 'facts': facts, 'npu': CHIPS_910B if npu is None else npu,
            'plan': {'instances': plan['instances'], 'warnings': plan['warnings'], 'profile': plan['profile']},
            'memory': {'segment_bytes': 100 * GIB, 'local_buffer_bytes': GIB, 'reserve_bytes': 8 * GIB},
            'master': m, 'container': {'enabled': container, 'image': '', 'runtime': 'docker'},
            'pool': p, 'extra_ports': extra_ports or {}}


RELEASE_CHECKS = ['versions', 'glibc', 'hugepages', 'adxl_ports', 'hccl_roce', 'timeouts', 'client_ttl']


def judge(*records):
    return preflight_findings(list(records), {'checks': RELEASE_CHECKS})


def of(result, check):
    return [f for f in result['findings'] if f['check'] == check]


@pytest.mark.parametrize('version', RELEASES)
def test_a_healthy_node_of_each_release_passes(version):
    result = judge(node(version, hugepages=210000))
    assert result['findings'] == [], result['summary']


@pytest.mark.parametrize('version', NEW)
def test_hugepages_below_what_the_pool_needs(version):
    f = of(judge(node(version, hugepages=1000)), 'hugepages')
    assert len(f) == 1 and f[0]['severity'] == 'error' and f[0]['host'] == 'node1'
    assert_names(f[0]['finding'], '4 TP rank(s)', 'global_segment_size 100 GiB', '400.0 GiB')
    assert 'echo 204800 > /proc/sys/vm/nr_hugepages' in f[0]['fix']


def test_hugepages_only_where_vllm_ascend_reserves_them():
    assert of(judge(node('v0.22.1rc1')), 'hugepages') == []            # ASCEND_BUFFER_POOL era
    assert of(judge(node('v0.23.0', protocol='tcp')), 'hugepages') == []
    assert of(judge(node('v0.23.0', npu_type='a3')), 'hugepages') == []   # fabric memory
    assert of(judge(node('v0.23.0', pool={'hugepages': 0})), 'hugepages') == []
    f = of(judge(node('v0.22.1rc1', pool={'hugepages': 10 * GIB})), 'hugepages')   # explicit size: any release
    assert len(f) == 1
    assert_names(f[0]['finding'], 'preflight_hugepages', '10.0 GiB')


@pytest.mark.parametrize('version', RELEASES)
@pytest.mark.parametrize('what, kw, needle', [
    ('instance port', {'instances': [{'devices': [0, 1, 2, 3], 'port': 20050}]}, 'port of instance vllm-20050 20050'),
    ('kv_port', {'kv_transfer_extra': {'kv_port': '20002'}}, 'kv_port of instance vllm-8002 20002'),
    ('master rpc', {'master': {'port': 20088}}, 'Mooncake master RPC port (mooncake_master_port) 20088'),
    ('metrics', {'master': {'metrics_port': 20100}}, 'metrics port (mooncake_master_metrics_port) 20100'),
    ('router hook', {'extra_ports': {20001: 'vllm-router port'}}, 'vllm-router port 20001'),
])
def test_ports_inside_the_adxl_range(version, what, kw, needle):
    f = of(judge(node(version, hugepages=210000, **kw)), 'adxl_ports')
    assert len(f) == 1, (what, f)
    assert needle in f[0]['finding'] and '[20000, 20100]' in f[0]['finding'] and '#8938' in f[0]['finding']
    assert 'ASCEND_BASE_PORT' in f[0]['fix']


def test_ascend_base_port_moves_the_range_and_tcp_has_none():
    moved = node(kv_transfer_extra={'kv_port': '20002'}, environment={'ASCEND_BASE_PORT': '22000'}, hugepages=210000)
    assert of(judge(moved), 'adxl_ports') == []
    assert len(of(judge(node(environment={'ASCEND_BASE_PORT': '8000'}, hugepages=210000)), 'adxl_ports')) == 1
    assert of(judge(node(kv_transfer_extra={'kv_port': '20002'}, protocol='tcp')), 'adxl_ports') == []
    assert of(judge(node(master={'port': 20088}, is_master=False, hugepages=210000)), 'adxl_ports') == []
    assert adxl_range({}) == (20000, 20100) and adxl_range({'ASCEND_BASE_PORT': 'x'}) == (20000, 20100)


@pytest.mark.parametrize('version', NEW)
def test_hccl_intra_roce_missing_on_a2(version):
    f = of(judge(node(version, environment={'HCCL_INTRA_ROCE_ENABLE': '0'}, hugepages=210000)), 'hccl_roce')
    assert len(f) == 1 and "HCCL_INTRA_ROCE_ENABLE is '0'" in f[0]['finding'] and 'kv_pool.md' in f[0]['finding']
    assert '#3749' not in f[0]['finding']  # that report had HCCL_INTRA_ROCE_ENABLE=1 set
    # Declared A3 on 910B chips: the hardware says A2.
    f = of(judge(node(version, npu_type='a3')), 'hccl_roce')
    assert len(f) == 1 and '910B3' in f[0]['finding'] and 'unset' in f[0]['finding']
    assert 'vllm_instance_npu_type: a2' in f[0]['fix']


def test_hccl_roce_not_before_v023_nor_on_a3_nor_with_tcp():
    assert of(judge(node('v0.22.1rc1', environment={'HCCL_INTRA_ROCE_ENABLE': '0'})), 'hccl_roce') == []
    a3 = {'driver_loaded': True, 'npus': [{'npu': 0, 'name': 'Ascend910', 'chip': 0}], 'processes': []}
    assert of(judge(node('v0.23.0', npu_type='a3', npu=a3)), 'hccl_roce') == []
    assert of(judge(node('v0.23.0', npu_type='a3', protocol='tcp')), 'hccl_roce') == []


@pytest.mark.parametrize('version', NEW)
def test_glibc_for_the_npu_wheel(version):
    f = of(judge(node(version, glibc='2.31', hugepages=210000)), 'glibc')
    assert len(f) == 1 and f[0]['severity'] == 'error'
    assert 'glibc 2.31' in f[0]['finding'] and 'older than the 2.35' in f[0]['finding']
    unknown = node(version, hugepages=210000)
    unknown['facts']['glibc'] = {'version': None, 'source': 'confstr', 'raw': ''}
    assert [x['severity'] for x in of(judge(unknown), 'glibc')] == ['warning']
    assert of(judge(node(version, glibc='2.31', container=True, hugepages=210000)), 'glibc') == []


def test_glibc_is_not_needed_for_the_guides_source_build():
    assert of(judge(node('v0.22.1rc1', glibc='2.28')), 'glibc') == []


@pytest.mark.parametrize('version, driver, toolkit, expected', [
    ('v0.23.0', '24.1.rc2', '9.1.0', [('error', 'HDK driver 24.1.rc2')]),
    ('v0.25.1rc1', '25.5.0', '8.5.0', [('error', 'CANN toolkit 8.5.0')]),
    ('v0.22.1rc1', '24.1.rc2', '8.5.0', [('error', 'CANN toolkit 8.5.0')]),   # no HDK floor published for v0.22
    ('v0.22.1rc1', '23.0.0', '9.0.0', []),
    ('v0.23.0', None, '9.1.0',
     [('warning', 'HDK driver version unknown: /usr/local/Ascend/driver/version.info not found')]),
    ('v0.23.0', '25.5.0', None,
     [('warning', 'CANN toolkit version unknown: ascend_toolkit_install.info under /usr/local/Ascend not found')]),
])
def test_cann_and_driver_against_the_release(version, driver, toolkit, expected):
    ascend = {'install_info': HEALTHY_ASCEND['install_info'],
              'driver': dict(HEALTHY_ASCEND['driver'], version=driver, exists=driver is not None),
              'toolkit': dict(HEALTHY_ASCEND['toolkit'], version=toolkit, path=None if toolkit is None else 'x')}
    got = [(f['severity'], f['finding']) for f in of(judge(node(version, ascend=ascend, hugepages=210000)), 'versions')]
    assert len(got) == len(expected), got
    for (sev, text), (want_sev, needle) in zip(got, expected):
        assert sev == want_sev and needle in text


def test_a_version_record_that_is_not_a_regular_file_is_named_in_the_finding():
    """preflight_facts names a FIFO or device at a record's path in its error (never opened): the finding says so."""
    path = '/x/ascend_toolkit_install.info'
    error = ('%s is not a regular file (a FIFO, socket or device node): not read, so nothing can hang; replace it '
             'with the file itself' % path)
    ascend = dict(HEALTHY_ASCEND, toolkit={'path': path, 'version': None, 'error': error})
    found = of(judge(node('v0.23.0', ascend=ascend, hugepages=210000)), 'versions')
    assert len(found) == 1 and found[0]['severity'] == 'warning'
    assert_names(found[0]['finding'], 'CANN toolkit version unknown', path, 'not a regular file')


def test_versions_in_a_container_skip_the_hosts_toolkit_and_check_the_declared_mooncake():
    ascend = dict(HEALTHY_ASCEND, toolkit={'path': None, 'version': None})
    assert of(judge(node('v0.23.0', ascend=ascend, container=True, hugepages=210000)), 'versions') == []
    f = of(judge(node('v0.23.0', master={'mooncake_version': '0.3.9'}, hugepages=210000)), 'versions')
    assert len(f) == 1
    assert_names(f[0]['finding'], 'Mooncake 0.3.9', 'mooncake_master_mooncake_version', 'below 0.3.11.post1')


@pytest.mark.parametrize('version', RELEASES)
def test_transfer_timeout_below_the_rdma_retry_budget(version):
    env = {'ASCEND_TRANSFER_TIMEOUT': '3000', 'HCCL_RDMA_TIMEOUT': '17', 'HCCL_RDMA_RETRY_CNT': '7'}
    f = of(judge(node(version, environment=env, hugepages=210000, master={'lease_ttl_ms': 11000})), 'timeouts')
    assert len(f) == 1
    assert_names(f[0]['finding'], '2^17 (HCCL_RDMA_TIMEOUT)', '7 (HCCL_RDMA_RETRY_CNT)', '= 3758 ms')
    env['ASCEND_TRANSFER_TIMEOUT'] = '5000'
    assert of(judge(node(version, environment=env, hugepages=210000, master={'lease_ttl_ms': 11000})), 'timeouts') == []


@pytest.mark.parametrize('version, mooncake, lease, env, needle', [
    ('v0.23.0', '0.3.13.post1', 0, {'ASCEND_TRANSFER_TIMEOUT': '10000'},
     'default_kv_lease_ttl 10000 ms (the default of Mooncake 0.3.13.post1) is not above ASCEND_TRANSFER_TIMEOUT 10000'),
    ('v0.22.1rc1', '0.3.9', 0, {'ASCEND_CONNECT_TIMEOUT': '6000'},
     'default_kv_lease_ttl 5000 ms (the default of Mooncake 0.3.9) is not above ASCEND_CONNECT_TIMEOUT 6000'),
    ('v0.25.1rc1', '0.3.13.post1', 2000, {},
     'default_kv_lease_ttl 2000 ms (mooncake_master_default_kv_lease_ttl) is not above ASCEND_TRANSFER_TIMEOUT 3000 ms '
     '(default)'),
])
def test_lease_below_the_ascend_timeouts(version, mooncake, lease, env, needle):
    f = of(judge(node(version, environment=env, hugepages=210000,
                      master={'lease_ttl_ms': lease, 'mooncake_version': mooncake})), 'timeouts')
    assert len(f) == 1 and needle in f[0]['finding'] and 'LEASE_EXPIRED, -707' in f[0]['finding']
    assert 'mooncake_master_default_kv_lease_ttl' in f[0]['fix']


def test_bad_timeout_values_are_named():
    f = of(judge(node(environment={'ASCEND_TRANSFER_TIMEOUT': '3s'}, hugepages=210000)), 'timeouts')
    assert len(f) == 1
    assert_names(f[0]['finding'], "ASCEND_TRANSFER_TIMEOUT='3s'", 'not a whole number')


@pytest.mark.parametrize('version', RELEASES)
def test_client_ttl_with_ssd_offload(version):
    master = node(version, hugepages=210000, pool={'ssd_offload': True})
    other = node(version, host='node2', is_master=False, hugepages=210000)
    f = of(judge(master, other), 'client_ttl')
    assert [(x['host'], x['severity']) for x in f] == [('node1', 'warning')]
    assert 'client_ttl is 10 s (default)' in f[0]['finding'] and 'mooncake_master_client_ttl: 120' in f[0]['fix']
    master['master']['client_ttl_s'] = 120
    assert of(judge(master, other), 'client_ttl') == []
    assert of(judge(node(version, hugepages=210000)), 'client_ttl') == []   # no SSD offload


# --- versions: the libraries the master's binary lacks (preflight_facts mooncake_libraries, on the master's hosts) ---
WHEEL_0_3_12 = {'binary': '/opt/venv/lib/python3.11/site-packages/mooncake/mooncake_master',
                'wrapper': '/opt/venv/bin/mooncake_master', 'missing': ['libcudart.so.12'],
                'raw': ['libcudart.so.12 => not found'], 'wheels': ['mooncake-transfer-engine-non-cuda 0.3.12.post1'],
                'error': ''}


def with_libraries(record, libraries):
    record['facts']['mooncake_libraries'] = libraries
    return record


@pytest.mark.parametrize('version', RELEASES)
def test_the_0_3_12_wheels_master_without_the_cuda_runtime_is_an_error(version):
    result = judge(with_libraries(node(version, hugepages=210000), dict(WHEEL_0_3_12)))
    f = of(result, 'versions')
    assert len(f) == 1 and f[0]['severity'] == 'error' and f[0]['host'] == 'node1' and not result['ok']
    finding, fix = f[0]['finding'], f[0]['fix']
    # What a user acts on: the binary, the library, what it is, the wheel that does it; and each way out.
    assert WHEEL_0_3_12['binary'] in finding and WHEEL_0_3_12['wrapper'] in finding
    assert 'libcudart.so.12' in finding and 'CUDA runtime' in finding and 'libcudart.so.12 => not found' in finding
    assert 'mooncake-transfer-engine-non-cuda 0.3.12.post1' in finding
    for way_out in ('0.3.13.post1', '0.3.11.post1', 'mooncake-transfer-engine-npu',
                    'pip install nvidia-cuda-runtime-cu12', 'nvidia/cuda_runtime/lib',
                    'mooncake_master_environment.LD_LIBRARY_PATH'):
        assert way_out in fix, way_out
    assert_names(result['summary'], 'ERROR node1 versions:', 'Fix: Install Mooncake', '0.3.13.post1')


def test_another_missing_library_gets_the_generic_fix():
    libs = dict(WHEEL_0_3_12, wrapper=None, binary='/usr/local/bin/mooncake_master', wheels=[],
                missing=['libibverbs.so.1', 'libcudart.so.12'],
                raw=['libibverbs.so.1 => not found', 'libcudart.so.12 => not found'])
    f = of(judge(with_libraries(node(hugepages=210000), libs)), 'versions')
    assert [x['severity'] for x in f] == ['error', 'error']
    verbs = [x for x in f if 'libibverbs.so.1' in x['finding']][0]
    assert '/usr/local/bin/mooncake_master' in verbs['finding'] and 'run by' not in verbs['finding']
    assert 'CUDA' not in verbs['finding'] and 'CUDA' not in verbs['fix']
    assert 'provides libibverbs.so.1' in verbs['fix'] and 'mooncake_master_environment.LD_LIBRARY_PATH' in verbs['fix']


def test_the_master_host_is_checked_without_instances_of_its_own():
    record = with_libraries(node(hugepages=210000), dict(WHEEL_0_3_12))
    record['plan']['instances'] = []
    assert [x['severity'] for x in of(judge(record), 'versions')] == ['error']
    assert of(preflight_findings([record], {'checks': ['glibc']}), 'versions') == []   # only with the check versions


@pytest.mark.parametrize('libraries', [
    None,                                                             # not read (not a master host, check off)
    {'binary': None, 'wrapper': None, 'missing': [], 'raw': [], 'wheels': [], 'error': ''},   # master not found
    dict(WHEEL_0_3_12, missing=[], raw=[]),                           # 0.3.13, or the runtime on LD_LIBRARY_PATH
])
def test_no_finding_without_a_missing_library(libraries):
    assert of(judge(with_libraries(node(hugepages=210000), libraries)), 'versions') == []


def test_a_console_script_that_leads_nowhere_is_a_warning():
    libs = {'binary': None, 'wrapper': '/opt/venv/bin/mooncake_master', 'missing': [], 'raw': [], 'wheels': [],
            'error': 'the console script /opt/venv/bin/mooncake_master (/opt/venv/bin/python3) does not lead to a '
                     'binary: No such file or directory'}
    f = of(judge(with_libraries(node(hugepages=210000), libs)), 'versions')
    assert [x['severity'] for x in f] == ['warning'] and libs['error'] in f[0]['finding']
    assert 'mooncake_master --help' in f[0]['fix']


@pytest.mark.parametrize('mooncake, npu_type, version, named', [
    ('0.3.12.post1', 'a2', 'v0.25.1rc1', True), ('0.3.12', 'a2', 'v0.25.1rc1', True),
    ('0.3.11.post1', 'a2', 'v0.25.1rc1', False), ('0.3.13.post1', 'a2', 'v0.25.1rc1', False),
    ('0.3.12.post1', 'a3', 'v0.25.1rc1', False), ('0.3.12.post1', 'a2', 'v0.23.0', False),
])
def test_mooncake_3749_is_named_for_its_combination_without_a_prescription(mooncake, npu_type, version, named):
    f = [x for x in of(judge(node(version, npu_type=npu_type, master={'mooncake_version': mooncake},
                                  hugepages=210000)), 'versions') if '#3749' in x['finding']]
    assert bool(f) is named, f
    if f:
        assert f[0]['severity'] == 'warning'
        assert_names(f[0]['finding'], mooncake, 'mooncake_master_mooncake_version', '0.3.12.post1', 'v0.25.0',
                     'ASCEND_BUFFER_POOL=0:0', 'reporter', 'prescribes no setting')
        assert_names(f[0]['fix'], 'same as unset', '0.3.11.post1', 'mooncake_master_mooncake_version')


def test_memory_counts_no_local_buffer_with_fabric_memory():
    # 1500 GiB: A2, TP 4 x (100 + 1) + 8 = 412 GiB; with 15 instances' worth of segment it only fits without buffers.
    small = {'segment_bytes': 100 * GIB, 'local_buffer_bytes': 10 * GIB, 'reserve_bytes': 8 * GIB}
    rec = node('v0.23.0', npu_type='a3', hugepages=210000)
    rec['facts']['memory']['MemTotal'] = 410 * GIB  # 4 x 100 + 8 = 408 fits; 4 x 110 + 8 = 448 would not
    rec['memory'] = small
    assert of(preflight_findings([rec], {'checks': ['memory']}), 'memory') == []
    rec = node('v0.23.0', npu_type='a2', hugepages=210000)
    rec['facts']['memory']['MemTotal'] = 410 * GIB
    rec['memory'] = small
    f = of(preflight_findings([rec], {'checks': ['memory']}), 'memory')
    assert len(f) == 1 and 'local_buffer_size 10 GiB' in f[0]['finding']
