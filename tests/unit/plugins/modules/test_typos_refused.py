# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Typos an operator makes (issue 32, "Typos accepted"), one test per module: an address with a port, a file mode
that YAML made a number, a negative timeout, a flag that contradicts a documented refusal. Each fails before
anything is written, started or sent, with a message that names the option, the value and the fix
(docs/bad-input.md). The service modules run over the in-memory service manager of service_harness.py."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import socket

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.ascend.kvpool.plugins.module_utils import _shared, _validate
from ansible_collections.ascend.kvpool.plugins.module_utils._errors import KvpoolError
from ansible_collections.ascend.kvpool.plugins.modules import (
    etcd_member, kvpool_benchmark, mooncake_config_file, preflight_facts, vllm_router,
)
from ansible_collections.ascend.kvpool.plugins.plugin_utils import vllm_plan
from ansible_collections.ascend.kvpool.tests.unit.messages import assert_names
from ansible_collections.ascend.kvpool.tests.unit.plugins.module_utils.vllm_guide import GUIDE
from ansible_collections.ascend.kvpool.tests.unit.plugins.modules import service_harness as svc
from ansible_collections.ascend.kvpool.tests.unit.plugins.modules.process_helpers import free_port

manager = svc.manager  # the fixture (vllm_server, mooncake_master)


def run_module(capsys, main, params):
    with patch_module_args(params):
        with pytest.raises(SystemExit):
            main()
    return json.loads(capsys.readouterr().out)


# --- the one rule of an address -----------------------------------------------------------------------------------
@pytest.mark.parametrize('address, carries', [
    ('127.0.0.1:8000', 'a port (:8000)'), ('[fd00::1]:2380', 'a port (:2380)'), ('http://10.0.0.1', 'a scheme'),
    ('10.0.0.1/24', 'a path or a prefix length'), ('10.0.0.1 ', 'a blank'), ('node1:http', 'a ":"'),
    ('--host', 'characters no host name has'), ('[node1]', 'not an IPv6 address'),
])
def test_an_address_that_carries_more_than_a_host_is_named(address, carries):
    assert carries in _shared.address_problem(address)
    with pytest.raises(KvpoolError) as err:
        _validate.host_address(address, 'host', 'port')
    assert_names(str(err.value), 'host=%r' % address, carries, 'give the address alone', 'port is set with port')


@pytest.mark.parametrize('address', ['127.0.0.1', '172.31.250.11', 'fd00::1', '[fd00::1]', 'fe80::1%eth0', 'node1',
                                     'node1.example.com', '0.0.0.0', '::', '', None])
def test_an_address_alone_passes(address):
    assert _shared.address_problem(address) == ''
    assert _validate.host_address(address, 'host') == address


# --- vllm_router ----------------------------------------------------------------------------------------------------
@pytest.fixture
def router_manager(monkeypatch, tmp_path):
    return svc.manager_behind(monkeypatch, tmp_path, (vllm_router,), 'vllm-router')


@pytest.mark.parametrize('check', [False, True])
@pytest.mark.parametrize('option, value, port_option', [
    ('host', '127.0.0.1:8000', 'port'), ('prometheus_host', '127.0.0.1:29000', 'prometheus_port'),
    ('host', 'http://127.0.0.1', 'port'),
])
def test_vllm_router_refuses_an_address_with_a_port_before_any_unit(router_manager, capsys, check, option, value,
                                                                    port_option):
    res = svc.run(vllm_router, capsys, check=check, binary=str(router_manager.tmp / 'vllm-router'),
                  worker_urls=['http://127.0.0.1:1'], port=free_port(), prometheus_port=free_port(),
                  ready_timeout=1, poll_interval=0.02, **{option: value})
    assert res.get('failed'), res
    assert_names(res['msg'], '%s=%r' % (option, value), 'give the address alone', port_option)
    assert router_manager.calls == [] and router_manager.text is None  # no unit written, enabled or started


def test_vllm_router_stops_whatever_its_address_says(router_manager, capsys):
    res = svc.run(vllm_router, capsys, state='stopped', host='127.0.0.1:8000', port=free_port(),
                  prometheus_port=free_port(), ready_timeout=1, poll_interval=0.02)
    assert not res.get('failed'), res.get('msg')


# --- etcd_member ----------------------------------------------------------------------------------------------------
def etcd(monkeypatch, capsys, tmp_path, **args):
    mgr = svc.Manager()
    monkeypatch.setattr(etcd_member, 'backend_for', lambda module, container=None: mgr)
    params = dict(name='node1', address='172.31.250.11', members=[{'name': 'node1', 'address': '172.31.250.11'}],
                  data_dir=str(tmp_path / 'etcd'), binary='/nonexistent/etcd', etcdctl='/nonexistent/etcdctl',
                  ready_timeout=1, poll_interval=0.02)
    params.update(args)
    res = svc.run(etcd_member, capsys, **params)
    assert mgr.calls == [] and mgr.text is None, mgr.calls  # nothing written nor started
    return res


