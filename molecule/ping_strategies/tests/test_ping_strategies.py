"""One bad port among the 48 NPUs of a 6-node SIMULATED mock cluster is named under every ping strategy.

node4 NPU 5 fails every ping to or from it (mockctl fault --check ping --value fail). Each strategy runs the
operator's command once against the six nodes and reads the JSON report and the printed summary: the port is the
one suspect, on one line, with every failed ping folded into it (the JSON keeps them all). Two more runs (ring, the
cheapest plan): a second bad port on another node is a second suspect; a bad link between two healthy ports
(mockctl fault --check ping_peer) is named as a link, with no port suspect.
"""

import json
import sys
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / 'resources'))
import kvpool_testlib as lib  # noqa: E402

NODES = 6
BAD = ('node4', 5)
BAD_PORT = '%s/npu%s' % BAD
MAX_LINES = 5  # the summary of one bad port: totals, coverage, the suspect's line (3), with room to spare
PAIRS = NODES * 8 * (NODES - 1) * 8 // 2  # cross-node NPU pairs: 48 x 40 / 2 = 960


@pytest.fixture(scope='module')
def six_nodes():
    """Inventory of mock nodes 1-6 (added to inventories/sim, whose group_vars apply to them) and the fault."""
    lib.mockctl('up', '--nodes', NODES)
    tmp = Path(tempfile.mkdtemp(prefix='kvpool-ping-'))
    hosts = dict(('node%d' % k, {'ansible_host': '172.31.250.%d' % (10 + k)}) for k in range(1, NODES + 1))
    (tmp / 'hosts.yml').write_text(json.dumps({'all': {'children': {'npu_nodes': {'hosts': hosts}}}}))
    lib.mockctl('fault', 'clear')
    lib.mockctl('fault', 'set', '--node', BAD[0], '--npu', BAD[1], '--check', 'ping', '--value', 'fail')
    yield tmp / 'hosts.yml'
    lib.mockctl('fault', 'clear')


def run(inventory, **extra):
    return lib.playbook('verify_network.yml', '-i', str(inventory),
                        extra_vars=dict(extra, npu_network_fail_on_error=False))


def involves_bad_port(finding):
    return (finding['node'], finding['npu']) == BAD or '%s/npu%s ' % BAD in finding['message']


