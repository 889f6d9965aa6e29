# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""mooncake_master against a stand-in master process on this host (and through a stand-in `docker exec`).

The stand-in is a small Python program with the real master's surface that matters here: gflags-style
``--name=value`` arguments (an unknown flag exits with gflags' message), the RPC port bound a moment after the
start, and ``GET /health`` on the metrics port. The module really starts, polls, restarts and stops it.
The real binary is exercised by the molecule scenario ``mooncake`` on the mock cluster.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import signal
import socket
import sys
import time

import pytest
from ansible.module_utils.testing import patch_module_args

from ansible_collections.ascend.kvpool.plugins.module_utils import _proc
from ansible_collections.ascend.kvpool.plugins.modules import mooncake_master
from ansible_collections.ascend.kvpool.tests.unit.plugins.modules.process_helpers import FAKE_DOCKER, free_port

FAKE_MASTER = r'''#!%(python)s
import os, socket, sys, threading, time
from http.server import BaseHTTPRequestHandler, HTTPServer
KNOWN = {"port", "rpc_port", "metrics_port", "eviction_high_watermark_ratio", "eviction_ratio", "max_threads",
         "client_ttl", "default_kv_lease_ttl", "enable_ha", "etcd_endpoints", "enable_http_metadata_server",
         "rpc_address", "metrics_host"}
if os.environ.get("FAKE_NO_METRICS_HOST"):  # a release older than the flag
    KNOWN.discard("metrics_host")
flags = {}
for arg in sys.argv[1:]:
    name, _, value = arg.lstrip("-").partition("=")
    if name not in KNOWN:
        print("ERROR: unknown command line flag '%%s'" %% name, flush=True)
        sys.exit(1)
    flags[name] = value
ratio = float(flags.get("eviction_ratio", "0.05"))
if not 0 <= ratio <= 1:
    print("F1129 17:45:56.772758  1557 master.cpp:173] Mem eviction ratio must be between 0.0 and 1.0", flush=True)
    sys.exit(134)
print("I1129 17:37:04.280807 %%d master.cpp:1522] Master service started on port %%s" %% (os.getpid(), flags["port"]),
      flush=True)
health = int(os.environ.get("FAKE_HEALTH_STATUS", "200"))
class H(BaseHTTPRequestHandler):
    def do_GET(self):
        body = b'{"status":"ok"}' if self.path == "/health" else b"master_key_count 0\n"
        self.send_response(health if self.path == "/health" else 200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
# Each server binds its address (the real default of both is 0.0.0.0; loopback keeps the test private).
srv = HTTPServer((flags.get("metrics_host", "127.0.0.1"), int(flags.get("metrics_port", "9003"))), H)
threading.Thread(target=srv.serve_forever, daemon=True).start()
time.sleep(0.15)  # the real master logs "started" before it binds the RPC port
rpc = socket.socket()
rpc.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
rpc.bind((flags.get("rpc_address", "127.0.0.1"), int(flags["port"])))
rpc.listen(16)
while True:
    conn, _ = rpc.accept()
    conn.close()
'''


@pytest.fixture
def env(tmp_path, monkeypatch):
    binary = tmp_path / 'bin' / 'mooncake_master'
    binary.parent.mkdir()
    binary.write_text(FAKE_MASTER % {'python': sys.executable})
    binary.chmod(0o755)
    docker = tmp_path / 'bin' / 'docker'
    docker.write_text(FAKE_DOCKER % {'log': tmp_path / 'docker.log'})
    docker.chmod(0o755)
    monkeypatch.setenv('PATH', '%s:%s' % (binary.parent, os.environ.get('PATH', '')))
    ports = {'port': free_port(), 'metrics_port': free_port()}
    env = {'tmp': tmp_path, 'state_dir': str(tmp_path / 'state'), 'ports': ports, 'binary': str(binary)}
    yield env
    # leave nothing running
    target = _proc.ProcessTarget(None)
    pid = _proc.parse_pid(target.read_file(os.path.join(env['state_dir'], 'mooncake_master.pid')))
    if pid:
        try:
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass


def run(env, capsys, check=False, diff=False, **args):
    params = dict(state_dir=env['state_dir'], ready_timeout=10, poll_interval=0.02, stop_timeout=5, **env['ports'])
    params.update(args)
    if check:
        params['_ansible_check_mode'] = True
    if diff:
        params['_ansible_diff'] = True
    with patch_module_args(params):
        with pytest.raises(SystemExit):
            mooncake_master.main()
    return json.loads(capsys.readouterr().out)


def alive(pid):
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    try:
        with open('/proc/%d/status' % pid) as fh:
            return not _proc.is_gone(*_proc.parse_status(fh.read()))
    except (IOError, OSError):
        return False


def test_start_is_ready_and_recorded(env, capsys):
    res = run(env, capsys)
    assert res['changed'] and res['action'] == 'started' and res['state'] == 'running'
    assert res['argv'] == [env['binary'], '--port=%d' % env['ports']['port'],
                           '--metrics_port=%d' % env['ports']['metrics_port'],
                           '--eviction_high_watermark_ratio=0.95', '--eviction_ratio=0.05']
    assert alive(res['pid'])
    assert _proc.tcp_open('127.0.0.1', env['ports']['port'])      # ready means the RPC port accepts TCP ...
    assert res['health'] == '{"status":"ok"}'                      # ... and /health answered 200
    assert 0.1 < res['ready_seconds'] < 5
    assert res['endpoints']['rpc'] == '127.0.0.1:%d' % env['ports']['port']
    with open(os.path.join(env['state_dir'], 'settings.json')) as fh:
        recorded = json.load(fh)
    assert recorded['fingerprint'] == res['fingerprint'] and recorded['argv'] == res['argv']
    with open(res['log_path']) as fh:
        assert 'Master service started' in fh.read()


def test_same_settings_are_ok_and_check_mode_changes_nothing(env, capsys):
    first = run(env, capsys)
    again = run(env, capsys)
    assert not again['changed'] and again['action'] == 'none' and again['pid'] == first['pid']
    checked = run(env, capsys, check=True, diff=True, eviction_ratio=0.1)
    assert checked['changed'] and checked['action'] == 'restarted' and checked['reason'] == 'settings changed'
    assert '-  --eviction_ratio=0.05' not in checked['diff']['before']  # texts, not a unified diff
    assert '  --eviction_ratio=0.05\n' in checked['diff']['before']
    assert '  --eviction_ratio=0.1\n' in checked['diff']['after']
    assert checked['pid'] == first['pid'] and alive(first['pid'])
    assert not run(env, capsys)['changed']                         # check mode left the old settings


def test_changed_setting_restarts_with_a_diff(env, capsys):
    first = run(env, capsys)
    res = run(env, capsys, diff=True, eviction_ratio=0.1)
    assert res['changed'] and res['action'] == 'restarted' and res['reason'] == 'settings changed'
    assert res['pid'] and res['pid'] != first['pid'] and not alive(first['pid']) and alive(res['pid']), res.get('msg')
    assert '--eviction_ratio=0.1' in res['argv']
    assert '--eviction_ratio=0.05' in res['diff']['before'] and '--eviction_ratio=0.1' in res['diff']['after']
    assert not run(env, capsys, eviction_ratio=0.1)['changed']


def test_killed_master_is_started_again(env, capsys):
    first = run(env, capsys)
    os.killpg(first['pid'], signal.SIGKILL)
    _proc.wait_until([('dead', lambda: not alive(first['pid']))], 5, 0.02)
    res = run(env, capsys)
    assert res['changed'] and res['action'] == 'started' and res['reason'].startswith('not running'), res.get('msg')
    assert alive(res['pid'])


def test_restarted_always_restarts(env, capsys):
    first = run(env, capsys)
    res = run(env, capsys, state='restarted')
    assert res['changed'] and res['action'] == 'restarted' and res['pid'] != first['pid']


def test_stop_and_stop_again(env, capsys):
    first = run(env, capsys)
    checked = run(env, capsys, check=True, state='stopped')
    assert checked['changed'] and alive(first['pid'])
    res = run(env, capsys, state='stopped', diff=True)
    assert res['changed'] and res['action'] == 'stopped' and res['state'] == 'stopped'
    assert res['diff']['after'] == 'state: stopped\n'
    assert _proc.wait_until([('gone', lambda: not alive(first['pid']))], 5, 0.02)['ready']
    again = run(env, capsys, state='stopped')
    assert not again['changed'] and again['action'] == 'none'


def test_listens_where_it_is_told_and_is_polled_there(env, capsys):
    # Two loopback addresses other than 127.0.0.1: the polls reach the master only at its own addresses.
    res = run(env, capsys, rpc_address='127.0.0.2', metrics_address='127.0.0.3')
    assert res['changed'] and res['action'] == 'started' and res['health'] == '{"status":"ok"}', res.get('msg')
    assert res['argv'][1:4] == ['--port=%d' % env['ports']['port'], '--rpc_address=127.0.0.2',
                                '--metrics_port=%d' % env['ports']['metrics_port']]
    assert res['argv'][4] == '--metrics_host=127.0.0.3'
    assert res['endpoints'] == {
        'rpc': '127.0.0.2:%d' % env['ports']['port'],
        'metrics': 'http://127.0.0.3:%d/metrics' % env['ports']['metrics_port'],
        'health': 'http://127.0.0.3:%d/health' % env['ports']['metrics_port']}
    assert not _proc.tcp_open('127.0.0.1', env['ports']['port'], timeout=0.3)
    assert not _proc.tcp_open('127.0.0.1', env['ports']['metrics_port'], timeout=0.3)
    again = run(env, capsys, rpc_address='127.0.0.2', metrics_address='127.0.0.3')
    assert not again['changed'] and again['health'] == '{"status":"ok"}'
    # Without metrics_address the health endpoint is polled at the RPC address.
    moved = run(env, capsys, rpc_address='127.0.0.2', metrics_address='', diff=True)
    assert moved['changed'] and moved['endpoints']['health'] == 'http://127.0.0.2:%d/health' % \
        env['ports']['metrics_port'], moved.get('msg')
    assert '--metrics_host=127.0.0.3' in moved['diff']['before'] and 'metrics_host' not in moved['diff']['after']


def test_a_release_without_metrics_host_names_the_fix(env, capsys, monkeypatch):
    monkeypatch.setenv('FAKE_NO_METRICS_HOST', '1')
    res = run(env, capsys, metrics_address='127.0.0.1')
    assert res['failed'] and "(error: ERROR: unknown command line flag 'metrics_host')" in res['msg']
    assert 'mooncake_master_metrics_address: ""' in res['msg']
    assert run(env, capsys)['action'] == 'started'  # unset: the flag is not written


def test_failed_start_returns_the_log_tail(env, capsys):
    res = run(env, capsys, extra_args=['--no_such_flag=1'])
    assert res['failed'] and not res['changed']
    assert 'exited right after the start' in res['msg']
    assert "ERROR: unknown command line flag 'no_such_flag'" in res['msg']
    res = run(env, capsys, extra_args=['--eviction_ratio=3'])
    assert '(error: F1129' in res['msg'] and 'Mem eviction ratio must be between 0.0 and 1.0' in res['msg']


def test_unhealthy_master_times_out_and_is_stopped(env, capsys, monkeypatch):
    monkeypatch.setenv('FAKE_HEALTH_STATUS', '503')
    started = time.monotonic()
    res = run(env, capsys, ready_timeout=1)
    assert res['failed'] and 'was not ready after 1.0 s' in res['msg'] and '/health -> 200' in res['msg']
    assert time.monotonic() - started < 8
    assert res['state'] == 'stopped'


def test_port_taken_by_someone_else(env, capsys):
    squatter = socket.socket()
    squatter.bind(('127.0.0.1', env['ports']['port']))
    squatter.listen(1)
    try:
        res = run(env, capsys)
    finally:
        squatter.close()
    assert res['failed'] and 'already accepts connections' in res['msg'] and 'master started by hand' in res['msg']
    assert not res['changed']


def test_missing_binary_and_bad_params(env, capsys):
    res = run(env, capsys, binary='no_such_mooncake_master')
    assert res['failed'] and 'no_such_mooncake_master not found in host' in res['msg']
    assert 'mooncake_install' in res['msg']
    assert 'between 0 and 1' in run(env, capsys, eviction_ratio=1.5)['msg']
    assert 'different ports' in run(env, capsys, port=9100, metrics_port=9100)['msg']
    res = run(env, capsys, enable_ha=True, etcd_endpoints=['e1:2379'])
    assert res['failed'] and 'rpc_address' in res['msg']


def test_inside_a_container_through_docker_exec(env, capsys):
    res = run(env, capsys, container='vllm-ascend')
    assert res['changed'] and res['action'] == 'started' and alive(res['pid'])
    with open(str(env['tmp'] / 'docker.log')) as fh:
        calls = fh.read().splitlines()
    assert calls[0].startswith('inspect --format')
    assert any(c.startswith('exec -i vllm-ascend sh -c') and 'kvpool-start' in c for c in calls)
    assert not run(env, capsys, container='vllm-ascend')['changed']
    res = run(env, capsys, container='gone')
    assert res['failed'] and 'container gone not found' in res['msg']
    stopped = run(env, capsys, container='vllm-ascend', state='stopped')
    assert stopped['changed']
