# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""hccn_facts, hccn_ping and npu_smi_facts over recorded real tool answers (fixtures of module_utils tests).

The command executor of module_utils/_runner is replaced by a table of recorded answers keyed by the argv the
module builds, so these tests check what the modules run (argv lists) and what they make of real output.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.ascend.kvpool.plugins.modules import hccn_facts, hccn_ping, npu_smi_facts
from ansible_collections.ascend.kvpool.tests.unit.messages import assert_names
from ansible_collections.ascend.kvpool.tests.unit.plugins.module_utils.fixture_loader import read_answer
from ansible_collections.ascend.kvpool.tests.unit.plugins.modules.network_node import (
    HEALTHY,
    ONE_NPU_LIST,
    SMI,
    TOOL,
    Node,
    run_module,
)


@pytest.fixture
def conf(tmp_path):
    lines = []
    for d in range(8):
        lines += ['address_%d=29.1.112.213' % d, 'netmask_%d=255.255.0.0' % d]
    path = tmp_path / 'hccn.conf'
    path.write_text('\n'.join(lines) + '\n')
    return str(path)


def test_healthy_node_discovers_npus_and_runs_every_query(monkeypatch, capsys, conf):
    node = Node()
    res = run_module(hccn_facts, {'hccn_conf_path': conf}, node, monkeypatch, capsys)
    assert res['device_ids'] == list(range(8))
    assert res['failed_checks'] == []
    hccn_calls = [c for c in node.calls if c[0] == TOOL]
    assert len(hccn_calls) == 8 * 9
    assert [TOOL, '-i', '3', '-net_health', '-g'] in hccn_calls
    assert [TOOL, '-i', '3', '-optical', '-g'] in hccn_calls and [TOOL, '-i', '3', '-link_stat', '-g'] in hccn_calls
    assert [SMI, 'info', '-t', 'topo'] in node.calls
    assert res['topology']['family'] == 'a2' and res['topology']['groups'] == [list(range(8))]
    assert res['ips']['0'] == '29.1.112.213'
    assert res['hccn_conf']['present'] and res['hccn_conf']['mismatches'] == []


def test_link_down_is_a_finding_with_its_raw_line(monkeypatch, capsys, conf):
    node = Node({(3, 'link'): 'hccn_link_down.txt', (5, 'net_health'): 'hccn_net_health_socket_failed.txt'})
    res = run_module(hccn_facts, {'hccn_conf_path': conf}, node, monkeypatch, capsys)
    got = dict(((f['npu'], f['check']), f) for f in res['failed_checks'])
    assert set(got) == {(3, 'link'), (5, 'net_health')}
    assert got[(3, 'link')]['raw'] == 'link status: DOWN'
    assert 'Socket fail' in got[(5, 'net_health')]['raw']
    assert res['changed'] is False


def test_invalid_device_is_one_finding_not_seven(monkeypatch, capsys, conf):
    node = Node(dict(((0, c), 'hccn_invalid_device.txt') for c in HEALTHY))
    res = run_module(hccn_facts, {'hccn_conf_path': conf, 'devices': [0, 1]}, node, monkeypatch, capsys)
    assert [(f['npu'], f['check']) for f in res['failed_checks']] == [(0, 'device')]
    assert 'invalid device id' in res['failed_checks'][0]['raw'].lower()


def test_busy_answers_are_retried(monkeypatch, capsys, conf):
    node = Node({(2, 'link'): ['hccn_busy.txt', 'hccn_busy.txt', 'hccn_link_up.txt']})
    res = run_module(hccn_facts, {'hccn_conf_path': conf, 'devices': [2]}, node, monkeypatch, capsys)
    assert res['failed_checks'] == []
    assert res['devices']['2']['link']['attempts'] == 3


def test_busy_forever_is_named(monkeypatch, capsys, conf):
    node = Node(dict(((1, c), 'hccn_busy.txt') for c in HEALTHY))
    res = run_module(hccn_facts, {'hccn_conf_path': conf, 'devices': [1], 'busy_retries': 1}, node,
                     monkeypatch, capsys)
    assert [(f['npu'], f['check']) for f in res['failed_checks']] == [(1, 'tool')]


def test_missing_hccn_conf_and_mismatch(monkeypatch, capsys, tmp_path, conf):
    res = run_module(hccn_facts, {'hccn_conf_path': str(tmp_path / 'nope')}, Node(), monkeypatch, capsys)
    assert [(f['npu'], f['check']) for f in res['failed_checks']] == [(None, 'hccn_conf')]
    with open(conf) as f:
        text = f.read().replace('address_4=29.1.112.213', 'address_4=29.1.137.99')
    with open(conf, 'w') as f:
        f.write(text)
    res = run_module(hccn_facts, {'hccn_conf_path': conf}, Node(), monkeypatch, capsys)
    assert [(f['npu'], f['check']) for f in res['failed_checks']] == [(4, 'hccn_conf')]
    assert res['failed_checks'][0]['raw'] == 'address_4=29.1.137.99'


