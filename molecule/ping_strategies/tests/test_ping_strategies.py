"""One bad port among the 48 NPUs of a 6-node SIMULATED mock cluster is named under every ping strategy.

node4 NPU 5 fails every ping to or from it (mockctl fault --check ping --value fail). Each strategy runs the
operator's command once against the six nodes and reads the JSON report and the printed summary.
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
    assert rep['summary'][1].endswith('every port pinged at least once') or 'round(s)' in rep['summary'][1]
    assert 'ping plan %s' % cov['strategy'] in result.stdout


def test_sampled_states_its_round_and_repeats_it(six_nodes):
    first = run(six_nodes, npu_network_ping_strategy='sampled', npu_network_ping_seed=3)
    cov = first.report['coverage']
    assert cov['k'] == 2 and cov['seed'] == 3 and cov['full_cycle'] == 3  # ceil(5 peers / 2)
    assert 'sampled (k=2, seed 3, round %d)' % cov['round'] in first.report['summary'][1]
    again = run(six_nodes, npu_network_ping_strategy='sampled', npu_network_ping_seed=3,
                npu_network_ping_round=str(cov['round']))
    assert again.report['findings'] == first.report['findings']
