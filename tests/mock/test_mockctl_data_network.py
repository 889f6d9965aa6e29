# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""mockctl data-network (issue 39): the SIMULATED data-plane network gives node k 172.31.251.<10+k> beside its
management address; `up` attaches only what is not attached right (run twice, it changes nothing). What docker
prints is parsed without docker; the docker steps themselves run in molecule/mooncake."""

import ipaddress
from pathlib import Path

import pytest

from mockctl_module import mockctl


def test_data_plane_addresses_are_a_second_subnet_with_the_management_host_part():
    management, data = ipaddress.ip_network(mockctl.SUBNET), ipaddress.ip_network(mockctl.DATA_SUBNET)
    assert not management.overlaps(data) and mockctl.DATA_NETWORK != mockctl.NETWORK
    for k in (1, 2, 64):
        assert ipaddress.ip_address(mockctl.data_ip(k)) in data
        assert mockctl.data_ip(k).rsplit('.', 1)[1] == mockctl.node_ip(k).rsplit('.', 1)[1]


@pytest.mark.parametrize('printed, address', [
    ('-\n', None),                                # not attached
    ('', None),
    ('172.31.251.11|172.31.251.11\n', '172.31.251.11'),
    ('172.31.251.12|\n', '172.31.251.12'),        # a stopped container: its configured address only
    ('|172.31.251.40\n', '172.31.251.40'),        # attached without a fixed address (by hand)
    ('|\n', ''),
])
def test_the_attachment_docker_prints_is_read(printed, address):
    assert mockctl.parse_data_attachment(printed) == address


def test_up_connects_what_is_missing_fixes_a_wrong_address_and_keeps_the_rest():
    plan = mockctl.data_network_plan({'kvpool-node2': '172.31.251.40', 'kvpool-node10': None,
                                      'kvpool-node1': '172.31.251.11', 'kvpool-node3': ''})
    assert plan == [('kvpool-node1', 'keep', '172.31.251.11'), ('kvpool-node2', 'reconnect', '172.31.251.12'),
                    ('kvpool-node3', 'reconnect', '172.31.251.13'), ('kvpool-node10', 'connect', '172.31.251.20')]
    again = {name: address for name, action, address in plan}
    assert {action for dummy, action, dummy2 in mockctl.data_network_plan(again)} == {'keep'}


def test_the_format_asks_docker_for_the_data_network_by_name():
    assert '"%s"' % mockctl.DATA_NETWORK in mockctl.DATA_ATTACHMENT_FORMAT


def test_the_subcommand_parses_up_and_down_only():
    parser = mockctl.build_parser()
    assert parser.parse_args(['data-network', 'up']).func is mockctl.cmd_data_network
    assert parser.parse_args(['data-network', 'down']).action == 'down'
    with pytest.raises(SystemExit):
        parser.parse_args(['data-network', 'sideways'])


class FakeDocker:
    """docker as mockctl calls it, answering from a dict of attachments (no docker engine needed)."""

    def __init__(self, attached, network=True, subnet=None):
        self.attached, self.network, self.calls = dict(attached), network, []
        self.subnet = subnet or mockctl.DATA_SUBNET

    def __call__(self, *args, check=True, **kwargs):
        self.calls.append(args)
        out, rc = '', 0
        if args[:2] == ('network', 'inspect'):
            rc, out = (0, self.subnet + ' ') if self.network else (1, '')
        elif args[:2] == ('network', 'create'):
            self.network = True
        elif args[:2] == ('network', 'rm'):
            self.network = False
        elif args[:2] == ('network', 'connect'):
            self.attached[args[-1]] = args[args.index('--ip') + 1]
        elif args[:2] == ('network', 'disconnect'):
            self.attached[args[-1]] = None
        elif args[0] == 'ps':
            out = '\n'.join(self.attached)
        elif args[0] == 'inspect':
            have = self.attached[args[-1]]
            out = '-' if have is None else '%s|%s' % (have, have)
        return type('Proc', (), {'returncode': rc, 'stdout': out, 'stderr': ''})()

    def changes(self):
        changing = (('network', 'connect'), ('network', 'disconnect'), ('network', 'create'), ('network', 'rm'))
        return [c[:2] + c[-1:] for c in self.calls if c[:2] in changing]


def run(monkeypatch, fake, action):
    monkeypatch.setattr(mockctl, 'docker', fake)
    mockctl.cmd_data_network(mockctl.Paths('/nonexistent'), mockctl.build_parser().parse_args(['data-network', action]))


def test_up_creates_an_internal_network_and_attaches_each_node_once(monkeypatch, capsys):
    fake = FakeDocker({'kvpool-node1': None, 'kvpool-node2': None}, network=False)
    run(monkeypatch, fake, 'up')
    [create] = [c for c in fake.calls if c[:2] == ('network', 'create')]
    assert '--internal' in create and mockctl.DATA_SUBNET in create and create[-1] == mockctl.DATA_NETWORK
    assert fake.attached == {'kvpool-node1': '172.31.251.11', 'kvpool-node2': '172.31.251.12'}
    assert 'SIMULATED' in capsys.readouterr().out
    fake.calls.clear()
    run(monkeypatch, fake, 'up')                                 # again: nothing changes
    assert fake.changes() == []


def test_up_refuses_a_network_of_that_name_on_another_subnet(monkeypatch):
    fake = FakeDocker({'kvpool-node1': None}, subnet='10.9.0.0/24')
    with pytest.raises(mockctl.MockError) as err:
        run(monkeypatch, fake, 'up')
    assert mockctl.DATA_NETWORK in str(err.value) and '10.9.0.0/24' in str(err.value)
    assert 'data-network down' in str(err.value) and fake.changes() == []


def test_up_without_nodes_names_the_command_that_starts_them(monkeypatch):
    with pytest.raises(mockctl.MockError) as err:
        run(monkeypatch, FakeDocker({}), 'up')
    assert 'mockctl up --nodes' in str(err.value)


def test_down_detaches_the_nodes_and_removes_the_network_and_is_quiet_when_absent(monkeypatch):
    fake = FakeDocker({'kvpool-node1': '172.31.251.11', 'kvpool-node2': None})
    run(monkeypatch, fake, 'down')
    assert fake.changes() == [('network', 'disconnect', 'kvpool-node1'), ('network', 'rm', mockctl.DATA_NETWORK)]
    fake.calls.clear()
    run(monkeypatch, fake, 'down')
    assert fake.changes() == []


def test_the_mooncake_scenario_sets_each_nodes_data_plane_address_to_what_mockctl_gives_it():
    import yaml
    scenario = Path(__file__).resolve().parents[2] / 'molecule' / 'mooncake'
    for k in (1, 2):
        host_vars = yaml.safe_load((scenario / 'host_vars' / ('node%d.yml' % k)).read_text())
        assert host_vars['mooncake_config_node_address'] == mockctl.data_ip(k) != mockctl.node_ip(k)
    converge = (scenario / 'converge.yml').read_text()
    assert 'data-network' in converge and 'data-network' in (scenario / 'cleanup.yml').read_text()
