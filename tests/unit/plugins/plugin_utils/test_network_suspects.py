# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The network report localizes what failed: one bad port is one suspect line (not one line per failed ping), a bad
link between two healthy ports is a link, a port's own failed checks are joined to its line, and what the pings
cannot decide is said so. Synthetic clusters (the ping plan of each strategy, pings failing as the mock's faults
make them fail); a Hypothesis property over random layouts and random subsets of failed pings."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.ascend.kvpool.plugins.plugin_utils import npu_network as nn
from ansible_collections.ascend.kvpool.tests.unit.messages import assert_names

SENDER_FAILED = {'message': 'Command execute failed!', 'raw': 'Command execute failed!'}
TIMED_OUT = {'message': '100.0% packet loss', 'raw': '3 packets transmitted, 0 received, 100.00% packet loss'}
LINK_DOWN = {'check': 'link', 'message': 'link is DOWN', 'raw': 'link status: DOWN'}

# (strategy, k): every strategy that pings; sampled with k 1 and 2 (seed 0, round 0).
STRATEGIES = [('same_index', 2), ('ring', 2), ('sampled', 1), ('sampled', 2), ('full_mesh', 2)]
IDS = ['same_index', 'ring', 'sampled-k1', 'sampled-k2', 'full_mesh']
# The bad port of each size: NPU 3, whose sampled offsets (seed 0, round 0) are 2 of 6 and 26 of 64, so that its
# peers are not one node pinging it both ways (see test_sampled_mutual_pairs_cannot_tell_the_port_from_its_peer).
BAD = {6: 'node4/npu3', 64: 'node37/npu3'}
MAX_LINES_ONE_PORT = 5  # head, coverage, the suspect's line (3 in fact), with room for a joined check


def cluster(nodes, npus=8):
    return dict(('node%d' % k, dict((str(i), '29.1.%d.%d' % (k, 80 + i)) for i in range(npus)))
                for k in range(1, nodes + 1))


def run(ips, strategy, k=2, bad=(), links=(), dead_senders=(), findings=None, seed=0, round_=0):
    """The report of a run where every ping from or to a port of ``bad`` fails (as the mock's ``ping fail``: the
    sender's fail outright, the others time out), and every ping between the two ends of a link of ``links``
    (either direction); ``dead_senders``' own pings fail (as a ``gateway none``: pings to them pass).
    ``findings``: {node: [hccn_facts finding]}. Returns (report, number of failed pings)."""
    plan = nn.ping_plan(ips, strategy, k, seed, round_)
    bad, dead_senders = set(bad), set(dead_senders)
    links = set(frozenset(link) for link in links)
    results = {}
    failed = 0
    for node, targets in plan.items():
        pairs = []
        for t in targets:
            src = '%s/npu%s' % (node, t['device'])
            if src in bad or src in dead_senders:
                pairs.append(dict(t, **SENDER_FAILED))
            elif t['label'] in bad or frozenset((src, t['label'])) in links:
                pairs.append(dict(t, **TIMED_OUT))
        failed += len(pairs)
        results[node] = {'npus': len(ips[node]), 'findings': (findings or {}).get(node, []),
                         'ping': {'count': len(targets), 'failed_pairs': pairs}}
    cov = nn.ping_coverage(ips, strategy, k, seed, round_, plan=plan)
    return nn.npu_network_report(results, sorted(ips), '', cov, plan), failed


def pings_of(rep):
    return [f for f in rep['findings'] if f['check'] == 'ping']


def assert_every_failed_ping_kept_with_both_ends(rep, failed):
    pings = pings_of(rep)
    assert len(pings) == failed
    for f in pings:
        src = '%s/npu%s' % (f['node'], f['npu'])
        assert f['message'].startswith('ping %s -> %s (' % (src, f['peer'])), f
        assert f['peer'].startswith('node') and f['peer'].split('/')[0] != f['node']