def test_driver_not_loaded_is_a_node_finding(monkeypatch, capsys, conf):
    node = Node(smi_list='npu_smi_driver_error.txt')
    monkeypatch.setattr(hccn_facts.glob, 'glob', lambda pattern: [])
    res = run_module(hccn_facts, {'hccn_conf_path': conf}, node, monkeypatch, capsys)
    assert res['device_ids'] == []
    assert [(f['npu'], f['check']) for f in res['failed_checks']] == [(None, 'driver')]
    assert 'dcmi module initialize failed' in res['failed_checks'][0]['raw']


def test_missing_tool_fails_naming_the_fix(monkeypatch, capsys):
    res = run_module(hccn_facts, {}, Node(), monkeypatch, capsys, bins={'npu-smi': SMI})
    assert res['failed'] and 'hccn_tool not found' in res['msg'] and 'hccn_tool_path' in res['msg']


def test_device_out_of_range_fails(monkeypatch, capsys):
    res = run_module(hccn_facts, {'devices': [0, 16]}, Node(), monkeypatch, capsys)
    assert res['failed'] and 'devices: 16 out of range 0-15' in res['msg']


def test_ping_pairs_are_judged_and_one_device_pings_one_target_at_a_time(monkeypatch, capsys):
    node = Node({(3, 'ping', '29.1.2.83'): 'hccn_ping_partial.txt', (4, 'ping', '29.1.2.84'): 'hccn_ping_fail.txt'})
    targets = [{'device': d, 'address': '29.1.2.8%d' % d, 'label': 'node2/npu%d' % d} for d in range(8)]
    targets.append({'device': 0, 'address': '29.1.3.80', 'label': 'node3/npu0'})
    res = run_module(hccn_ping, {'targets': targets, 'pkt': 1024}, node, monkeypatch, capsys)
    assert len(res['results']) == 9
    failed = dict((r['label'], r) for r in res['failed_pairs'])
    assert set(failed) == {'node2/npu3', 'node2/npu4'}
    assert failed['node2/npu3']['received'] == 2 and failed['node2/npu3']['loss_pct'] == pytest.approx(33.33)
    assert failed['node2/npu4']['raw'] == 'Command execute failed!'
    assert [TOOL, '-i', '0', '-ping', '-g', 'address', '29.1.3.80', 'pkt', '1024'] in node.calls


def test_npu_smi_healthy_reference(monkeypatch, capsys):
    res = run_module(npu_smi_facts, {}, Node(), monkeypatch, capsys)
    assert res['driver_loaded'] and res['count'] == 8
    assert res['unhealthy_npus'] == [] and res['healthy_npus']


def test_npu_smi_unhealthy_npu_has_its_row(monkeypatch, capsys):
    res = run_module(npu_smi_facts, {}, Node(smi_info='npu_smi_info_310b4_alarm.txt', smi_list=ONE_NPU_LIST),
                     monkeypatch, capsys)
    assert res['unhealthy_npus']
    bad = res['unhealthy_npus'][0]
    assert bad['health'].lower() == 'alarm' and bad['raw'] and 'alarm' in bad['raw'].lower()


def test_npu_smi_driver_not_loaded(monkeypatch, capsys):
    node = Node(smi_list='npu_smi_driver_error.txt', smi_info='npu_smi_driver_error.txt')
    res = run_module(npu_smi_facts, {}, node, monkeypatch, capsys)
    assert res['driver_loaded'] is False and 'dcmi' in res['driver_error']


def test_npu_health_in_the_same_fan_out(monkeypatch, capsys, conf):
    node = Node(smi_info='npu_smi_info_310b4_alarm.txt', smi_list=ONE_NPU_LIST)  # a real table with an Alarm row
    res = run_module(hccn_facts, {'hccn_conf_path': conf, 'npu_health': True}, node, monkeypatch, capsys)
    assert [SMI, 'info'] in node.calls
    bad = [f for f in res['failed_checks'] if f['check'] == 'npu_health']
    assert bad and all(f['raw'] and f['raw'].startswith('|') for f in bad)


def test_npu_health_driver_error(monkeypatch, capsys, conf):
    node = Node(smi_info='npu_smi_driver_error.txt')
    res = run_module(hccn_facts, {'hccn_conf_path': conf, 'npu_health': True, 'devices': [0]}, node,
                     monkeypatch, capsys)
    assert [(f['npu'], f['check']) for f in res['failed_checks']] == [(None, 'driver')]


