"""Ping plans that grow linearly (ring, sampled) beside same_index / full_mesh / none: counts, coverage, every port
pinged, determinism and rotation; Hypothesis properties over random node / NPU layouts with missing IPs."""

import datetime
import math

import pytest
from ansible.errors import AnsibleFilterError
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.ascend.kvpool.plugins.filter.npu_network import hccn_ping_targets, ping_round
from ansible_collections.ascend.kvpool.plugins.plugin_utils import npu_network as nn
from ansible_collections.ascend.kvpool.tests.unit.messages import assert_names


def cluster(nodes, npus=8):
    return dict(('node%d' % k, dict((str(i), '29.1.%d.%d' % (k, 80 + i)) for i in range(npus)))
                for k in range(1, nodes + 1))


def pairs_of(plan, ips):
    by_ip = dict((ip, (node, nn._dev_key(dev))) for node, devs in ips.items() for dev, ip in devs.items() if ip)
    return [((node, t['device']), by_ip[t['address']]) for node, targets in plan.items() for t in targets]


@pytest.mark.parametrize('nodes', [2, 3, 6, 64])
def test_counts_per_strategy(nodes):
    ips = cluster(nodes)
    count = dict((s, sum(len(v) for v in nn.ping_plan(ips, s, 2, 0, 0).values())) for s in nn.STRATEGIES)
    assert count['same_index'] == 8 * nodes * (nodes - 1)
    assert count['full_mesh'] == 8 * nodes * 8 * (nodes - 1)
    assert count['ring'] == 8 * nodes
    assert count['sampled'] == 8 * nodes * min(2, nodes - 1)
    assert count['none'] == 0


def test_the_issues_example_line_for_512_npus():
    cov = nn.ping_coverage(cluster(64), 'ring')
    assert nn.coverage_line(cov) == 'ring: 512 of 129,024 cross-node NPU pairs; every port pinged at least once'
    full = nn.ping_coverage(cluster(64), 'full_mesh')
    assert full['pairs'] == full['total_pairs'] == 129024


def test_ring_pings_npu_i_of_the_next_node_and_the_last_the_first():
    ips = cluster(12, npus=2)
    plan = nn.ping_plan(ips, 'ring')
    assert plan['node2'] == [{'device': 0, 'address': '29.1.3.80', 'label': 'node3/npu0'},
                             {'device': 1, 'address': '29.1.3.81', 'label': 'node3/npu1'}]
    assert [t['label'] for t in plan['node9']] == ['node10/npu0', 'node10/npu1']  # natural order, not node1 < node10
    assert [t['label'] for t in plan['node12']] == ['node1/npu0', 'node1/npu1']


def test_ring_skips_a_node_without_that_npus_ip():
    ips = cluster(3, npus=2)
    ips['node2']['1'] = None
    plan = nn.ping_plan(ips, 'ring')
    assert [t['label'] for t in plan['node1']] == ['node2/npu0', 'node3/npu1']
    assert [t['device'] for t in plan['node2']] == [0]


def test_sampled_is_reproducible_and_rotates():
    ips = cluster(16)
    a = nn.ping_plan(ips, 'sampled', 3, 7, 42)
    assert a == nn.ping_plan(ips, 'sampled', 3, 7, 42)
    assert a != nn.ping_plan(ips, 'sampled', 3, 7, 43)
    assert a != nn.ping_plan(ips, 'sampled', 3, 8, 42)
    # Each port sends k pings and answers k pings in a round.
    pairs = pairs_of(a, ips)
    for port in [('node%d' % k, i) for k in range(1, 17) for i in range(8)]:
        assert sum(1 for src, dst in pairs if src == port) == 3
        assert sum(1 for src, dst in pairs if dst == port) == 3


@pytest.mark.parametrize('nodes,k', [(2, 2), (5, 1), (16, 2), (16, 4), (9, 3)])
def test_sampled_covers_every_same_index_pair_within_its_cycle(nodes, k):
    ips = cluster(nodes, npus=3)
    cycle = math.ceil((nodes - 1) / k)
    assert nn.ping_coverage(ips, 'sampled', k, 5, 0)['full_cycle'] == cycle
    for start in (0, 11):
        seen = set()
        for r in range(start, start + cycle):
            seen.update(pairs_of(nn.ping_plan(ips, 'sampled', k, 5, r), ips))
        wanted = set(pairs_of(nn.ping_plan(ips, 'same_index'), ips))
        assert seen == wanted