@pytest.mark.parametrize('nodes', [6, 64])
@pytest.mark.parametrize('strategy,k', STRATEGIES, ids=IDS)
def test_one_bad_port_is_one_suspect_and_a_short_summary(nodes, strategy, k):
    bad = BAD[nodes]
    rep, failed = run(cluster(nodes), strategy, k, bad=[bad])
    assert [(s['kind'], s['port'], s['failed'], s['through']) for s in rep['suspects']] == [
        ('port', bad, failed, failed)]
    assert rep['links'] == []
    summary = rep['summary']
    assert len(summary) <= MAX_LINES_ONE_PORT and len(summary) == 3, summary
    assert summary[0].endswith('%d problem(s): 1 suspect port' % failed)
    node, npu = bad.split('/npu')
    sent = {'same_index': nodes - 1, 'full_mesh': 8 * (nodes - 1)}.get(strategy, k if strategy == 'sampled' else 1)
    assert_names(summary[2], 'suspect port %s:' % bad, '%d of %d pings' % (failed, failed),
                 '(%d from it, %d to it)' % (sent, failed - sent), "peers' other pings passed",
                 'Command execute failed!')
    # The JSON keeps every failed ping, each naming both ends, each explained by the suspect.
    assert_every_failed_ping_kept_with_both_ends(rep, failed)
    assert all(f['explained_by'] == bad for f in rep['findings'])
    assert rep['suspects'][0]['node'] == node and rep['suspects'][0]['npu'] == int(npu)


@pytest.mark.parametrize('nodes', [6, 64])
@pytest.mark.parametrize('strategy,k', STRATEGIES, ids=IDS)
@pytest.mark.parametrize('bad', [('node2/npu5', 'node5/npu6'), ('node2/npu3', 'node3/npu3')],
                         ids=['other-index', 'same-index-neighbours'])
def test_two_bad_ports_on_different_nodes_are_two_suspects(nodes, strategy, k, bad):
    rep, failed = run(cluster(nodes), strategy, k, bad=bad)
    assert [s['port'] for s in rep['suspects']] == list(bad) and rep['links'] == []
    assert all(s['kind'] == 'port' and s['failed'] == s['through'] for s in rep['suspects'])
    assert len(rep['summary']) == 4 and rep['summary'][0].endswith(': 2 suspect ports')
    assert [line.split(':')[0] for line in rep['summary'][2:]] == ['suspect port %s' % p for p in bad]
    if strategy in ('same_index', 'full_mesh') and bad[0].endswith('npu3') or strategy == 'full_mesh':
        # They pinged each other: each is the other's peer whose other pings failed too.
        peers = rep['suspects'][0]['peers']
        assert_names(rep['summary'][2].split(' | ')[0], "%d of its %d peers'" % (peers - 1, peers),
                     'other pings passed', '%s: suspect too' % bad[1])
    assert_every_failed_ping_kept_with_both_ends(rep, failed)
    assert all(f['explained_by'] in bad for f in rep['findings'])


@pytest.mark.parametrize('nodes', [6, 64])
@pytest.mark.parametrize('strategy,k', STRATEGIES, ids=IDS)
def test_one_bad_link_between_two_healthy_ports_is_a_link(nodes, strategy, k):
    ips = cluster(nodes)
    # A pair the plan pings: node3/npu2 -> its first target.
    peer = [t['label'] for t in nn.hccn_ping_targets(ips, 'node3', strategy, k) if t['device'] == 2][0]
    rep, failed = run(ips, strategy, k, links=[('node3/npu2', peer)])
    assert failed in (1, 2)  # one way (ring, sampled) or both (same_index, full_mesh, or a sampled pair both ways)
    assert rep['suspects'] == []
    ports = sorted(['node3/npu2', peer], key=nn._port_key)
    ends = ' <-> '.join(ports)
    assert rep['links'] == [{'kind': 'link', 'name': ends, 'ports': ports, 'failed': failed, 'through': failed,
                             'checks': []}]
    assert rep['summary'][0].endswith(': 1 suspect link') and len(rep['summary']) == 3
    assert_names(rep['summary'][2], 'suspect link %s:' % ends, '%d of %d pings' % (failed, failed),
                 "ports' other pings passed")
    assert_every_failed_ping_kept_with_both_ends(rep, failed)
    assert all(f['explained_by'] == ends for f in rep['findings'])


