"""Cross-node logic of the network verification: ping plans, TLS consistency, the one summary."""

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.ascend.kvpool.plugins.filter.npu_network import hccn_ping_targets
from ansible_collections.ascend.kvpool.plugins.plugin_utils.npu_network import npu_network_report
from ansible_collections.ascend.kvpool.tests.unit.messages import assert_names

IPS = {
    'node1': {'0': '29.1.1.80', '1': '29.1.1.81'},
    'node2': {'0': '29.1.2.80', '1': '29.1.2.81'},
    'node3': {'0': '29.1.3.80', '1': None},
}


def test_same_index_pings_the_same_npu_of_every_other_node():
    got = hccn_ping_targets(IPS, 'node1', 'same_index')
    assert got == [
        {'device': 0, 'address': '29.1.2.80', 'label': 'node2/npu0'},
        {'device': 1, 'address': '29.1.2.81', 'label': 'node2/npu1'},
        {'device': 0, 'address': '29.1.3.80', 'label': 'node3/npu0'},
    ]


def test_full_mesh_pings_every_npu_of_every_other_node():
    got = hccn_ping_targets(IPS, 'node2', 'full_mesh')
    assert len(got) == 2 * 2 + 2 * 1  # node1: 2 NPUs, node3: 1 NPU with an IP; from 2 local NPUs
    assert {'device': 1, 'address': '29.1.1.80', 'label': 'node1/npu0'} in got


def test_local_npu_without_ip_sends_nothing():
    assert all(t['device'] == 0 for t in hccn_ping_targets(IPS, 'node3', 'same_index'))


def test_none_and_single_node():
    assert hccn_ping_targets(IPS, 'node1', 'none') == []
    assert hccn_ping_targets({'node1': IPS['node1']}, 'node1', 'same_index') == []


def test_unknown_strategy_names_the_variable():
    with pytest.raises(AnsibleFilterError, match='npu_network_ping_strategy'):
        hccn_ping_targets(IPS, 'node1', 'star')


def _tls(switch):
    return {'switch': switch, 'raw': 'dev_id:0, tls switch[%s](0:disable, 1:enable)' % switch}


def test_healthy_report():
    results = {n: {'npus': 8, 'findings': [], 'tls': {'0': _tls(0)}, 'ping': {'count': 8, 'failed_pairs': []}}
               for n in ('node1', 'node2')}
    rep = npu_network_report(results, ['node1', 'node2'], 'lab')
    assert rep['ok'] and rep['npus_checked'] == 16 and rep['pings'] == 16
    assert len(rep['summary']) == 1
    assert_names(rep['summary'][0], '[lab]', '2 node(s)', '16 NPU(s)', '16 cross-node ping(s)', 'all checks passed')


def test_report_names_node_npu_check_and_raw_line():
    results = {
        'node1': {'npus': 8, 'findings': [{'npu': 3, 'check': 'link', 'message': 'link is DOWN',
                                           'raw': 'link status: DOWN'}],
                  'ping': {'count': 8, 'failed_pairs': [{'device': 3, 'address': '29.1.2.83', 'label': 'node2/npu3',
                                                         'message': 'Command execute failed!',
                                                         'raw': 'Command execute failed!'}]}},
        'node2': {'npus': 8, 'findings': [{'npu': 5, 'check': 'npu_health', 'message': 'npu-smi Health is Alarm',
                                           'raw': '| 5     910B3     | Alarm  |'}]},
    }
    rep = npu_network_report(results, ['node1', 'node2', 'node3'])
    assert not rep['ok']
    keys = [(f['node'], f['npu'], f['check']) for f in rep['findings']]
    assert keys == [('node1', 3, 'link'), ('node1', 3, 'ping'), ('node2', 5, 'npu_health'),
                    ('node3', None, 'unreachable')]
    # Both ends, the sender's node and NPU; without a plan (nothing known of the pings that passed) every failed
    # ping is a line of its own.
    assert_names(rep['findings'][1]['message'], 'node1/npu3 -> node2/npu3', '29.1.2.83')
    assert rep['findings'][1]['peer'] == 'node2/npu3' and rep['suspects'] == rep['links'] == []
    row = [line for line in rep['summary'] if line.startswith('node1') and ' link ' in line][0]
    assert 'npu3' in row and 'raw: link status: DOWN' in row
    assert '4 problem(s)' in rep['summary'][0]


def test_tls_must_be_identical_on_all_nodes():
    results = {
        'node1': {'tls': {str(i): _tls(0) for i in range(8)}},
        'node2': {'tls': dict([(str(i), _tls(0)) for i in range(7)] + [('7', _tls(1))])},
    }
    rep = npu_network_report(results, ['node1', 'node2'])
    assert [(f['node'], f['npu'], f['check']) for f in rep['findings']] == [('node2', 7, 'tls_consistency')]
    assert 'tls switch[1]' in rep['findings'][0]['raw']


def test_module_errors_are_findings():
    results = {'node2': {'errors': [{'check': 'tool', 'message': 'hccn_tool not found on this host'}]}}
    rep = npu_network_report(results, ['node2'])
    assert rep['findings'][0]['check'] == 'tool' and rep['findings'][0]['node'] == 'node2'
