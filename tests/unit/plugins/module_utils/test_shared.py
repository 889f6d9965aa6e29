# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The shared values and address rules (module_utils/_shared.py), and that their copies elsewhere agree: the role
kvpool_defaults values and the module documentation."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from pathlib import Path

import pytest
import yaml

from ansible_collections.ascend.kvpool.plugins.module_utils import _shared
from ansible_collections.ascend.kvpool.plugins.modules import etcd_member, mooncake_master, vllm_router

ROOT = Path(__file__).resolve().parents[4]


@pytest.mark.parametrize('host,port,expected', [
    ('90.90.100.188', 50088, '90.90.100.188:50088'),
    ('node1', 50051, 'node1:50051'),
    ('fd00::1', 50088, '[fd00::1]:50088'),
    ('[fd00::1]', 50088, '[fd00::1]:50088'),      # already in brackets: kept
    (' 10.0.0.5 ', '9003', '10.0.0.5:9003'),      # templated values: blanks dropped, port given as text
])
def test_format_host_port(host, port, expected):
    assert _shared.format_host_port(host, port) == expected


@pytest.mark.parametrize('addr,host', [(None, '127.0.0.1'), ('', '127.0.0.1'), ('0.0.0.0', '127.0.0.1'),
                                       ('::', '127.0.0.1'), ('[::]', '127.0.0.1'), ('*', '127.0.0.1'),
                                       ('10.0.0.5', '10.0.0.5'), ('[fd00::1]', 'fd00::1')])
def test_probe_host_polls_a_wildcard_at_loopback(addr, host):
    assert _shared.probe_host(addr) == host


@pytest.mark.parametrize('addr,node,expected', [
    ('', '10.0.0.1', '10.0.0.1'), (None, 'node1', 'node1'), ('0.0.0.0', '10.0.0.1', '10.0.0.1'),
    ('::', 'fd00::3', 'fd00::3'), ('*', '[fd00::3]', 'fd00::3'), ('10.0.0.9', '10.0.0.1', '10.0.0.9'),
    ('[fd00::9]', '10.0.0.1', 'fd00::9'), ('127.0.0.1', '10.0.0.1', '127.0.0.1'),
])
def test_reach_address_takes_the_node_address_for_a_wildcard(addr, node, expected):
    assert _shared.reach_address(addr, node) == expected


@pytest.mark.parametrize('addr,expected', [
    ('127.0.0.1', True), ('127.1.2.3', True), ('::1', True), ('[::1]', True), ('0:0:0:0:0:0:0:1', True),
    ('::ffff:127.0.0.1', True), ('localhost', True), ('LOCALHOST', True), ('ip6-localhost', True),
    ('localhost.localdomain', True), (' localhost ', True),
    ('10.0.0.1', False), ('fd00::1', False), ('0.0.0.0', False), ('::', False), ('', False), (None, False),
    ('node1', False), ('localhost-node', False), ('128.0.0.1', False),
])
def test_is_loopback_one_rule_for_every_spelling(addr, expected):
    assert _shared.is_loopback(addr) is expected


def test_the_router_ports_agree_with_kvpool_defaults_and_the_module_docs():
    defaults = yaml.safe_load((ROOT / 'roles' / 'kvpool_defaults' / 'defaults' / 'main.yml').read_text())
    assert defaults['kvpool_defaults_router_port'] == _shared.ROUTER_PORT
    assert defaults['kvpool_defaults_router_prometheus_port'] == _shared.ROUTER_PROMETHEUS_PORT
    options = yaml.safe_load(vllm_router.DOCUMENTATION)['options']
    assert options['port']['default'] == _shared.ROUTER_PORT
    assert options['prometheus_port']['default'] == _shared.ROUTER_PROMETHEUS_PORT


def test_the_master_and_etcd_ports_agree_with_kvpool_defaults_and_the_module_docs():
    defaults = yaml.safe_load((ROOT / 'roles' / 'kvpool_defaults' / 'defaults' / 'main.yml').read_text())
    assert defaults['kvpool_defaults_master_port'] == _shared.MASTER_PORT
    assert defaults['kvpool_defaults_master_metrics_port'] == _shared.MASTER_METRICS_PORT
    assert defaults['kvpool_defaults_etcd_client_port'] == _shared.ETCD_CLIENT_PORT
    assert defaults['kvpool_defaults_etcd_peer_port'] == _shared.ETCD_PEER_PORT
    master = yaml.safe_load(mooncake_master.DOCUMENTATION)['options']
    assert (master['port']['default'], master['metrics_port']['default']) == (_shared.MASTER_PORT,
                                                                              _shared.MASTER_METRICS_PORT)
    etcd = yaml.safe_load(etcd_member.DOCUMENTATION)['options']
    assert (etcd['client_port']['default'], etcd['peer_port']['default']) == (_shared.ETCD_CLIENT_PORT,
                                                                              _shared.ETCD_PEER_PORT)


@pytest.mark.parametrize('value, expected', [
    (1, True), (65535, True), ('8002', True), (' 8002 ', True), (0, False), (65536, False), (-1, False),
    (True, False), (8002.0, False), ('80.5', False), ('', False), (None, False), ('x', False),
])
def test_is_port_one_rule_for_every_reader(value, expected):
    assert _shared.is_port(value) is expected


def test_the_name_rule_is_one_for_instances_and_etcd():
    from ansible_collections.ascend.kvpool.plugins.module_utils import _etcd, _vllm
    assert _vllm.NAME_RE is _shared.NAME_RE is _etcd.NAME_RE