@pytest.mark.parametrize('strategy,k', STRATEGIES, ids=IDS)
def test_the_ports_own_failed_check_is_joined_to_its_line(strategy, k):
    health = {'npu': 3, 'check': 'npu_health', 'message': 'npu-smi Health is Alarm', 'raw': '| 3 910B3 | Alarm |'}
    findings = {'node4': [dict(LINK_DOWN, npu=3), health],
                'node2': [dict(LINK_DOWN, npu=7, check='optical', message='optical RX power low')]}
    rep, failed = run(cluster(6), strategy, k, bad=['node4/npu3'], findings=findings)
    assert [(s['port'], s['checks']) for s in rep['suspects']] == [('node4/npu3', ['link'])]
    line = rep['summary'][2]
    assert_names(line, 'suspect port node4/npu3:', 'also failed here: link', 'link is DOWN', 'raw: link status: DOWN')
    # No row of its own for the joined check; another port's check, and a check that is not of the port's link
    # (npu-smi's health), stay rows; the JSON keeps them all.
    assert [r.split()[:3] for r in rep['summary'][3:]] == [['node2', 'npu7', 'optical'],
                                                           ['node4', 'npu3', 'npu_health']]
    assert_names(rep['summary'][0], '%d problem(s)' % (failed + 3), '1 suspect port', '2 other')
    link = [f for f in rep['findings'] if f['check'] == 'link']
    assert link == [dict(LINK_DOWN, node='node4', npu=3, explained_by='node4/npu3')]
    assert_every_failed_ping_kept_with_both_ends(rep, failed)


FLAPS = {'check': 'link_stat', 'message': 'link went down 5 time(s) since boot', 'raw': '[devid 2]link up count : 6'}


def test_a_failed_link_with_one_end_whose_checks_failed_is_that_port():
    # net_health Fault on node2/npu1 (the mock: its own pings fail, pings to it pass): ring pings node2/npu1 ->
    # node3/npu1 only; both ends have another ping that passed, but node2/npu1's own check failed: the port.
    findings = {'node2': [{'npu': 1, 'check': 'net_health', 'message': 'net health is Fault',
                           'raw': 'net health status: Fault'}]}
    rep, failed = run(cluster(6), 'ring', dead_senders=['node2/npu1'], findings=findings)
    assert [(s['kind'], s['port'], s['failed'], s['through'], s['checks']) for s in rep['suspects']] == [
        ('partial', 'node2/npu1', 1, 2, ['net_health'])]
    assert rep['links'] == [] and len(rep['summary']) == 3
    assert_names(rep['summary'][2], 'suspect port node2/npu1:', '1 of 2 pings', '(1 from it, 0 to it)',
                 'the rest passed', 'also failed here: net_health')


def test_a_failed_link_whose_both_ends_checks_failed_stays_a_link_naming_each_port():
    findings = {'node3': [dict(FLAPS, npu=2)], 'node4': [dict(FLAPS, npu=2, raw='[devid 2]link up count : 4')]}
    rep, failed = run(cluster(6), 'ring', links=[('node3/npu2', 'node4/npu2')], findings=findings)
    assert rep['suspects'] == [] and rep['links'][0]['checks'] == ['link_stat', 'link_stat']
    assert len(rep['summary']) == 3
    assert_names(rep['summary'][2], 'suspect link', 'node3/npu2 <-> node4/npu2', '1 of 1 pings',
                 'link_stat on node3/npu2', 'link_stat on node4/npu2')


@pytest.mark.parametrize('strategy', ['ring', 'same_index'])
def test_two_nodes_cannot_tell_the_link_from_either_port(strategy):
    rep, failed = run(cluster(2), strategy, bad=['node2/npu3'])
    # Each end's every ping went to the other: the data cannot decide, and the one line says so.
    assert rep['suspects'] == []
    assert rep['links'] == [{'kind': 'undecided', 'name': 'node1/npu3 <-> node2/npu3',
                             'ports': ['node1/npu3', 'node2/npu3'], 'failed': 2, 'through': 2, 'checks': []}]
    assert rep['summary'][0].endswith(': 1 undecided') and len(rep['summary']) == 3
    assert_names(rep['summary'][2], 'undecided', 'node1/npu3 <-> node2/npu3', '2 of 2 pings',
                 'the link or either port')
    assert_every_failed_ping_kept_with_both_ends(rep, failed)


def test_two_nodes_full_mesh_names_the_port():
    # node1's other NPUs pinged node2/npu3 and answered it, and passed their other pings.
    rep, failed = run(cluster(2), 'full_mesh', bad=['node2/npu3'])
    assert [(s['port'], s['failed'], s['through']) for s in rep['suspects']] == [('node2/npu3', 16, 16)]
    assert len(rep['summary']) == 3