@pytest.mark.parametrize('args, names', [
    (dict(address='172.31.250.11:2380', members=[{'name': 'node1', 'address': '172.31.250.11:2380'}]),
     ["address='172.31.250.11:2380'", 'a port (:2380)', 'client_port and peer_port']),
    (dict(members=[{'name': 'node1', 'address': '172.31.250.11'}, {'name': 'node2', 'address': '10.0.0.2:2380'}]),
     ['node2', '10.0.0.2:2380', 'a port (:2380)']),
    (dict(members=[{'name': 'node1', 'address': '172.31.250.11'},
                   {'name': 'node2', 'address': '10.0.0.2', 'peer_port': -5}]),
     ['node2', 'peer_port -5', 'kvpool_etcd_peer_port']),
    (dict(extra_args=['--auto-tls']), ['extra_args', '--auto-tls', 'client TLS']),
    (dict(extra_args=['-auto-tls=true']), ['--auto-tls', 'client TLS']),
    (dict(extra_args=['--trusted-ca-file=/etc/ca.pem']), ['--trusted-ca-file', 'client TLS']),
    (dict(extra_args=['--election-timeout=5000']), ['--election-timeout', 'module option']),
    (dict(env={'ETCD_AUTO_TLS': 'true'}), ['env', 'ETCD_AUTO_TLS', '--auto-tls', 'kvpool_etcd_environment']),
])
def test_etcd_member_refuses_a_port_in_an_address_and_client_tls_in_any_form(
        monkeypatch, capsys, tmp_path, args, names):
    res = etcd(monkeypatch, capsys, tmp_path, **args)
    assert res.get('failed'), res
    assert_names(res['msg'], *names)


# --- mooncake_master and vllm_server --------------------------------------------------------------------------------
@pytest.mark.parametrize('option, value, port_option', [
    ('rpc_address', '172.31.250.11:50088', 'port'), ('metrics_address', '172.31.250.11:9003', 'metrics_port'),
    ('health_host', '127.0.0.1:9003', 'port and metrics_port'),
])
def test_mooncake_master_refuses_an_address_with_a_port(manager, capsys, option, value, port_option):
    res = svc.master(manager, capsys, **{option: value})
    assert res.get('failed'), res
    assert_names(res['msg'], '%s=%r' % (option, value), 'a port', port_option)
    assert manager.calls == [] and manager.text is None


@pytest.mark.parametrize('option, value', [('host', '0.0.0.0:8000'), ('health_host', '127.0.0.1:8000')])
def test_vllm_server_refuses_an_address_with_a_port(manager, capsys, option, value):
    res = svc.vllm(capsys, wait=False, **{option: value})
    assert res.get('failed'), res
    assert_names(res['msg'], '%s=%r' % (option, value), 'a port (:8000)', 'port')
    assert manager.calls == [] and manager.text is None


def test_the_instance_plan_refuses_negative_ids_and_an_address_with_a_port():
    settings = dict(GUIDE, listen_host='172.31.250.11:8002', host_ip='172.31.250.11:29000')
    plan = vllm_plan.plan_instances([{'name': 'a', 'devices': [-1, 0], 'port': 8002, 'lookup_rpc_port': -5}],
                                    settings, 'node1')
    errors = '\n'.join(plan['errors'])
    assert_names(errors, 'node1: instance a: devices=[-1, 0]', 'got -1', 'lookup_rpc_port=-5', '0 or more',
                 "vllm_instance_listen_host='172.31.250.11:8002'", 'a port (:8002)',
                 "node1: vllm_instance_host_ip='172.31.250.11:29000'", 'a port (:29000)')
    # a stopped instance is never refused for its address (a teardown must not fail on a typo there)
    stopped = vllm_plan.plan_instances([{'name': 'a', 'devices': [0], 'port': 8002, 'state': 'stopped'}], settings,
                                       'node1')
    assert not [e for e in stopped['errors'] if 'listen_host' in e], stopped['errors']


# --- mooncake_config_file -------------------------------------------------------------------------------------------
@pytest.mark.parametrize('option, value', [('mode', 420), ('mode', 644), ('directory_mode', 493), ('mode', True)])
def test_mooncake_config_file_refuses_a_mode_that_yaml_made_a_number(capsys, tmp_path, option, value):
    path = tmp_path / 'etc' / 'mooncake.json'
    res = run_module(capsys, mooncake_config_file.main,
                     {'path': str(path), 'config': {'protocol': 'tcp'}, option: value})
    assert res.get('failed'), res
    assert_names(res['msg'], option, repr(value), 'not an octal string', '"0644"')
    assert not path.exists() and not path.parent.exists()


def test_mooncake_config_file_still_takes_a_quoted_mode(capsys, tmp_path):
    path = tmp_path / 'mooncake.json'
    res = run_module(capsys, mooncake_config_file.main,
                     {'path': str(path), 'config': {'protocol': 'tcp'}, 'mode': '0600'})
    assert res['changed'] and (path.stat().st_mode & 0o7777) == 0o600, res


# --- kvpool_benchmark -----------------------------------------------------------------------------------------------
def closed_url():
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return 'http://127.0.0.1:%d' % sock.getsockname()[1]


@pytest.mark.parametrize('option, value', [('aisbench_timeout', -5), ('aisbench_timeout', 0),
                                           ('request_timeout', float('nan')), ('request_timeout', float('inf')),
                                           ('temperature', float('nan'))])
def test_kvpool_benchmark_refuses_a_timeout_that_would_never_end(capsys, option, value):
    res = run_module(capsys, kvpool_benchmark.main, {'url': closed_url(), 'dataset_seed': 1, option: value})
    assert res.get('failed'), res
    assert res['msg'].startswith(option), res['msg']


# --- preflight_facts ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize('value', [0, -1, float('nan'), 61])
def test_preflight_facts_refuses_a_connect_timeout_out_of_range(capsys, value):
    res = run_module(capsys, preflight_facts.main, {'connect': ['127.0.0.1:1'], 'connect_timeout': value})
    assert res.get('failed'), res
    assert_names(res['msg'], 'connect_timeout', 'preflight_connect_timeout')