def test_sampled_k_at_least_the_peers_is_same_index():
    ips = cluster(4)
    assert sorted(pairs_of(nn.ping_plan(ips, 'sampled', 9, 0, 3), ips)) == \
        sorted(pairs_of(nn.ping_plan(ips, 'same_index'), ips))


def test_a_port_no_other_node_has_still_pings_someone():
    ips = {'node1': {'0': '29.1.1.80', '9': '29.1.1.89'}, 'node2': {'0': '29.1.2.80', '1': None}}
    for strategy in ('ring', 'sampled'):
        cov = nn.ping_coverage(ips, strategy)
        assert cov['not_pinged'] == [], strategy
        assert {'device': 9, 'address': '29.1.2.80', 'label': 'node2/npu0'} in nn.ping_plan(ips, strategy)['node1']


def test_coverage_names_the_ports_not_pinged():
    ips = {'node1': {'0': '29.1.1.80', '9': '29.1.1.89'}, 'node2': {'0': '29.1.2.80'}}
    cov = nn.ping_coverage(ips, 'same_index')
    assert cov['not_pinged'] == ['node1/npu9']
    assert_names(nn.coverage_line(cov), 'same_index:', '1 of 2', '1 of 3 port(s) not pinged', 'node1/npu9')
    assert_names(nn.coverage_line(nn.ping_coverage(ips, 'none')), 'no port pinged', 'ping strategy none')
    line = nn.coverage_line(nn.ping_coverage(cluster(8), 'sampled', 2, 3, 20000))
    assert_names(line, 'k=2, seed 3, round 20000', '104 of 1,792', 'every port pinged', 'within 4 round(s)')


def test_report_states_the_coverage_on_its_second_line():
    ips = cluster(2)
    results = dict((n, {'npus': 8, 'ping': {'count': 8, 'failed_pairs': []}}) for n in ips)
    rep = nn.npu_network_report(results, list(ips), '', nn.ping_coverage(ips, 'ring'))
    assert_names(rep['summary'][1], 'ping plan ring:', '8 of 64', 'every port pinged')
    assert rep['coverage']['pings'] == 16 and rep['ok']
    assert nn.npu_network_report(results, list(ips))['coverage'] is None


def test_bad_parameters_name_the_variable():
    with pytest.raises(AnsibleFilterError, match='npu_network_ping_sample_k'):
        hccn_ping_targets(cluster(3), 'node1', 'sampled', 0)
    with pytest.raises(AnsibleFilterError, match='npu_network_ping_round'):
        hccn_ping_targets(cluster(3), 'node1', 'sampled', 2, 0, 'monday')
    with pytest.raises(AnsibleFilterError, match='npu_network_ping_strategy'):
        hccn_ping_targets(cluster(3), 'node1', 'star')


def test_default_round_is_the_utc_day_number():
    assert nn.default_round(datetime.date(1970, 1, 2)) == 1
    assert nn.default_round(datetime.date(2026, 12, 1)) == 20788
    assert ping_round('') == nn.default_round() and ping_round('12') == 12 and ping_round(None) >= 20000


# Random layouts: 1-12 nodes, each with a random subset of NPU ids 0-15, some without an IP.
layouts = st.dictionaries(
    st.integers(1, 12).map(lambda k: 'node%d' % k),
    st.dictionaries(st.integers(0, 15).map(str), st.booleans(), max_size=8),
    max_size=12,
).map(lambda d: dict((node, dict((dev, '29.1.%s.%d' % (node[4:], 80 + int(dev)) if has_ip else None)
                                 for dev, has_ip in devs.items())) for node, devs in d.items()))


def _ports(ips):
    return set((n, int(d)) for n, devs in ips.items() for d, ip in devs.items() if ip)