@pytest.mark.parametrize('extra,pings,pairs', [
    ({'npu_network_ping_strategy': 'same_index'}, 8 * NODES * (NODES - 1), 8 * NODES * (NODES - 1) // 2),
    ({'npu_network_ping_strategy': 'ring'}, 8 * NODES, 8 * NODES),
    ({'npu_network_ping_strategy': 'sampled', 'npu_network_ping_round': '0'}, 16 * NODES, None),
    ({'npu_network_ping_strategy': 'sampled', 'npu_network_ping_round': '1', 'npu_network_ping_sample_k': 1},
     8 * NODES, None),
    ({'npu_network_ping_strategy': 'full_mesh'}, 64 * NODES * (NODES - 1), PAIRS),
], ids=['same_index', 'ring', 'sampled-k2', 'sampled-k1', 'full_mesh'])
def test_bad_port_is_named_under_every_strategy(six_nodes, extra, pings, pairs):
    result = run(six_nodes, **extra)
    assert result.rc == 0, result.stdout[-3000:]
    rep = result.report
    summary = '\n'.join(rep['summary'])
    assert rep['nodes'] == ['node%d' % k for k in range(1, NODES + 1)] and rep['npus_checked'] == 8 * NODES
    assert rep['pings'] == pings, summary
    # The bad port sends pings under every strategy: they fail and name it, with the tool's raw answer.
    sent = [f for f in rep['findings'] if (f['node'], f['npu'], f['check']) == (BAD[0], BAD[1], 'ping')]
    assert sent and all('Command execute failed!' in (f['raw'] or '') for f in sent), summary
    # Only that port is reported: every finding is a ping from or to it.
    assert rep['findings'] and all(f['check'] == 'ping' and involves_bad_port(f) for f in rep['findings']), summary
    # The coverage line: stated, with every port pinged at least once.
    cov = rep['coverage']
    assert cov['strategy'] == extra['npu_network_ping_strategy'] and cov['pings'] == pings
    assert cov['total_pairs'] == PAIRS and cov['not_pinged'] == []
    if pairs is not None:
        assert cov['pairs'] == pairs
    assert rep['summary'][1].startswith('ping plan %s' % cov['strategy'])
    assert 'every port pinged' in rep['summary'][1] or 'round(s)' in rep['summary'][1]
    assert 'ping plan %s' % cov['strategy'] in result.stdout
    # Localized: one suspect, the bad port, every ping through it failed; one line for all of its failed pings.
    assert [(s['kind'], s['port'], s['failed'] == s['through'] == len(rep['findings']))
            for s in rep['suspects']] == [('port', BAD_PORT, True)], summary
    assert rep['links'] == [], summary
    assert len(rep['summary']) <= MAX_LINES and len(rep['summary']) == 3, summary
    assert rep['summary'][0].endswith('%d problem(s): 1 suspect port' % len(rep['findings'])), summary
    lib.assert_names(rep['summary'][2], 'suspect port %s' % BAD_PORT,
                     '%d of %d pings' % (len(rep['findings']), len(rep['findings'])), 'failed')
    assert 'suspect port %s: ' % BAD_PORT in result.stdout
    # The JSON keeps every failed ping, naming both ends, each explained by the suspect.
    for f in rep['findings']:
        assert f['message'].startswith('ping %s/npu%s -> %s (' % (f['node'], f['npu'], f['peer'])), f
        assert BAD_PORT in ('%s/npu%s' % (f['node'], f['npu']), f['peer']) and f['explained_by'] == BAD_PORT, f


def test_sampled_states_its_round_and_repeats_it(six_nodes):
    first = run(six_nodes, npu_network_ping_strategy='sampled', npu_network_ping_seed=3)
    cov = first.report['coverage']
    assert cov['k'] == 2 and cov['seed'] == 3 and cov['full_cycle'] == 3  # ceil(5 peers / 2)
    lib.assert_names(first.report['summary'][1], 'sampled', 'k=2', 'seed 3', 'round %d' % cov['round'])
    again = run(six_nodes, npu_network_ping_strategy='sampled', npu_network_ping_seed=3,
                npu_network_ping_round=str(cov['round']))
    assert again.report['findings'] == first.report['findings']


def test_two_bad_ports_on_different_nodes_are_two_suspects(six_nodes):
    second = ('node2', 1)
    lib.mockctl('fault', 'set', '--node', second[0], '--npu', second[1], '--check', 'ping', '--value', 'fail')
    try:
        result = run(six_nodes, npu_network_ping_strategy='ring')
    finally:
        lib.mockctl('fault', 'clear', '--node', second[0])
    rep = result.report
    summary = '\n'.join(rep['summary'])
    assert result.rc == 0, result.stdout[-3000:]
    assert [(s['port'], s['failed'], s['through']) for s in rep['suspects']] == [
        ('node2/npu1', 2, 2), (BAD_PORT, 2, 2)], summary
    assert rep['links'] == [] and len(rep['findings']) == 4, summary
    assert len(rep['summary']) == 4 and rep['summary'][0].endswith(': 2 suspect ports'), summary
    assert [line.split(':')[0] for line in rep['summary'][2:]] == ['suspect port node2/npu1',
                                                                   'suspect port %s' % BAD_PORT], summary


def test_a_bad_link_between_two_healthy_ports_is_a_link(six_nodes):
    """mockctl's ping_peer fault: pings between node3/npu2 and node4/npu2 fail (ring pings node3 -> node4 only),
    their other pings pass. Without the module's bad port (put back after), so that no port is suspect."""
    lib.mockctl('fault', 'clear', '--node', BAD[0])
    try:
        lib.mockctl('fault', 'set', '--node', 'node3', '--npu', 2, '--check', 'ping_peer', '--value', 'node4:2')
        try:
            result = run(six_nodes, npu_network_ping_strategy='ring')
        finally:
            lib.mockctl('fault', 'clear', '--node', 'node3')
    finally:
        lib.mockctl('fault', 'set', '--node', BAD[0], '--npu', BAD[1], '--check', 'ping', '--value', 'fail')
    rep = result.report
    summary = '\n'.join(rep['summary'])
    assert result.rc == 0, result.stdout[-3000:]
    assert rep['suspects'] == [], summary
    assert rep['links'] == [{'kind': 'link', 'name': 'node3/npu2 <-> node4/npu2', 'ports': ['node3/npu2', 'node4/npu2'],
                             'failed': 1, 'through': 1, 'checks': []}], summary
    assert [(f['node'], f['npu'], f['peer'], f['explained_by']) for f in rep['findings']] == [
        ('node3', 2, 'node4/npu2', 'node3/npu2 <-> node4/npu2')], summary
    assert 'recv time out' in rep['findings'][0]['raw'] or '0 received' in rep['findings'][0]['raw'], summary
    assert len(rep['summary']) == 3 and rep['summary'][0].endswith(': 1 suspect link'), summary
    lib.assert_names(rep['summary'][2], 'suspect link', 'node3/npu2 <-> node4/npu2', '1 of 1 pings',
                     'other pings passed')