def test_a_failed_check_decides_between_the_two_ends():
    rep, failed = run(cluster(2), 'same_index', bad=['node2/npu3'], findings={'node2': [dict(LINK_DOWN, npu=3)]})
    assert [(s['port'], s['checks'], s['unconfirmed_peers']) for s in rep['suspects']] == [
        ('node2/npu3', ['link'], ['node1/npu3'])]
    assert rep['links'] == []
    assert_names(rep['summary'][2], 'suspect port node2/npu3:', '2 of 2 pings', 'node1/npu3: no other ping',
                 'link is DOWN')
    assert len(rep['summary']) == 3


def test_a_fabric_where_every_ping_failed_is_one_undecided_line_per_ring():
    # Nothing passed: no ping tells which port or link is bad. ring: per NPU index one group of 6 ports, named
    # short (the JSON lists its ports), and every finding points at it.
    rep, failed = run(cluster(6), 'ring', bad=['node%d/npu%d' % (n, i) for n in range(1, 7) for i in range(8)])
    assert rep['suspects'] == [] and len(rep['links']) == 8 and len(rep['summary']) == 10
    first = rep['links'][0]
    assert first['kind'] == 'undecided' and first['name'] == 'node1/npu0 <-> ... (6 ports)'
    assert first['ports'] == ['node%d/npu0' % n for n in range(1, 7)] and first['failed'] == 6
    assert_names(rep['summary'][2], 'undecided node1/npu0', '(6 ports)', '6 pings among them failed',
                 'their links or any of them')
    assert rep['summary'][0].endswith('48 problem(s): 8 undecided')
    assert set(f['explained_by'] for f in rep['findings']) == set(link['name'] for link in rep['links'])


def test_sampled_mutual_pairs_cannot_tell_the_port_from_its_peer():
    # 6 nodes, seed 3, round 0, k 1: NPU 0 pings the node 3 ahead, which pings it back (offset n / 2): the bad
    # port's only peer has no other ping. Said so, not guessed.
    ips = cluster(6)
    plan = nn.ping_plan(ips, 'sampled', 1, 3, 0)
    assert [t['label'] for t in plan['node4'] if t['device'] == 0] == ['node1/npu0']
    assert [t['label'] for t in plan['node1'] if t['device'] == 0] == ['node4/npu0']
    rep, failed = run(ips, 'sampled', 1, bad=['node4/npu0'], seed=3)
    assert rep['suspects'] == [] and [link['ports'] for link in rep['links']] == [['node1/npu0', 'node4/npu0']]
    assert rep['links'][0]['kind'] == 'undecided' and len(rep['summary']) == 3


@pytest.mark.parametrize('strategy,k', STRATEGIES, ids=IDS)
def test_a_node_whose_every_port_is_a_suspect_is_one_line(strategy, k):
    ports = ['node4/npu%d' % i for i in range(8)]
    findings = {'node4': [dict(LINK_DOWN, npu=i) for i in range(8)]}
    rep, failed = run(cluster(6), strategy, k, bad=ports, findings=findings)
    assert [s['port'] for s in rep['suspects']] == ports and rep['links'] == []
    assert len(rep['summary']) == 3 and rep['summary'][0].endswith(': 1 suspect node')
    line = rep['summary'][2]
    assert_names(line, 'suspect node node4:', 'all 8 pinged ports', '%d of %d pings' % (failed, failed),
                 'link on every port', 'link is DOWN')
    assert len([f for f in rep['findings'] if f.get('explained_by')]) == len(rep['findings']) == failed + 8


def test_a_port_whose_sent_pings_fail_and_received_pass_is_one_partial_suspect():
    # gateway none on node3/npu2: its pings leave its /24 and time out, pings to it pass. One line, not 40 links.
    findings = {'node3': [{'npu': 2, 'check': 'gateway', 'message': 'no default gateway',
                           'raw': 'Get gateway failed, because no gateway was preset there!'}]}
    rep, failed = run(cluster(6), 'full_mesh', dead_senders=['node3/npu2'], findings=findings)
    assert failed == 40
    assert [(s['kind'], s['port'], s['failed'], s['through'], s['failed_from'], s['failed_to'], s['checks'])
            for s in rep['suspects']] == [('partial', 'node3/npu2', 40, 80, 40, 0, ['gateway'])]
    assert rep['links'] == [] and len(rep['summary']) == 3
    assert_names(rep['summary'][2], 'suspect port node3/npu2:', '40 of 80 pings', '(40 from it, 0 to it)',
                 'the rest passed', 'gateway: no default gateway')
    # Without a failed check of its own: one line too, saying what it may be.
    rep, failed = run(cluster(6), 'full_mesh', dead_senders=['node3/npu2'])
    assert [s['kind'] for s in rep['suspects']] == ['partial'] and rep['links'] == [] and len(rep['summary']) == 3
    assert_names(rep['summary'][2].split(' | ')[0], "its 40 peers' other pings", 'a lossy port, or its links')


