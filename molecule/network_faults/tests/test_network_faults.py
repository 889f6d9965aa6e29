"""Every fault the SIMULATED mock nodes can inject is caught, and the summary names node, NPU, check and raw line
(the RoCE ports, the optical modules, link flaps, the NPU-to-NPU topology, the node).

Each round sets several faults on different (node, NPU) pairs, runs the operator's command once
(`ansible-playbook verify_network.yml -i inventories/sim`) and reads the JSON report and the printed summary.
"""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / 'resources'))
import kvpool_testlib as lib  # noqa: E402

HEALTH_STATES = ['Socket fail', 'Receive timeout', 'Unreachable', 'Time exceeded', 'Fault', 'Init',
                 'Thread error', 'Detect ip set', 'Unknown']

# (node, npu, check, value) set with mockctl -> (node, npu, check, substring of the raw line) expected in the report
PORT_FAULTS = [
    (('node2', 0, 'link', 'DOWN'), ('node2', 0, 'link', 'link status: DOWN')),
    (('node2', 1, 'net_health', 'Fault'), ('node2', 1, 'net_health', 'net health status: Fault')),
    (('node2', 2, 'ip', 'none'), ('node2', 2, 'ip', 'no ip was preset')),
    (('node2', 3, 'gateway', 'none'), ('node2', 3, 'gateway', 'no gateway was preset')),
    (('node2', 4, 'netdetect', 'none'), ('node2', 4, 'netdetect', '')),
    (('node2', 5, 'tls', '1'), ('node2', 5, 'tls_consistency', 'tls switch[1]')),
    (('node2', 6, 'ping', 'loss'), ('node1', 6, 'ping', '3 packets transmitted, 2 received')),
    (('node2', 7, 'ping', 'fail'), ('node1', 7, 'ping', '3 packets transmitted, 0 received')),
    (('node1', 5, 'device', 'invalid'), ('node1', 5, 'device', 'Get invalid device id.')),
    (('node1', 1, 'npu_health', 'Alarm'), ('node1', 1, 'npu_health', '')),
    (('node1', 2, 'busy', 'always'), ('node1', 2, 'tool', 'hccn_tool is busy')),
    (('node1', 4, 'hccn_conf', 'mismatch'), ('node1', 4, 'hccn_conf', 'address_4=')),
]


def set_faults(faults):
    lib.mockctl('fault', 'clear')
    for node, npu, check, value in faults:
        lib.mockctl('fault', 'set', '--node', node, '--npu', npu, '--check', check, '--value', value)


@pytest.fixture(scope='module', autouse=True)
def clear_faults_after():
    yield
    lib.mockctl('fault', 'clear')


@pytest.fixture(scope='module')
def port_round():
    # busy 2 on node1 NPU 3: the first two calls are busy, the retries must make it pass silently.
    set_faults([pair[0] for pair in PORT_FAULTS] + [('node1', 3, 'busy', '2')])
    return lib.playbook()


def _assert_named(run, node, npu, check, raw_part):
    hits = run.findings(node=node, npu=npu, check=check)
    assert hits, 'no %s finding for %s npu%s in:\n%s' % (check, node, npu, '\n'.join(run.report['summary']))
    assert any(raw_part in (h['raw'] or '') for h in hits), hits
    if raw_part:
        # The printed summary carries the same row: node, NPU, check and raw line.
        rows = [line for line in run.stdout.splitlines()
                if node in line and 'npu%s' % npu in line and check in line and raw_part in line]
        assert rows, 'summary row missing for %s npu%s %s' % (node, npu, check)


def test_port_faults_fail_the_play(port_round):
    assert port_round.rc != 0
    assert port_round.report['ok'] is False


@pytest.mark.parametrize('fault,expected', PORT_FAULTS, ids=['%s-npu%s-%s' % pair[0][:3] for pair in PORT_FAULTS])
def test_port_fault_is_named(port_round, fault, expected):
    _assert_named(port_round, *expected)


