"""Healthy SIMULATED two-node cluster: what an operator checks after `ansible-playbook verify_network.yml`."""

import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / 'resources'))
import kvpool_testlib as lib  # noqa: E402

# Files under /etc, /var/lib and /root changed since the node started, with their modification times.
CHANGED_FILES = 'find /etc /var/lib /root -xdev -newer /proc/1 -type f -printf "%p %T@\\n" 2>/dev/null | sort'


@pytest.fixture(scope='module')
def run():
    lib.mockctl('fault', 'clear')
    return lib.playbook()


def test_healthy_cluster_passes(run):
    assert run.rc == 0, run.stdout
    assert run.report['ok'] is True
    assert run.report['findings'] == []


def test_every_npu_and_pair_was_checked(run):
    assert run.report['nodes'] == ['node1', 'node2']
    assert run.report['npus_checked'] == 16
    # same_index: NPU i of each node pings NPU i of the other node.
    assert run.report['pings'] == 16


def test_summary_is_printed_once(run):
    assert run.stdout.count('NPU network verification') == 1
    assert 'all checks passed' in run.stdout
    assert 'SIMULATED' in run.stdout


def test_second_run_changes_nothing(run):
    again = lib.playbook()
    recap = again.recap()
    assert again.rc == 0, again.stdout
    assert set(recap) >= {'node1', 'node2'}
    assert all(r['changed'] == 0 and r['failed'] == 0 for r in recap.values()), recap


def test_check_mode_is_clean_and_still_checks(run):
    checked = lib.playbook(check=True)
    recap = checked.recap()
    assert checked.rc == 0, checked.stdout
    assert all(r['changed'] == 0 and r['failed'] == 0 for r in recap.values()), recap
    # Read-only probes run in check mode too, so --check tells the truth about the network.
    assert checked.report['npus_checked'] == 16 and checked.report['pings'] == 16


def test_an_operators_check_mode_writes_no_report_and_says_where():
    # lib.playbook asks for the report of a --check run (npu_network_report_in_check_mode); an operator's does not.
    checked = lib.playbook(check=True, extra_vars={'npu_network_report_in_check_mode': False})
    assert checked.rc == 0, checked.stdout
    assert checked.report is None
    assert re.search(r'16\s+NPU\(s\),\s+16\s+cross-node\s+ping\(s\)', checked.stdout), checked.stdout[-3000:]
    assert re.search(r'check\s+mode:\s+no\s+report\s+written', checked.stdout), checked.stdout[-3000:]


def test_verification_writes_nothing_on_the_nodes():
    # The verification reads only: a full run leaves /etc, /var/lib and /root of every node as they were.
    nodes = [lib.node('node1'), lib.node('node2')]
    before = [n.check_output(CHANGED_FILES) for n in nodes]
    assert lib.playbook().rc == 0
    assert [n.check_output(CHANGED_FILES) for n in nodes] == before
