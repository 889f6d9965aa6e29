# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The pre-flight judgement (plugin_utils/preflight.py): node records in, the findings an operator reads out.

Records are shaped as roles/preflight/tasks/judge.yml builds them. The ``npu`` parts are real npu_smi_facts
results over the recorded npu-smi answers (fixtures of the module_utils tests); memory comes from the recorded
/proc/meminfo. The role registers both modules with ``failed_when: false``, which resets ``failed`` to false.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import io
import json
import os

import pytest
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.ascend.kvpool.plugins.filter import preflight as preflight_filter
from ansible_collections.ascend.kvpool.plugins.module_utils import _runner
from ansible_collections.ascend.kvpool.plugins.module_utils._preflight import parse_meminfo
from ansible_collections.ascend.kvpool.plugins.modules import npu_smi_facts
from ansible_collections.ascend.kvpool.plugins.plugin_utils.preflight import (
    CHECKS,
    host_path,
    master_reached,
    preflight_findings,
)
from ansible_collections.ascend.kvpool.tests.unit.plugins.module_utils.fixture_loader import FIXTURES_DIR, read_answer
from ansible_collections.ascend.kvpool.tests.unit.messages import assert_names

GIB = 1 << 30
SMI = '/usr/local/bin/npu-smi'
MODEL = '/root/.cache/Qwen2.5-72B-Instruct'
TARGET = '172.31.250.11:50088'
EPOCH = 1764441600.0
BIG_NODE = 1622512926720  # 1511.1 GiB, a 910B node
with io.open(os.path.join(FIXTURES_DIR, 'preflight', 'meminfo.txt'), encoding='utf-8') as _handle:
    SMALL_NODE = parse_meminfo(_handle.read())['MemTotal']  # 23.5 GiB, the recorded container


def vllm(port, serve_port=None, flag='--port'):
    port = serve_port or port
    return ['/usr/bin/python3', '/usr/local/bin/vllm', 'serve', MODEL, '--served-model-name', 'qwen'] + (
        ['--port', str(port)] if flag == '--port' else ['--port=%s' % port])


MASTER_CMD = ['/usr/local/bin/mooncake_master', '--port=50088', '--metrics_port=9003', '--rpc_address=0.0.0.0']
HTTP_SERVER = ['python3', '-m', 'http.server', '8002']


def held(cmdline, pid=4242, addresses=('0.0.0.0',)):
    return {'listening': True, 'address': addresses[0], 'addresses': list(addresses), 'pid': pid, 'cmdline': cmdline}


def instance(port=8002, devices=(0, 1, 2, 3), seed='0', model=MODEL, state='started', name=None):
    env = {'ASCEND_RT_VISIBLE_DEVICES': ','.join(str(d) for d in devices)}
    if seed is not None:
        env['PYTHONHASHSEED'] = seed
    return {'name': name or 'vllm-%d' % port, 'port': port, 'devices': list(devices),
            'tensor_parallel_size': len(devices), 'env': env, 'model': model, 'state': state}


def model_dir(size=145 * GIB, files=40, exists=True, config=True):
    return {'exists': exists, 'is_dir': exists, 'config': config and exists, 'size_bytes': size if exists else None,
            'files': files if exists else None}