@settings(max_examples=150, deadline=None)
@given(layouts, st.sampled_from(nn.STRATEGIES), st.integers(1, 5), st.integers(0, 3), st.integers(0, 10 ** 6))
def test_properties_of_every_plan(ips, strategy, k, seed, rnd):
    plan = nn.ping_plan(ips, strategy, k, seed, rnd)
    ports = _ports(ips)
    pairs = pairs_of(plan, ips)
    # Only ports with an IP, never the own node, never twice the same pair in one run.
    for src, dst in pairs:
        assert src in ports and dst in ports and src[0] != dst[0]
    assert len(pairs) == len(set(pairs))
    # The per-host filter returns exactly that host's part of the plan.
    for node in ips:
        assert nn.hccn_ping_targets(ips, node, strategy, k, seed, rnd) == plan.get(node, [])
    # Deterministic.
    assert plan == nn.ping_plan(ips, strategy, k, seed, rnd)
    cov = nn.ping_coverage(ips, strategy, k, seed, rnd)
    assert cov['pings'] == len(pairs) and cov['ports'] == len(ports)
    assert cov['pairs'] <= cov['total_pairs']
    nodes_with_ports = len(set(port[0] for port in ports))
    if strategy != 'none' and nodes_with_ports >= 2:
        # ring and sampled reach every port; same_index and full_mesh every port whose index another node has.
        if strategy in nn.LINEAR or strategy == 'full_mesh':
            assert cov['not_pinged'] == []
        if strategy in nn.LINEAR:
            # Linear: at most k (sampled) or 1 (ring) pings sent per port, plus an orphan's one.
            per = 1 if strategy == 'ring' else k
            assert cov['pings'] <= per * len(ports)
    if strategy == 'full_mesh':
        assert cov['pairs'] == cov['total_pairs']


@settings(max_examples=60, deadline=None)
@given(layouts, st.integers(1, 4), st.integers(0, 3), st.integers(0, 10 ** 6))
def test_sampled_rounds_cover_same_index_over_a_cycle(ips, k, seed, start):
    cov = nn.ping_coverage(ips, 'sampled', k, seed, start)
    seen = set()
    for r in range(start, start + max(1, cov.get('full_cycle') or 0)):
        seen.update(pairs_of(nn.ping_plan(ips, 'sampled', k, seed, r), ips))
    assert set(pairs_of(nn.ping_plan(ips, 'same_index'), ips)) <= seen


def test_node_result_from_the_registered_results():
    hccn = {'device_ids': [0, 1], 'failed_checks': [{'npu': 1, 'check': 'link'}], 'tls': {'0': {'switch': 0}}}
    ping = {'results': [{}, {}, {}], 'failed_pairs': [{'device': 0}]}
    assert nn.node_result(hccn, ping) == {'npus': 2, 'errors': [], 'findings': [{'npu': 1, 'check': 'link'}],
                                          'tls': {'0': {'switch': 0}},
                                          'ping': {'count': 3, 'failed_pairs': [{'device': 0}]}}
    failed = nn.node_result({'failed': True, 'msg': 'hccn_tool not found'}, {'skipped': True})
    assert failed['errors'] == [{'check': 'tool', 'message': 'hccn_tool not found'}] and failed['ping'] == {}
    assert nn.node_result(None, {'failed': True})['errors'] == [{'check': 'ping', 'message': 'hccn_ping failed'}]


def test_input_errors_name_host_variable_and_fix():
    from ansible_collections.ascend.kvpool.plugins.filter.npu_network import npu_network_input_errors
    hostvars = {'node1': {}, 'node2': {'npu_network_devices': [0, 99]}, 'node10': {'npu_network_checks': []}}
    errors = npu_network_input_errors(['node1', 'node2', 'node10'], hostvars, [], ['link'])
    assert len(errors) == 2
    assert_names(errors[0], 'node2: ', 'npu_network_devices', 'ids 0-15', '(got [0, 99])')
    assert_names(errors[1], 'node10: ', 'npu_network_checks', 'must not be empty')
    assert npu_network_input_errors(['node1'], hostvars, [True], ['link'])[0].startswith('node1: npu_network_devices')


def test_input_errors_also_check_the_npu_groups_and_the_flap_threshold():
    from ansible_collections.ascend.kvpool.plugins.filter.npu_network import npu_network_input_errors
    hostvars = {'node1': {'npu_network_npu_groups': [[0, 1], [2, 16]]},
                'node2': {'npu_network_link_flap_threshold': -1},
                'node3': {'npu_network_link_flap_threshold': '5'}, 'node4': {}}
    errors = npu_network_input_errors(['node1', 'node2', 'node3', 'node4'], hostvars, [], ['link'], [], 3)
    assert [e.split(':')[0] for e in errors] == ['node1', 'node2']
    assert_names(errors[0], 'npu_network_npu_groups', 'list of lists', 'NPU ids 0-15')
    assert '(got -1)' in errors[1] and 'npu_network_link_flap_threshold' in errors[1]
    assert npu_network_input_errors(['node4'], hostvars, [], ['link'], [[0, 'x']], 3)