def test_link_down_also_breaks_the_pings_through_it(port_round):
    # node1 NPU 0 -> node2 NPU 0 crosses the DOWN link: the ping fails too and names its target.
    hits = (port_round.findings(node='node1', npu=0, check='ping')
            + port_round.findings(node='node2', npu=0, check='ping'))
    assert hits and all('node' in h['message'] for h in hits)


def test_busy_tool_is_retried_not_reported(port_round):
    assert port_round.findings(node='node1', npu=3) == []


def test_healthy_npus_are_not_reported(port_round):
    for node, npu in [('node1', 0), ('node1', 6), ('node1', 7)]:
        assert [f for f in port_round.findings(node=node, npu=npu) if f['check'] != 'ping'] == []


# The physical layer: the RoCE optical modules, link flaps since boot, the NPU-to-NPU topology (SIMULATED faults).
PHYSICAL_FAULTS = [
    (('node1', 0, 'optical', 'missing'), ('node1', 0, 'optical', 'present              : not present')),
    (('node1', 2, 'optical', 'rx_low'), ('node1', 2, 'optical', 'Rx Power0            : 0.0054 mW')),
    (('node2', 4, 'optical', 'temp_alarm'), ('node2', 4, 'optical', 'temperature          : 75 C')),
    (('node2', 6, 'link_flap', '5'), ('node2', 6, 'link_stat', '[devid 6]link up count       : 6')),
    (('node1', 3, 'topology', '6:SYS'), ('node1', 3, 'topology', 'NPU3 ')),
]
PHYSICAL_MESSAGES = {
    ('node1', 0, 'optical'): 'optical module not present',
    ('node1', 2, 'optical'): "RX power lanes 0, 1, 2, 3 0.0054 mW below the module's low threshold 0.1445 mW",
    ('node2', 4, 'optical'): "temperature 75 C above the module's high threshold 70 C",
    ('node2', 6, 'link_stat'): 'link went down 5 time(s) since boot',
    ('node1', 3, 'topology'): 'NPU 3 <-> NPU 6: SYS, expected HCCS',
}


@pytest.fixture(scope='module')
def physical_round():
    # 2 flaps on node1 NPU 5 stay under the default threshold (3): not reported.
    set_faults([pair[0] for pair in PHYSICAL_FAULTS] + [('node1', 5, 'link_flap', '2')])
    return lib.playbook()


@pytest.mark.parametrize('fault,expected', PHYSICAL_FAULTS,
                         ids=['%s-npu%s-%s' % pair[0][:3] for pair in PHYSICAL_FAULTS])
def test_physical_fault_is_named(physical_round, fault, expected):
    _assert_named(physical_round, *expected)
    node, npu, check = expected[:3]
    hits = physical_round.findings(node=node, npu=npu, check=check)
    assert any(PHYSICAL_MESSAGES[(node, npu, check)] in h['message'] for h in hits), hits


def test_physical_round_reports_nothing_else(physical_round):
    assert physical_round.rc != 0
    named = set((f['node'], f['npu'], f['check']) for f in physical_round.report['findings'])
    assert named == set(PHYSICAL_MESSAGES), physical_round.report['summary']


def test_flap_threshold_and_checks_are_the_operators():
    set_faults([('node1', 5, 'link_flap', '2'), ('node2', 1, 'optical', 'missing')])
    run = lib.playbook(extra_vars={'npu_network_link_flap_threshold': 1,
                                   'npu_network_checks': ['link', 'link_stat', 'topology']})
    assert [(f['node'], f['npu'], f['check']) for f in run.report['findings']] == [('node1', 5, 'link_stat')]