def _topo_with(pairs):
    """The recorded 8x 910B3 matrix with the given (a, b) pairs reading SYS instead of HCCS (both directions)."""
    ans = read_answer('npu_smi_topo_910b3.txt')
    lines = ans['stdout'].split('\n')
    for a, b in pairs:
        for me, other in ((a, b), (b, a)):
            row = lines[1 + me].split()
            row[1 + other] = 'SYS'
            lines[1 + me] = '       '.join(row)
    return dict(ans, stdout='\n'.join(lines))


def test_optical_and_link_flaps_are_findings_with_the_tool_lines(monkeypatch, capsys, conf):
    node = Node({(1, 'optical'): 'hccn_optical_not_present_910a.txt',
                 (2, 'optical'): 'hccn_optical_rx_low_reconstructed.txt',
                 (6, 'link_stat'): 'hccn_link_stat_910a_after.txt'})
    res = run_module(hccn_facts, {'hccn_conf_path': conf, 'link_flap_threshold': 1}, node, monkeypatch, capsys)
    got = dict(((f['npu'], f['check']), f) for f in res['failed_checks'])
    assert set(got) == {(1, 'optical'), (2, 'optical'), (6, 'link_stat')}
    assert 'not present' in got[(1, 'optical')]['message'] and got[(1, 'optical')]['raw'].startswith('present')
    assert_names(got[(2, 'optical')]['message'], 'RX power lane 1', '0.0054 mW below')
    assert 'RX LOS flag 0xff' in got[(2, 'optical')]['message']
    assert 'went down 2 time(s)' in got[(6, 'link_stat')]['message']
    assert 'link up count' in got[(6, 'link_stat')]['raw']


def test_flap_threshold_is_the_operators(monkeypatch, capsys, conf):
    node = Node({(6, 'link_stat'): 'hccn_link_stat_910a_after.txt'})
    res = run_module(hccn_facts, {'hccn_conf_path': conf}, node, monkeypatch, capsys)
    assert res['failed_checks'] == []  # 2 flaps, default threshold 3
    assert res['devices']['6']['link_stat']['value']['flaps'] == 2


def test_a_pair_without_hccs_inside_a_group_is_named(monkeypatch, capsys, conf):
    node = Node(smi_topo=_topo_with([(2, 5), (1, 6)]))
    res = run_module(hccn_facts, {'hccn_conf_path': conf, 'topology_groups': [[0, 1, 2, 3], [4, 5, 6, 7]]}, node,
                     monkeypatch, capsys)
    # (2, 5) and (1, 6) cross the two instances' groups: nobody uses them, nothing to report.
    assert res['failed_checks'] == []
    res = run_module(hccn_facts, {'hccn_conf_path': conf}, node, monkeypatch, capsys)
    bad = [(f['npu'], f['check']) for f in res['failed_checks']]
    assert bad == [(1, 'topology'), (2, 'topology')]
    msg = [f for f in res['failed_checks'] if f['npu'] == 2][0]
    assert_names(msg['message'], 'NPU 2 <-> NPU 5', 'SYS', 'expected HCCS')
    assert msg['raw'].startswith('NPU2')


def test_topology_needs_npu_smi(monkeypatch, capsys, conf):
    res = run_module(hccn_facts, {'hccn_conf_path': conf, 'devices': [0, 1]}, Node(), monkeypatch, capsys,
                     bins={'hccn_tool': TOOL})
    assert [(f['npu'], f['check']) for f in res['failed_checks']] == [(None, 'topology')]
    assert 'npu_smi_path' in res['failed_checks'][0]['message']


def test_checks_can_leave_the_new_queries_out(monkeypatch, capsys, conf):
    node = Node()
    run_module(hccn_facts, {'hccn_conf_path': conf, 'checks': ['link']}, node, monkeypatch, capsys)
    assert all(c[0] == TOOL and c[3] == '-link' for c in node.calls if c[1:] != ['info', '-l'])


def test_npu_smi_facts_reads_the_topology(monkeypatch, capsys):
    node = Node()
    res = run_module(npu_smi_facts, {}, node, monkeypatch, capsys)
    assert [SMI, 'info', '-t', 'topo'] in node.calls
    assert res['topology']['family'] == 'a2' and res['topology']['links']['0']['7'] == 'HCCS'
    node = Node()
    res = run_module(npu_smi_facts, {'topology': False}, node, monkeypatch, capsys)
    assert 'topology' not in res and [SMI, 'info', '-t', 'topo'] not in node.calls