def facts(ports=None, paths=None, connect=None, mem_total=BIG_NODE, offset=0.0, uncertainty=0.05, container=None,
          host='node'):
    """A preflight_facts result as the action plugin returns it."""
    return {'changed': False, 'hostname': host, 'memory': {'MemTotal': mem_total, 'MemAvailable': mem_total // 2},
            'epoch': EPOCH + offset, 'clock': {'offset_s': offset, 'uncertainty_s': uncertainty},
            'ports': ports or {}, 'paths': {MODEL: model_dir()} if paths is None else paths,
            'connect': {TARGET: {'ok': True, 'error': '', 'ms': 0.4}} if connect is None else connect,
            'container': container or {'runtime': '/usr/bin/docker', 'images': {}}}


def record(host, npu=None, instances=None, node_facts=None, is_master=False, warnings=(), container=None,
           segment=100 * GIB, buffer=GIB, reserve=8 * GIB):
    return {
        'host': host,
        'facts': node_facts if node_facts is not None else facts(host=host),
        'npu': npu,
        'plan': {'instances': [instance()] if instances is None else instances, 'warnings': list(warnings)},
        'memory': {'segment_bytes': segment, 'local_buffer_bytes': buffer, 'reserve_bytes': reserve},
        'master': {'is_master': is_master, 'target': TARGET, 'port': 50088, 'metrics_port': 9003},
        'container': container or {'enabled': False, 'image': '', 'runtime': 'docker'},
    }


def two_nodes(**node2):
    return [record('node1', is_master=True, node_facts=facts(host='node1', ports={'50088': held(MASTER_CMD)})),
            record('node2', **node2)]


@pytest.fixture
def npu_smi(monkeypatch, capsys):
    """npu_smi_facts's registered result for a recorded `npu-smi info` (None: npu-smi is not installed)."""

    def run(info='npu_smi_info_910b4_mixed.txt', listing='npu_smi_list_compact.txt', tool=SMI):
        def execute(argv, timeout=None):
            answer = read_answer(listing if argv[1:] == ['info', '-l'] else info)
            return answer['rc'], answer['stdout'], answer['stderr']

        monkeypatch.setattr(_runner, 'execute', execute)
        monkeypatch.setattr(basic.AnsibleModule, 'get_bin_path', lambda self, name, *a, **kw: tool)
        with patch_module_args({}):
            with pytest.raises(SystemExit):
                npu_smi_facts.main()
        result = json.loads(capsys.readouterr().out)
        if result.get('failed'):  # registered with failed_when: false
            result['failed'] = result['failed_when_result'] = False
        return result

    return run


def judge(records, **settings):
    result = preflight_findings(records, settings)
    json.dumps(result)
    assert result['errors'] == sum(1 for f in result['findings'] if f['severity'] == 'error')
    assert result['warnings'] == len(result['findings']) - result['errors']
    assert result['ok'] is (result['errors'] == 0)
    assert len(result['lines']) == len(result['findings'])
    for finding, line in zip(result['findings'], result['lines']):
        assert set(finding) == {'host', 'check', 'severity', 'finding', 'fix'}
        assert line.startswith('%s %s %s: ' % (finding['severity'].upper(), finding['host'], finding['check']))
        assert 'Fix: ' + finding['fix'] in line and line in result['summary']
    return result


def only(result, check=None):
    found = [f for f in result['findings'] if check is None or f['check'] == check]
    assert len(found) == 1, result['summary']
    return found[0]


def checks_of(result):
    return sorted(set(f['check'] for f in result['findings']))


# --- a clean deployment ----------------------------------------------------------------------------------------

def test_clean_two_node_deployment_has_no_finding(npu_smi):
    # The recorded 910B4 node runs other processes on NPUs 0, 1, 6, 7: instances on 2-5 are free.
    npu = npu_smi('npu_smi_info_910b4_mixed.txt')
    nodes = two_nodes(npu=npu, instances=[instance(devices=[2, 3, 4, 5])])
    nodes[0]['npu'] = copy.deepcopy(npu)
    nodes[0]['plan']['instances'] = [instance(devices=[2, 3, 4, 5])]
    result = judge(nodes)
    assert result['ok'] is True and result['findings'] == [] and result['lines'] == []
    assert_names(result['summary'], ': 2 node(s) checked', 'node1, node2', ': 0 error(s)', ', 0 warning(s)')


def test_filter_plugin_is_the_judgement():
    nodes = two_nodes()
    assert preflight_filter.FilterModule().filters()['preflight_findings'](nodes) == preflight_findings(nodes)


def test_no_records_no_findings():
    result = judge([])
    assert result['ok']
    assert_names(result['summary'], ': 0 node(s) checked', ': 0 error(s)', ', 0 warning(s)')
    assert judge([None, 'node1', {'facts': facts()}])['findings'] == []


# --- npu -------------------------------------------------------------------------------------------------------

def test_npu_smi_missing(npu_smi):
    result = judge([record('node2', npu=npu_smi(tool=None))])
    f = only(result)
    assert (f['host'], f['check'], f['severity']) == ('node2', 'npu', 'error')
    assert_names(f['finding'], 'npu-smi does not answer', 'not found')
    assert 'npu_smi_path' in f['fix'] and not result['ok']


def test_npu_smi_failing_without_failed_when_is_the_same_finding():
    npu = {'failed': True, 'msg': 'npu-smi info failed with rc 1: boom', 'driver_loaded': None}
    f = only(judge([record('node2', npu=npu)]))
    assert_names(f['finding'], 'npu-smi does not answer', 'npu-smi info', 'rc 1', 'boom')


def test_npu_driver_not_loaded_or_device_held(npu_smi):
    npu = npu_smi('npu_smi_device_in_use.txt')
    assert npu['driver_loaded'] is False
    f = only(judge([record('node1', npu=npu)]))
    assert f['host'] == 'node1' and f['check'] == 'npu'
    assert_names(f['finding'], 'in use by another process', 'ret is -8020')
    assert f['finding'].count('ret is -8020') == 1
    assert f['fix'].startswith('Load the NPU driver')


def test_npu_missing_on_the_node(npu_smi):
    npu = npu_smi('npu_smi_info_910b4_single.txt', listing='npu_smi_list_one_npu.txt')
    f = only(judge([record('node2', npu=npu, instances=[instance(devices=[0, 1])])]))
    assert_names(f['finding'], 'vllm-8002', 'needs NPU 1', 'NPUs [0]')
    assert 'vllm-8002' in f['fix'] and 'devices' in f['fix']


def test_unhealthy_npu_names_its_health_and_row(npu_smi):
    npu = npu_smi('npu_smi_info_310b4_alarm.txt', listing='npu_smi_list_one_npu.txt')
    f = only(judge([record('edge', npu=npu, instances=[instance(devices=[0])])]))
    assert_names(f['finding'], 'NPU 0', 'vllm-8002', 'Health Alarm', '| 0')
    assert '310B4' in f['finding']
    assert 'npu-smi info -t health -i 0)' in f['fix']


def test_npu_busy_with_another_process(npu_smi):
    # The recorded 910B2 node runs a VLLMWorker_DP on every NPU; port 8002 is free, so they are not ours.
    npu = npu_smi('npu_smi_info_910b2_running.txt')
    result = judge([record('node2', npu=npu)])
    found = result['findings']
    assert [f['check'] for f in found] == ['npu'] * 4 and result['errors'] == 4
    assert_names(found[0]['finding'], 'NPU 0', 'vllm-8002', 'busy', '784778', 'VLLMWorker_DP', '30112 MB')
    assert 'process 784784 (VLLMWorker_DP' in found[3]['finding'] and found[3]['finding'].startswith('NPU 3 ')
    assert 'Stop that process' in found[0]['fix'] and 'vllm-8002' in found[0]['fix']


@pytest.mark.parametrize('flag', ['--port', '--port='])
def test_npus_of_the_running_instance_itself_are_not_busy(npu_smi, flag):
    npu = npu_smi('npu_smi_info_910b2_running.txt')
    node = record('node2', npu=npu, node_facts=facts(ports={'8002': held(vllm(8002, flag=flag))}))
    assert judge([node])['findings'] == []


def test_npus_busy_when_the_port_is_held_by_something_else(npu_smi):
    npu = npu_smi('npu_smi_info_910b2_running.txt')
    for cmdline in (HTTP_SERVER, vllm(8002, serve_port=8003)):
        node = record('node2', npu=npu, node_facts=facts(ports={'8002': held(cmdline)}))
        assert checks_of(judge([node])) == ['npu', 'port']


def test_the_port_finding_masks_a_key_on_the_holders_command_line():
    """Facts from elsewhere than preflight_facts (which masks on the node) with a key on the holder's command line:
    the finding names the holder, never the key."""
    cmdline = HTTP_SERVER + ['--api-key', 'K-SECRET-77', '--token=K-SECRET-78']
    node = record('node2', node_facts=facts(ports={'8002': held(cmdline)}))
    texts = [f['finding'] for f in judge([node])['findings'] if f['check'] == 'port']
    assert texts and 'http.server' in texts[0]
    assert 'K-SECRET' not in ' '.join(texts)


def test_a3_devices_are_the_dies_of_the_npus(npu_smi):
    # A3: NPUs 0-7 with two dies each are devices 0-15 (Phy-ID); processes run on NPUs 4-7 = devices 8-15.
    npu = npu_smi('npu_smi_info_a3_running.txt')
    free = [instance(devices=list(range(8)))]
    assert judge([record('a3', npu=npu, instances=free)])['findings'] == []
    result = judge([record('a3', npu=npu, instances=[instance(devices=[9, 16])])])
    texts = [f['finding'] for f in result['findings']]
    assert len(texts) == 2, texts
    assert_names(texts[0], 'NPU 9 (npu-smi NPU 4 chip 1)', 'vllm-8002 is busy', 'process 957770', 'pt_main_thread')
    assert_names(texts[1], 'vllm-8002', 'needs NPU 16', 'NPUs %s' % list(range(16)))


def test_a3_unhealthy_die_is_named_with_its_npu_and_chip(npu_smi):
    npu = npu_smi('npu_smi_info_a3_idle.txt')
    die = [e for e in npu['npus'] if (e['npu'], e['chip']) == (2, 1)][0]
    die.update(health='Warning', healthy=False)
    npu['unhealthy_npus'] = [{'npu': 2, 'health': 'Warning', 'raw': '| 2     Ascend910           | Warning |'}]
    assert judge([record('a3', npu=npu, instances=[instance(devices=[4])])])['findings'] == []  # NPU 2 chip 0
    f = only(judge([record('a3', npu=npu, instances=[instance(devices=[4, 5])])]))
    assert_names(f['finding'], 'NPU 5', 'npu-smi NPU 2 chip 1', 'vllm-8002', 'Health Warning',
                 '| 2     Ascend910           | Warning |')
    assert_names(f['fix'], 'npu-smi info -t health -i 2 -c 1)')


def test_npu_check_skipped_when_not_read():
    assert judge([record('node2', npu=None)])['findings'] == []


def test_stopped_instances_are_not_checked(npu_smi):
    npu = npu_smi('npu_smi_info_910b2_running.txt')
    node = record('node2', npu=npu, instances=[instance(state='stopped')],
                  node_facts=facts(ports={'8002': held(HTTP_SERVER)}, mem_total=SMALL_NODE))
    assert judge([node])['findings'] == []


# --- memory ----------------------------------------------------------------------------------------------------

def test_memory_over_memtotal_names_need_and_memtotal():
    node = record('node1', instances=[instance(8002, [0, 1, 2, 3]), instance(8003, [4, 5, 6, 7])],
                  node_facts=facts(mem_total=SMALL_NODE))
    f = only(judge([node]))
    assert (f['host'], f['check']) == ('node1', 'memory')
    # 8 ranks x (100 + 1) GiB + 8 GiB reserve = 816 GiB; the recorded MemTotal 24684096 kB is 23.5 GiB.
    # The same text as mooncake_config's memory check (one function): what is needed against MemTotal.
    assert_names(f['finding'], '2 instance(s)', 'TP 4', 'global_segment_size 100 GiB', 'local_buffer_size 1 GiB',
                 'reserve 8 GiB', '816.0 GiB', 'MemTotal is 23.5 GiB')
    assert 'mooncake_config_global_segment_size' in f['fix'] and 'HDK < 25.5' in f['fix']


def test_memory_of_instances_with_different_tp_counts_every_rank():
    node = record('node1', instances=[instance(8002, [0, 1, 2, 3]), instance(8003, [4, 5])],
                  node_facts=facts(mem_total=SMALL_NODE), segment=2 * GIB + GIB // 2, reserve=3 * GIB)
    # 6 ranks x (2.5 + 1) GiB + 3 GiB = 24 GiB: the two instances' 4 + 2 ranks all count.
    assert_names(only(judge([node]))['finding'], '2 instance(s)', '6 TP rank(s)', 'global_segment_size 2.5 GiB',
                 'local_buffer_size 1 GiB', 'reserve 3 GiB', '24.0 GiB', 'MemTotal is 23.5 GiB')
    node['memory']['reserve_bytes'] = 2 * GIB
    assert judge([node])['findings'] == []  # 23 GiB fits


def test_memory_that_fits_is_fine():
    node = record('node1', instances=[instance(8002, [0, 1, 2, 3]), instance(8003, [4, 5, 6, 7])])
    assert judge([node])['findings'] == []
    small = record('node1', node_facts=facts(mem_total=SMALL_NODE), segment=2 * GIB, buffer=GIB // 2, reserve=GIB)
    assert judge([small])['findings'] == []  # 4 x 2.5 GiB + 1 GiB = 11 GiB


def test_memory_exactly_memtotal_is_fine():
    node = record('node1', instances=[instance(devices=[0])], segment=10 * GIB, buffer=GIB, reserve=GIB,
                  node_facts=facts(mem_total=12 * GIB))
    assert judge([node])['findings'] == []
    node['facts']['memory']['MemTotal'] -= 1
    assert only(judge([node]))['check'] == 'memory'


# --- ports -----------------------------------------------------------------------------------------------------

def test_instance_port_held_by_another_process():
    node = record('node2', node_facts=facts(ports={'8002': held(HTTP_SERVER, pid=4242, addresses=('0.0.0.0', '::'))}))
    f = only(judge([node]))
    assert (f['host'], f['check']) == ('node2', 'port')
    assert_names(f['finding'], 'port 8002', 'vllm-8002', 'held by pid 4242', 'python3 -m http.server 8002',
                 '0.0.0.0, ::')
    assert_names(f['fix'], 'vllm-8002', 'another port')


def test_instance_port_held_by_an_unreadable_process():
    f = only(judge([record('node2', node_facts=facts(ports={'8002': held(None, pid=None)}))]))
    assert_names(f['finding'], 'port 8002', 'vllm-8002', 'pid ?', 'unreadable')


def test_instance_port_held_by_our_vllm_or_free_is_fine():
    for holder in (held(vllm(8002)), {'listening': False}):
        assert judge([record('node2', node_facts=facts(ports={'8002': holder}))])['findings'] == []


def test_master_ports_held_by_mooncake_master_are_fine():
    node = record('node1', is_master=True,
                  node_facts=facts(ports={'50088': held(MASTER_CMD), '9003': held(MASTER_CMD)}))
    assert judge([node])['findings'] == []


def test_master_ports_held_by_another_process():
    nc = ['nc', '-l', '50088']
    node = record('node1', is_master=True,
                  node_facts=facts(ports={'50088': held(nc, pid=77), '9003': held(HTTP_SERVER, pid=78)}))
    found = judge([node])['findings']
    assert len(found) == 2, found
    assert_names(found[0]['finding'], 'port 50088', 'Mooncake master port', 'pid 77', 'nc -l 50088')
    assert_names(found[1]['finding'], 'port 9003', 'Mooncake master metrics port', 'pid 78',
                 'python3 -m http.server 8002')
    assert 'mooncake_master_port' in found[0]['fix'] and 'mooncake_master_metrics_port' in found[1]['fix']


def test_master_ports_only_matter_on_the_master_node():
    node = record('node2', node_facts=facts(ports={'50088': held(['nc', '-l', '50088'])}))
    assert judge([node])['findings'] == []


# --- model -----------------------------------------------------------------------------------------------------

def test_model_missing():
    f = only(judge([record('node2', node_facts=facts(paths={MODEL: model_dir(exists=False)}))]))
    assert (f['host'], f['check']) == ('node2', 'model')
    assert f['finding'] == 'model path %s does not exist' % MODEL and MODEL in f['fix']


def test_model_without_config_json():
    f = only(judge([record('node2', node_facts=facts(paths={MODEL: model_dir(config=False)}))]))
    assert_names(f['finding'], MODEL, 'no config.json')


def test_model_not_probed_is_not_judged():
    assert judge([record('node2', node_facts=facts(paths={}))])['findings'] == []


def test_smaller_copy_on_one_node_names_that_node_and_both_sizes():
    nodes = [record('node1', node_facts=facts(paths={MODEL: model_dir(size=145000000000, files=40)})),
             record('node2', node_facts=facts(paths={MODEL: model_dir(size=70000000000, files=19)}))]
    f = only(judge(nodes))
    assert (f['host'], f['check']) == ('node2', 'model')
    assert_names(f['finding'], MODEL, 'differs in size', 'node1 145000000000 bytes', 'node2 70000000000 bytes')
    assert 'rsync' in f['fix'] and 'preflight_compare_model_size' in f['fix']
    assert judge(nodes, compare_model_size=False)['findings'] == []


def test_every_smaller_copy_is_named():
    sizes = {'node1': 100, 'node2': 90, 'node3': 100, 'node4': 80}
    nodes = [record(h, node_facts=facts(paths={MODEL: model_dir(size=s)})) for h, s in sorted(sizes.items())]
    assert [f['host'] for f in judge(nodes)['findings']] == ['node2', 'node4']


def test_equal_copies_or_unsummed_sizes_are_fine():
    nodes = [record(h) for h in ('node1', 'node2')]
    assert judge(nodes)['findings'] == []
    nodes[1]['facts']['paths'][MODEL]['size_bytes'] = None  # path_sizes: false
    nodes[0]['facts']['paths'][MODEL]['size_bytes'] = 1
    assert judge(nodes)['findings'] == []


# --- container -------------------------------------------------------------------------------------------------

IMAGE = 'quay.io/ascend/vllm-ascend:v0.11.0rc1'


def test_container_runtime_missing_when_enabled():
    node = record('node2', container={'enabled': True, 'image': IMAGE, 'runtime': 'docker'},
                  node_facts=facts(container={'runtime': None, 'images': {IMAGE: None}}))
    f = only(judge([node]))
    assert (f['host'], f['check']) == ('node2', 'container')
    assert_names(f['finding'], 'docker', 'not installed', 'not on PATH')
    assert 'vllm_ascend_container_enabled=false' in f['fix']


def test_container_image_missing_when_enabled():
    node = record('node2', container={'enabled': True, 'image': IMAGE, 'runtime': 'docker'},
                  node_facts=facts(container={'runtime': '/usr/bin/docker', 'images': {IMAGE: False}}))
    f = only(judge([node]))
    assert_names(f['finding'], IMAGE, 'not present')
    assert 'docker load -i' in f['fix'] and 'docker pull %s' % IMAGE in f['fix']


def test_container_present_or_disabled_is_fine():
    ok = record('node2', container={'enabled': True, 'image': IMAGE, 'runtime': 'docker'},
                node_facts=facts(container={'runtime': '/usr/bin/docker', 'images': {IMAGE: True}}))
    disabled = record('node3', container={'enabled': False, 'image': IMAGE, 'runtime': 'docker'},
                      node_facts=facts(container={'runtime': None, 'images': {}}))
    assert judge([ok, disabled])['findings'] == []


# --- PYTHONHASHSEED --------------------------------------------------------------------------------------------

@pytest.mark.parametrize('seed, word', [(None, 'unset'), ('', 'unset'), ('random', 'random')])
def test_hash_seed_unset_or_random(seed, word):
    f = only(judge([record('node2', instances=[instance(seed=seed)])]))
    assert (f['host'], f['check']) == ('node2', 'hash_seed')
    assert_names(f['finding'], 'PYTHONHASHSEED', 'vllm-8002', 'is %s' % word)
    assert 'vllm_instance_python_hash_seed' in f['fix']


def test_hash_seed_different_on_one_node_names_the_odd_host():
    nodes = [record('node1', instances=[instance(seed='0')]), record('node2', instances=[instance(seed=0)]),
             record('node3', instances=[instance(seed='1234')])]
    f = only(judge(nodes))
    assert (f['host'], f['check']) == ('node3', 'hash_seed')
    # Every instance with its seed, as the vllm_instance role lists them (one function).
    assert_names(f['finding'], 'node1/vllm-8002=0', 'node2/vllm-8002=0', 'node3/vllm-8002=1234', 'cross-node KV hits')


def test_same_hash_seed_everywhere_is_fine():
    nodes = [record('node%d' % n, instances=[instance(8002, seed='0'), instance(8003, [4, 5, 6, 7], seed='0')])
             for n in (1, 2)]
    assert judge(nodes)['findings'] == []


# --- master reachability ---------------------------------------------------------------------------------------

REFUSED = {TARGET: {'ok': False, 'error': '[Errno 111] Connection refused', 'ms': 0.4}}


def test_master_unreachable_while_the_master_runs():
    # Before the master phase: a warning (the phase may restart the master with the fixed address).
    result = judge(two_nodes(node_facts=facts(connect=REFUSED)))
    f = only(result)
    assert (f['host'], f['check'], f['severity']) == ('node2', 'master', 'warning') and result['ok']
    assert_names(f['finding'], 'Mooncake master', TARGET, 'Connection refused', 'after the master phase')
    assert_names(f['fix'], 'mooncake_master', 'runs on 172.31.250.11', 'port 50088')
    # After it (master_reachable.yml): an error.
    after = judge(two_nodes(node_facts=facts(connect=REFUSED)), master_started=True)
    assert only(after)['severity'] == 'error' and not after['ok']


def test_master_unreachable_before_the_master_started_is_not_a_finding():
    nodes = two_nodes(node_facts=facts(connect=REFUSED))
    nodes[0]['facts']['ports'] = {'50088': {'listening': False}}
    assert judge(nodes)['findings'] == []
    nodes[0]['facts']['ports'] = {'50088': held(HTTP_SERVER)}  # something else: a port finding, not a master one
    assert checks_of(judge(nodes)) == ['port']
    assert only(judge(nodes, master_started=True), 'master')['host'] == 'node2'


def test_reachability_after_the_master_started():
    # master_reachable.yml: records with the connect result only; the master must answer now.
    reach = [{'host': 'node1', 'facts': facts(connect={TARGET: {'ok': True, 'error': '', 'ms': 0.2}}),
              'master': {'target': TARGET}},
             {'host': 'node2', 'facts': facts(connect={TARGET: {'ok': False, 'error': 'timed out', 'ms': 3000.1}}),
              'master': {'target': TARGET}}]
    result = judge(reach, checks=['master'], master_started=True)
    f = only(result)
    assert f['host'] == 'node2' and f['finding'].endswith(': timed out')
    assert_names(result['summary'].splitlines()[0], ': 2 node(s) checked', 'node1, node2', ': 1 error(s)',
                 ', 0 warning(s)')


def test_master_reached_only_when_every_node_connected_to_its_target():
    # site.yml checks reachability again after the master phase only when this is not true (or the master changed).
    assert master_reached(two_nodes()) is True
    assert master_reached(two_nodes(node_facts=facts(connect=REFUSED))) is False   # node2 was refused
    ha = two_nodes()
    ha[1]['master']['target'] = ''
    assert master_reached(ha) is False                                            # no target: nothing was tried
    assert master_reached([]) is False and master_reached([None]) is False        # the pre-flight did not run
    reached = preflight_filter.FilterModule().filters()['preflight_master_reached']
    assert reached(two_nodes()) is True and reached(ha) is False


def test_ha_master_without_target_is_not_checked():
    nodes = two_nodes(node_facts=facts(connect={}))
    for node in nodes:
        node['master']['target'] = ''
    assert judge(nodes, master_started=True)['findings'] == []


ETCD = ['172.31.250.11:2379', '172.31.250.12:2379', '172.31.250.13:2379']


def etcd_nodes(answers):
    """Two HA nodes whose preflight_facts saw the etcd members as ``answers`` says: per member, 'healthy' (TCP and
    /health true), 'sick' (TCP, /health false: no quorum) or 'down' (refused)."""
    connect, http = {}, {}
    for target, state in zip(ETCD, answers):
        connect[target] = {'ok': state != 'down', 'error': '' if state != 'down' else '[Errno 111] Connection refused',
                           'ms': 0.3}
        http['http://%s/health' % target] = (
            {'status': 200, 'body': '{"health":"true"}'} if state == 'healthy' else
            {'status': 503, 'body': '{"health":"false"}'} if state == 'sick' else {'status': None, 'body': ''})
    nodes = []
    for host in ('node1', 'node2'):
        node = record(host, node_facts=dict(facts(host=host, connect=connect), http=http))
        node['master'].update(target='', etcd_targets=list(ETCD))
        nodes.append(node)
    return nodes


def test_ha_etcd_majority_healthy_is_fine():
    assert judge(etcd_nodes(['healthy', 'healthy', 'down']))['findings'] == []


def test_ha_etcd_quorum_lost_names_the_members():
    """Two of three members stopped (the molecule ha drill): the one left answers, but /health false."""
    result = judge(etcd_nodes(['sick', 'down', 'down']))
    assert not result['ok'] and result['errors'] == 2
    f = result['findings'][0]
    assert_names(f['finding'], 'no quorum', '0 of 3 healthy', 'majority, 2', 'not healthy: 172.31.250.11',
                 '172.31.250.12:2379', '172.31.250.13:2379', 'Connection refused')
    assert 'site.yml --tags etcd' in f['fix']


def test_ha_etcd_none_running_is_a_warning_on_a_first_deploy_and_an_error_after():
    first = judge(etcd_nodes(['down', 'down', 'down']))
    assert first['ok'] and first['warnings'] == 2
    assert_names(first['findings'][0]['finding'], 'checked again', 'mooncake.json')
    assert not judge(etcd_nodes(['down', 'down', 'down']), master_started=True)['ok']


def test_ha_etcd_group_grown_is_a_warning_while_the_cluster_has_its_quorum():
    """A one-member cluster and an etcd group grown to three: the etcd phase adds the two (member add)."""
    result = judge(etcd_nodes(['healthy', 'down', 'down']))
    assert result['ok'] and result['warnings'] == 2
    f = result['findings'][0]
    assert_names(f['finding'], '1 of the 3 etcd members', 'healthy (172.31.250.11:2379)', 'not running yet:',
                 '172.31.250.12:2379')
    assert_names(f['finding'], 'new to the group', 'join')


# --- clock -----------------------------------------------------------------------------------------------------

def clocks(*offsets, **kwargs):
    return [record('node%d' % (n + 1), node_facts=facts(offset=o, **kwargs)) for n, o in enumerate(offsets)]


def test_one_node_30_s_ahead_is_the_only_one_named():
    f = only(judge(clocks(0.01, 30.0)))
    assert (f['host'], f['check']) == ('node2', 'clock')
    assert_names(f['finding'], '30.0 s ahead', 'bound 2.0 s')
    assert 'chrony' in f['fix']


def test_one_node_behind_of_three():
    f = only(judge(clocks(0.0, -12.5, 0.3)))
    assert f['host'] == 'node2'
    assert_names(f['finding'], '12.5 s behind', 'bound 2.0 s')


def test_clocks_within_the_bound_are_fine():
    assert judge(clocks(0.0, 1.5))['findings'] == []
    assert judge(clocks(0.0, 3.0), max_clock_skew_s=5)['findings'] == []
    assert only(judge(clocks(0.0, 3.0), max_clock_skew_s=1))['finding'].endswith('(bound 1.0 s)')


def test_the_round_trip_uncertainty_widens_the_bound():
    assert judge(clocks(0.0, 2.5, uncertainty=1.0))['findings'] == []
    assert only(judge(clocks(0.0, 2.5, uncertainty=0.1)))['host'] == 'node2'


def test_all_nodes_equally_off_from_the_controller_is_fine():
    assert judge(clocks(30.0, 30.2))['findings'] == []
    assert judge(clocks(-3600.0, -3600.5, -3599.8))['findings'] == []


def test_a_single_node_has_no_one_to_disagree_with():
    assert judge(clocks(300.0))['findings'] == []


# --- deprecated settings ---------------------------------------------------------------------------------------

def test_deprecated_settings_are_warnings_and_pass():
    text = 'register_buffer is only read by vllm-ascend v0.11; left out for v0.13'
    result = judge([record('node1', warnings=[text])])
    f = only(result)
    assert (f['host'], f['check'], f['severity'], f['finding']) == ('node1', 'deprecated', 'warning', text)
    assert result['ok'] is True and result['errors'] == 0 and result['warnings'] == 1
    assert result['lines'][0].startswith('WARNING node1 deprecated: ')
    assert_names(result['lines'][0], text, 'Fix: ')
    assert result['summary'].splitlines()[0].endswith(': 0 error(s), 1 warning(s)')


# --- failed facts, selection, order ----------------------------------------------------------------------------

def test_failed_facts_are_a_finding_and_the_node_is_not_judged_further():
    failed = {'changed': False, 'failed': False, 'failed_when_result': False,
              'msg': 'ports must be TCP ports 1-65535, got [70000]'}
    nodes = [record('node1', node_facts=facts(offset=30.0)),
             record('node2', node_facts=failed, instances=[instance(seed='random')])]
    result = judge(nodes)
    f = only(result)
    assert (f['host'], f['check']) == ('node2', 'facts')
    assert_names(f['finding'], 'could not be read', 'TCP ports 1-65535', '[70000]')
    assert judge([record('node2', node_facts={'failed': True, 'msg': 'boom'})])['findings'][0]['check'] == 'facts'


def test_facts_are_checked_even_when_not_selected():
    nodes = [record('node2', node_facts={'failed': True, 'msg': 'MODULE FAILURE'})]
    assert checks_of(judge(nodes, checks=['clock'])) == ['facts']


def everything_wrong(npu):
    node1 = record('node1', is_master=True, warnings=['old setting'],
                   node_facts=facts(offset=0.0, ports={'50088': held(MASTER_CMD)}))
    node2 = record('node2', npu=npu, instances=[instance(seed='1')],
                   container={'enabled': True, 'image': IMAGE, 'runtime': 'docker'},
                   node_facts=facts(offset=30.0, mem_total=SMALL_NODE, ports={'8002': held(HTTP_SERVER)},
                                    paths={MODEL: model_dir(config=False)}, connect=REFUSED,
                                    container={'runtime': None, 'images': {IMAGE: None}}))
    return [node1, node2]


def test_every_check_finds_its_problem_and_errors_come_first(npu_smi):
    result = judge(everything_wrong(npu_smi('npu_smi_info_910b2_running.txt')))
    # The checks of the releases (versions ... client_ttl) have their own tests (test_preflight_releases.py).
    assert checks_of(result) == sorted(CHECKS[1:CHECKS.index('deprecated') + 1])
    order = [(f['severity'], f['host'], f['check']) for f in result['findings']]
    assert order[-2:] == [('warning', 'node1', 'deprecated'), ('warning', 'node2', 'master')]
    node2 = [c for s, h, c in order if h == 'node2']
    assert node2 == ['npu'] * 4 + ['memory', 'port', 'model', 'container', 'hash_seed', 'clock', 'master']
    assert not result['ok'] and result['errors'] == 10 and result['warnings'] == 2
    head = result['summary'].splitlines()[0]
    assert_names(head, ': 2 node(s) checked', 'node1, node2', ': 10 error(s)', ', 2 warning(s)')
    assert all('Fix: ' in line for line in result['summary'].splitlines()[1:])


@pytest.mark.parametrize('checks', [['clock'], ['npu', 'port'], ['hash_seed', 'deprecated'], ['model']])
def test_checks_setting_restricts(npu_smi, checks):
    result = judge(everything_wrong(npu_smi('npu_smi_info_910b2_running.txt')), checks=checks)
    assert checks_of(result) == sorted(checks)


def test_no_checks_selected_runs_none(npu_smi):
    assert judge(everything_wrong(npu_smi('npu_smi_info_910b2_running.txt')), checks=[])['findings'] == []


# --- model path inside a container ------------------------------------------------------------------------------

@pytest.mark.parametrize('path, volumes, expected', [
    ('/root/.cache/Qwen', ['/data/cache:/root/.cache'], '/data/cache/Qwen'),
    ('/root/.cache/Qwen', ['/root/.cache:/root/.cache'], '/root/.cache/Qwen'),          # the guide's mount
    ('/root/.cache/Qwen', ['/srv:/root', '/mnt/models:/root/.cache/Qwen:ro'], '/mnt/models'),  # longest wins
    ('/root/.cache/Qwen', ['/etc/hccn.conf:/etc/hccn.conf'], '/root/.cache/Qwen'),      # not mounted: as given
    ('/root/.cachex/Qwen', ['/data:/root/.cache'], '/root/.cachex/Qwen'),               # a prefix, not a directory
    ('/models/q', ['/:/models'], '/q'),
    ('/models/q', [], '/models/q'),
])
def test_host_path_follows_the_container_volumes(path, volumes, expected):
    assert host_path(path, volumes) == expected


# --- listeners renamed by setproctitle (vLLM's API server workers, engine processes) ---------------------------

def test_a_renamed_child_of_our_vllm_holds_the_port_and_counts_as_ours():
    worker = {'listening': True, 'address': '172.31.250.11', 'pid': 4711, 'cmdline': ['VLLM::APIServer_0'],
              'addresses': ['172.31.250.11'],
              'ancestors': [['/usr/bin/python3', '/usr/local/bin/vllm', 'serve', '/m', '--port', '8002'],
                            ['/usr/bin/containerd-shim-runc-v2']]}
    assert preflight_filter.FilterModule().filters()  # the filter module loads
    from ansible_collections.ascend.kvpool.plugins.plugin_utils import preflight as logic
    assert logic.held_by(worker, logic.is_our_vllm, 8002)
    assert not logic.held_by(worker, logic.is_our_vllm, 8003)
    stranger = dict(worker, ancestors=[['/usr/sbin/sshd', '-D']])
    assert not logic.held_by(stranger, logic.is_our_vllm, 8002)
    # The judgement: the running instance holds its own port through its worker (no port finding, NPUs its own).
    nodes = two_nodes()
    nodes[0]['facts']['ports']['8002'] = worker
    assert 'port' not in checks_of(judge(nodes))


# --- ephemeral_ports: a service port that an outgoing connection of the node can take ------------------------------
def ephemeral(node_facts, port_range=(32768, 60999), reserved=()):
    return dict(node_facts, ephemeral={'range': list(port_range) if port_range else None,
                                       'reserved': [list(r) for r in reserved]})


def test_the_master_port_in_the_default_ephemeral_range_is_a_warning_with_the_sysctl_that_fixes_it():
    node1 = record('node1', is_master=True, node_facts=ephemeral(facts(host='node1')))
    node2 = record('node2', node_facts=ephemeral(facts(host='node2')))
    result = judge([node1, node2], checks=['ephemeral_ports'])
    assert result['ok'] and result['errors'] == 0 and result['warnings'] == 1     # the master's node only
    line, = result['lines']
    assert_names(line, 'WARNING node1', 'ephemeral_ports')
    assert_names(line, 'mooncake_master_port', '50088', 'port range 32768-60999', 'not reserved')
    assert_names(line, 'mooncake_master exits', 'status 1')
    assert_names(line, 'Fix: Reserve', 'sysctl -w net.ipv4.ip_local_reserved_ports=50088',
                 'net.ipv4.ip_local_reserved_ports = 50088', '/etc/sysctl.d/', 'ports below 32768')


def test_reserved_or_outside_ports_are_no_finding_and_the_fix_keeps_other_reservations():
    reserved = record('node1', is_master=True, node_facts=ephemeral(facts(host='node1'), reserved=[(50000, 50100)]))
    narrow = record('node1', is_master=True, node_facts=ephemeral(facts(host='node1'), port_range=(60000, 61000)))
    unknown = record('node1', is_master=True, node_facts=ephemeral(facts(host='node1'), port_range=None))
    for rec in (reserved, narrow, unknown):
        assert judge([rec], checks=['ephemeral_ports'])['findings'] == []
    others = record('node1', is_master=True, node_facts=ephemeral(facts(host='node1'), reserved=[(8000, 8010)]))
    line, = judge([others], checks=['ephemeral_ports'])['lines']
    assert 'net.ipv4.ip_local_reserved_ports=8000-8010,50088,' in line


def test_every_port_of_the_plan_in_the_range_is_named_in_one_finding():
    inst = dict(instance(port=40000), kv_transfer_config={'kv_port': 40100})
    node = record('node2', instances=[inst], node_facts=ephemeral(facts(host='node2')))
    result = judge([node], checks=['ephemeral_ports'])
    line, = result['lines']
    assert_names(line, 'vllm-40000 40000', 'kv_port', 'vllm-40000 40100', 'inside')
    assert 'ip_local_reserved_ports=40000,40100,' in line


def test_ephemeral_ports_is_one_of_the_checks():
    assert 'ephemeral_ports' in CHECKS