def test_topology_checks_only_the_pairs_an_instance_uses():
    set_faults([('node1', 3, 'topology', '6:SYS')])
    run = lib.playbook(extra_vars={'npu_network_npu_groups': [[0, 1, 2, 3], [4, 5, 6, 7]]})
    assert run.rc == 0 and run.report['ok'], run.report['summary']
    run = lib.playbook(extra_vars={'npu_network_npu_groups': [[2, 3, 6, 7]]})
    assert [(f['node'], f['npu'], f['check']) for f in run.report['findings']] == [('node1', 3, 'topology')]


@pytest.fixture(scope='module')
def health_round():
    slots = [('node1', i) for i in range(8)] + [('node2', 0)]
    set_faults([(node, npu, 'net_health', state) for (node, npu), state in zip(slots, HEALTH_STATES)])
    return lib.playbook(), dict(zip(HEALTH_STATES, slots))


@pytest.mark.parametrize('state', HEALTH_STATES)
def test_every_unhealthy_state_is_named(health_round, state):
    run, slots = health_round
    node, npu = slots[state]
    _assert_named(run, node, npu, 'net_health', 'net health status: %s' % state)


@pytest.fixture(scope='module')
def node_round():
    set_faults([('node2', 'all', 'driver', 'unloaded'), ('node1', 'all', 'hccn_conf', 'missing')])
    return lib.playbook()


def test_driver_not_loaded_is_named_once_for_the_node(node_round):
    hits = node_round.findings(node='node2', check='driver')
    assert len(hits) == 1 and 'dcmi module initialize failed' in hits[0]['raw']
    assert hits[0]['npu'] is None


def test_missing_hccn_conf_is_named(node_round):
    hits = node_round.findings(node='node1', check='hccn_conf')
    assert len(hits) == 1 and hits[0]['npu'] is None
    assert 'hccn.conf' in hits[0]['message']


def test_failures_can_be_warnings():
    set_faults([('node2', 3, 'link', 'DOWN')])
    run = lib.playbook(extra_vars={'npu_network_fail_on_error': False})
    assert run.rc == 0, run.stdout
    assert 'WARNING' in run.stdout
    assert run.findings(node='node2', npu=3, check='link')


def test_missing_hccn_tool_names_the_host():
    lib.mockctl('fault', 'clear')
    tool = '/usr/local/Ascend/driver/tools/hccn_tool'
    assert lib.docker_exec('kvpool-node2', 'mv', tool, tool + '.hidden').returncode == 0
    try:
        run = lib.playbook()
    finally:
        lib.docker_exec('kvpool-node2', 'mv', tool + '.hidden', tool)
    assert run.rc != 0
    hits = run.findings(node='node2', check='tool')
    assert hits and 'hccn_tool not found' in hits[0]['message'] and 'hccn_tool_path' in hits[0]['message']
    # node1 was still fully checked.
    assert run.findings(node='node1') == []


@pytest.mark.parametrize('extra,needle', [
    ({'npu_network_devices': [0, 99]}, 'npu_network_devices must be NPU physical ids 0-15'),
    ({'npu_network_devices': 'all'}, 'npu_network_devices'),
    ({'npu_network_ping_strategy': 'star'}, 'npu_network_ping_strategy'),
    ({'npu_network_checks': ['link', 'speed']}, 'npu_network_checks'),
    ({'npu_network_npu_groups': [[0, 1], [2, 16]]}, 'npu_network_npu_groups must be a list of lists of NPU ids'),
    ({'npu_network_npu_groups': [0, 1]}, 'npu_network_npu_groups'),
    ({'npu_network_link_flap_threshold': -1}, 'npu_network_link_flap_threshold'),
], ids=['device-out-of-range', 'devices-wrong-type', 'unknown-strategy', 'unknown-check', 'group-id-out-of-range',
        'groups-not-lists', 'negative-flap-threshold'])
def test_bad_input_is_rejected_naming_the_variable(extra, needle):
    lib.mockctl('fault', 'clear')
    run = lib.playbook(extra_vars=extra)
    assert run.rc != 0
    assert needle in run.stdout
    # Nothing ran past validation: no report was written.
    assert run.report is None