def test_pings_of_a_node_whose_hccn_ping_failed_are_unknown_not_passed():
    ips = cluster(6)
    plan = nn.ping_plan(ips, 'ring')
    results = {}
    for node, targets in plan.items():
        pairs = [dict(t, **TIMED_OUT) for t in targets if t['label'] == 'node4/npu3']
        results[node] = {'npus': 8, 'ping': {'count': len(targets), 'failed_pairs': pairs}}
    results['node4'] = {'npus': 8, 'errors': [{'check': 'ping', 'message': 'hccn_ping failed'}], 'ping': {}}
    rep = nn.npu_network_report(results, sorted(ips), '', None, plan)
    # node4's own pings are unknown: node4/npu3 is judged on the one ping to it (failed), its peer node3/npu3 on
    # its other ping (passed).
    assert [(s['port'], s['failed'], s['through']) for s in rep['suspects']] == [('node4/npu3', 1, 1)]
    assert [line.split()[:3] for line in rep['summary'][1:]] == [['suspect', 'port', 'node4/npu3:'],
                                                                 ['node4', '-', 'ping']]
    # A sender that ran other pings than the plan's (count differs): its failed pings are listed, not localized.
    results['node3']['ping']['count'] = 99
    rep = nn.npu_network_report(results, sorted(ips), '', None, plan)
    assert rep['suspects'] == [] and rep['links'] == []
    assert [line.split()[:3] for line in rep['summary'][1:]] == [['node3', 'npu3', 'ping'], ['node4', '-', 'ping']]


def test_the_summary_of_one_bad_port_on_64_nodes():
    """The lines docs/network.md shows."""
    rep, failed = run(cluster(64), 'ring', bad=['node37/npu3'])
    assert rep['summary'] == [
        'NPU network verification: 64 node(s), 512 NPU(s), 512 cross-node ping(s): 2 problem(s): 1 suspect port',
        'ping plan ring: 512 of 129,024 cross-node NPU pairs; every port pinged at least once',
        "suspect port node37/npu3: 2 of 2 pings through it failed (1 from it, 1 to it); its 2 peers' other pings "
        "passed | e.g. ping node37/npu3 -> node38/npu3 (29.1.38.83): Command execute failed!",
    ]
    assert [f['message'] for f in rep['findings']] == [
        'ping node36/npu3 -> node37/npu3 (29.1.37.83): 100.0% packet loss',
        'ping node37/npu3 -> node38/npu3 (29.1.38.83): Command execute failed!']
    rep, failed = run(cluster(64), 'same_index', bad=['node37/npu3'])
    assert failed == 126 and len(rep['summary']) == 3
    assert rep['summary'][2].startswith("suspect port node37/npu3: 126 of 126 pings through it failed (63 from it, "
                                        "63 to it); its 63 peers' other pings passed")


class _Task(object):
    def __init__(self, args):
        self.args, self.check_mode = args, False


def test_the_action_gives_the_report_the_plan_of_the_run(monkeypatch):
    """The action derives the plan from the registered hccn_facts' IPs (as the pings did) and passes it on."""
    from ansible.plugins.action import ActionBase

    from ansible_collections.ascend.kvpool.plugins.action import npu_network_report as action

    ips = cluster(6)
    plan = nn.ping_plan(ips, 'ring')
    hostvars = {}
    for node, targets in plan.items():
        failed = [dict(t, ok=False, **TIMED_OUT) for t in targets if t['label'] == 'node4/npu3']
        failed += [dict(t, ok=False, **SENDER_FAILED) for t in targets if node == 'node4' and t['device'] == 3]
        hostvars[node] = {'npu_network_hccn': {'device_ids': list(range(8)), 'ips': ips[node], 'failed_checks': [],
                                               'tls': {}},
                          'npu_network_ping': {'results': [dict(t, ok=True) for t in targets],
                                               'failed_pairs': failed}}
    monkeypatch.setattr(ActionBase, 'run', lambda self, tmp=None, task_vars=None: {})
    plugin = action.ActionModule.__new__(action.ActionModule)
    plugin._task = _Task({'ping_strategy': 'ring'})
    res = plugin.run(task_vars={'hostvars': hostvars, 'ansible_play_hosts': sorted(ips),
                                'ansible_play_hosts_all': sorted(ips)})
    assert [(s['port'], s['failed'], s['through']) for s in res['report']['suspects']] == [('node4/npu3', 2, 2)]
    assert_names(res['summary'][2], 'suspect port node4/npu3:', '2 of 2 pings')
    assert len(res['summary']) == 3 and len(res['findings']) == 2


# --- property: whatever subset of pings fails -------------------------------------------------------------------
layouts = st.dictionaries(
    st.integers(1, 7).map(lambda k: 'node%d' % k),
    st.dictionaries(st.integers(0, 5).map(str), st.booleans(), max_size=4),
    max_size=7,
).map(lambda d: dict((node, dict((dev, '29.1.%s.%d' % (node[4:], 80 + int(dev)) if has_ip else None)
                                 for dev, has_ip in devs.items())) for node, devs in d.items()))
CHECKS = ['link', 'net_health', 'optical', 'npu_health', 'ip']  # npu_health: not the link's own, never joined


@settings(max_examples=300, deadline=None)
@given(layouts, st.sampled_from(STRATEGIES), st.integers(0, 3), st.data())
def test_properties_of_the_localization(ips, strategy_k, seed, data):
    strategy, k = strategy_k
    plan = nn.ping_plan(ips, strategy, k, seed, 0)
    every = [(node, t) for node in sorted(plan) for t in plan[node]]
    failing = data.draw(st.sets(st.integers(0, max(0, len(every) - 1)), max_size=len(every))) if every else set()
    ports = sorted(set('%s/npu%s' % (n, t['device']) for n, t in every) | set(t['label'] for n, t in every))
    flagged = data.draw(st.sets(st.sampled_from(ports), max_size=3)) if ports else set()
    odd = data.draw(st.sets(st.sampled_from(sorted(plan)), max_size=2)) if plan else set()
    results = dict((node, {'npus': len(ips[node]), 'findings': [],
                           'ping': {'count': len(plan[node]) + (1 if node in odd else 0), 'failed_pairs': []}})
                   for node in plan)
    for index in sorted(failing):
        node, t = every[index]
        results[node]['ping']['failed_pairs'].append(dict(t, **TIMED_OUT))
    for port in sorted(flagged):
        node, npu = port.split('/npu')
        results[node]['findings'].append(dict(LINK_DOWN, npu=int(npu), check=CHECKS[int(npu) % len(CHECKS)]))
    rep = nn.npu_network_report(results, sorted(ips), '', None, plan)  # never raises

    # The JSON keeps every finding: each failed ping with both ends, each port check.
    assert len(pings_of(rep)) == len(failing)
    assert_every_failed_ping_kept_with_both_ends(rep, len(failing))
    assert len(rep['findings']) == len(failing) + len(flagged)
    # Every failed ping is explained by a suspect's or link's line, or is a line of the rest.
    ids = dict((s['port'], s) for s in rep['suspects'])
    ids.update((link['name'], link) for link in rep['links'])
    rows = set(rep['summary'][1:])
    for f in rep['findings']:
        if f.get('explained_by'):
            assert f['explained_by'] in ids, f
            by = f['explained_by']
            node = by.split('/')[0]
            assert any(line.startswith(('suspect port %s:' % by, 'suspect link %s:' % by, 'undecided %s:' % by,
                                        'suspect node %s:' % node)) for line in rows), (f, rep['summary'])
        else:
            assert any(line.split()[:3] == [f['node'], 'npu%s' % f['npu'], f['check']] and f['message'] in line
                       for line in rows), (f, rep['summary'])
    # A suspect port whose every ping failed; a link's ends are not such ports; nothing localized from an odd node.
    for s in rep['suspects']:
        assert s['failed'] <= s['through'] and (s['kind'] != 'port' or s['failed'] == s['through'])
    dead = set(s['port'] for s in rep['suspects'] if s['kind'] == 'port')
    for link in rep['links']:
        assert link['kind'] == 'undecided' or not dead & set(link['ports'])
    # One summary line per finding that no suspect explains, plus one per suspect node, port, group and link.
    rest = [f for f in rep['findings'] if not f.get('explained_by')]
    assert len(rep['summary']) <= 1 + len(rest) + len(rep['suspects']) + len(rep['links'])
    if not failing:
        assert rep['suspects'] == rep['links'] == []
