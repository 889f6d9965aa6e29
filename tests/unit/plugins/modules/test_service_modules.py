# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""vllm_server and mooncake_master as modules, over an in-memory service manager.

What each module keeps of its own on the lifecycle engine: its input checks (which fail before the service manager
is touched), the API key's path (the secret file only, never the unit, the output or a command line), the master's
flag spellings per Mooncake version, and the health gate (polled against a small HTTP stand-in on this host that
guards /v1/* with the key, as vLLM does). systemd and docker themselves are exercised on the mock cluster
(molecule scenarios mooncake and instances).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from ansible.module_utils.basic import AnsibleModule

from ansible_collections.ascend.kvpool.plugins.modules import mooncake_master, vllm_server
from ansible_collections.ascend.kvpool.tests.unit.messages import assert_names
from ansible_collections.ascend.kvpool.tests.unit.plugins.modules import service_harness
from ansible_collections.ascend.kvpool.tests.unit.plugins.modules.process_helpers import free_port
from ansible_collections.ascend.kvpool.tests.unit.plugins.modules.service_harness import master, vllm

KEY = 'sk-unit-test-key-0123456789'
OTHER_KEY = 'sk-unit-test-key-abcdefghij'
manager = service_harness.manager  # the fixture: the in-memory service manager, patched into both modules


@pytest.fixture
def stand_in(manager):
    """The instance the unit runs: /health, /v1/models (listing qwen; 401 without the key when one is set).
    It listens once the manager has started the unit (before, a listener on the port is somebody else's)."""
    state = {'key': None, 'port': free_port(), 'srv': None}

    class H(BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path == '/health':
                code, body = 200, b'{"status":"ok"}'
            elif state['key'] and self.headers.get('Authorization') != 'Bearer ' + state['key']:
                code, body = 401, b'{"error": "Unauthorized"}'
            elif self.path == '/v1/models':
                code, body = 200, json.dumps({'object': 'list', 'data': [{'id': 'qwen'}]}).encode()
            else:
                code, body = 404, b''
            self.send_response(code)
            self.send_header('Content-Length', str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    def start():
        if state['srv'] is None:
            state['srv'] = ThreadingHTTPServer(('127.0.0.1', state['port']), H)
            thread = threading.Thread(target=state['srv'].serve_forever, kwargs={'poll_interval': 0.05})
            thread.daemon = True
            thread.start()
    manager.on_start = start
    yield state
    if state['srv'] is not None:
        state['srv'].shutdown()
        state['srv'].server_close()


# --- vllm_server ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize('args, needle', [
    ({'visible_devices': [0, 1], 'tensor_parallel_size': 4}, 'does not match the 2 NPU(s) [0, 1] of visible_devices'),
    ({'name': 'bad name'}, 'letters, digits'),
    ({'port': 70000}, 'TCP port'),
    ({'serve_flags': {'gpu_memory_utilization': 1.5}}, 'serve_flags.gpu_memory_utilization'),
    ({'env': {'BAD-NAME': '1'}}, 'not valid environment variable names'),
    ({'binary': 'no-such-vllm'}, 'no-such-vllm not found on the host'),
    ({'binary': '/nonexistent/bin/vllm'}, '/nonexistent/bin/vllm not found on the host'),
    ({'restart_limit_burst': 0}, 'restart_limit_burst=0 must be at least 1'),
])
def test_bad_parameters_fail_before_any_unit_is_written(manager, capsys, args, needle):
    res = vllm(capsys, **args)
    assert res['failed'] and needle in res['msg'], res['msg']
    assert manager.calls == [] and manager.text is None


@pytest.mark.parametrize('args, needle', [
    ({'env': {'VLLM_API_KEY': KEY}}, 'VLLM_API_KEY in the environment'),
    ({'extra_args': ['--api-key', KEY]}, '--api-key in the arguments'),
])
def test_a_key_outside_api_key_is_refused_and_masked(manager, capsys, args, needle):
    res = vllm(capsys, **args)
    assert res['failed'] and needle in res['msg'] and 'set the API key with api_key' in res['msg']
    assert KEY not in json.dumps(res) and manager.calls == []


def test_api_key_is_a_no_log_option(monkeypatch):
    specs = {}

    class Capture(AnsibleModule):
        def __init__(self, *a, **kw):
            specs.update(kw['argument_spec'])
            raise SystemExit(0)

    monkeypatch.setattr(vllm_server, 'AnsibleModule', Capture)
    with pytest.raises(SystemExit):
        vllm_server.main()
    assert specs['api_key'] == {'type': 'str', 'no_log': True}
    assert 'api_key:' in vllm_server.DOCUMENTATION


def test_the_key_goes_to_the_secret_file_only_and_a_new_key_restarts(manager, capsys, stand_in):
    stand_in['key'] = KEY
    first = vllm(capsys, port=stand_in['port'], api_key=KEY, diff=True)
    assert first['changed'] and first['action'] == 'started', first
    # The gate sent the key on /v1/models (the stand-in answers 401 without it) and found the served name.
    assert first['health'] == 'healthy' and first['models'] == ['qwen']
    # In the EnvironmentFile (0600), never in the world-readable unit, the returned env/argv, the diff or the output.
    assert manager.secret == 'VLLM_API_KEY=%s\n' % KEY and KEY not in manager.text
    assert KEY not in json.dumps(first) and 'VLLM_API_KEY' not in first['env']
    assert '# EnvironmentFile VLLM_API_KEY=<secret' in first['diff']['after']
    assert first['invocation']['module_args']['api_key'] == 'VALUE_SPECIFIED_IN_NO_LOG_PARAMETER'
    again = vllm(capsys, port=stand_in['port'], api_key=KEY)
    assert not again['changed'] and again['action'] == 'none' and manager.calls == ['start']
    checked = vllm(capsys, port=stand_in['port'], api_key=OTHER_KEY, check=True, diff=True)
    assert checked['changed'] and checked['action'] == 'restarted' and checked['reason'] == 'settings changed'
    assert '<secret, changed>' in checked['diff']['after'] and manager.secret == 'VLLM_API_KEY=%s\n' % KEY
    assert KEY not in json.dumps(checked) and OTHER_KEY not in json.dumps(checked)
    stand_in['key'] = OTHER_KEY
    new = vllm(capsys, port=stand_in['port'], api_key=OTHER_KEY)
    assert new['changed'] and new['action'] == 'restarted' and manager.calls[-1] == 'restart', new.get('msg')
    assert new['health'] == 'healthy' and manager.secret == 'VLLM_API_KEY=%s\n' % OTHER_KEY
    # Dropping the key restarts the instance without one; the secret file goes.
    stand_in['key'] = None
    dropped = vllm(capsys, port=stand_in['port'])
    assert dropped['changed'] and dropped['action'] == 'restarted' and not manager.secret


def test_visible_devices_and_environment_are_in_the_unit(manager, capsys):
    res = vllm(capsys, visible_devices=[2, 3], tensor_parallel_size=2, env={'PYTHONHASHSEED': '0'},
               wait=False)
    assert res['changed'] and res['health'] == 'starting', res.get('msg')
    assert 'Environment="ASCEND_RT_VISIBLE_DEVICES=2,3"' in manager.text
    assert 'Environment="PYTHONHASHSEED=0"' in manager.text
    assert res['unit'] == 'kvpool-vllm-qwen-a.service' and 'After=network-online.target' in manager.text


def test_stop_removes_the_unit(manager, capsys):
    assert vllm(capsys, wait=False)['changed']
    stopped = vllm(capsys, port=None, state='stopped')
    assert stopped['changed'] and stopped['action'] == 'stopped' and manager.text is None
    assert not vllm(capsys, port=None, state='stopped')['changed']


# --- mooncake_master -----------------------------------------------------------------------------------------------

def test_master_missing_binary_and_bad_params_fail_before_any_unit(manager, capsys):
    res = master(manager, capsys, binary='no_such_mooncake_master')
    assert res['failed']
    assert_names(res['msg'], 'no_such_mooncake_master', 'not found on the host')
    res = master(manager, capsys, binary='/nonexistent/mooncake_master')
    assert res['failed']
    assert_names(res['msg'], '/nonexistent/mooncake_master', 'not found on the host')
    assert 'mooncake_install' in res['msg']
    assert 'between 0 and 1' in master(manager, capsys, eviction_ratio=1.5)['msg']
    assert 'different ports' in master(manager, capsys, port=9100, metrics_port=9100)['msg']
    res = master(manager, capsys, enable_ha=True, etcd_endpoints=['e1:2379'])
    assert res['failed'] and 'rpc_address' in res['msg']
    res = master(manager, capsys, mooncake_version='not-a-version')
    assert res['failed'] and res['msg'].startswith('mooncake_version: ')
    assert manager.calls == [] and manager.text is None


@pytest.mark.parametrize('version, present, absent', [
    ('', ['"--port=', '"--rpc_thread_num=4"'], ['--rpc_port', '--max_threads']),
    ('0.3.9', ['"--port=', '"--rpc_thread_num=4"'], ['--rpc_port', '--max_threads']),
    ('0.3.13.post1', ['"--rpc_port=', '"--rpc_thread_num=4"'], ['"--port=', '--max_threads']),
])
def test_master_unit_spells_the_flags_of_the_declared_release(manager, capsys, version, present, absent):
    res = master(manager, capsys, mooncake_version=version, max_threads=4, check=True, diff=True)
    assert res['changed'] and res['action'] == 'started' and manager.text is None, res.get('msg')
    after = res['diff']['after']
    assert 'ExecStart=' in after
    for word in present:
        assert word in after, (word, after)
    for word in absent:
        assert word not in after, (word, after)


# --- container mode: the module's two steps (the action plugin runs docker_container between them) ----------------

@pytest.fixture
def docker(monkeypatch):
    from ansible_collections.ascend.kvpool.tests.unit.plugins.module_utils.service_fakes import FakeDocker
    made = {}

    def backend_for(module, container=None):
        made['be'] = FakeDocker(module, made.get('containers'))
        return made['be']
    for mod in (vllm_server, mooncake_master):
        monkeypatch.setattr(mod, 'backend_for', backend_for)
    return made


def test_container_render_of_an_instance_keeps_the_key_out_and_names_its_npus(docker, capsys):
    res = vllm(capsys, container='vllm-ascend', container_step='render', api_key=KEY, visible_devices=[2, 3],
               tensor_parallel_size=2, binary='vllm')
    definition = res['container_definition']
    assert definition['name'] == 'kvpool-vllm-qwen-a' and definition['entrypoint'] == ['vllm']
    assert definition['command'][:2] == ['serve', '/models/qwen']
    assert definition['env']['ASCEND_RT_VISIBLE_DEVICES'] == '2,3'
    assert [d.split(':')[1] for d in definition['devices']] == ['/dev/davinci2', '/dev/davinci3',
                                                                '/dev/davinci_manager', '/dev/devmm_svm',
                                                                '/dev/hisi_hdc']
    assert res['container_secret_env'] == ['VLLM_API_KEY'] and KEY not in json.dumps(res)
    assert res['unit'] == 'kvpool-vllm-qwen-a' and res['action'] == 'started' and not res['changed']


def test_container_gate_skips_stop_unlisted_which_the_render_step_did(docker, capsys, monkeypatch):
    seen = []
    monkeypatch.setattr(vllm_server, 'stop_unlisted', lambda *a: seen.append(a) or [])
    vllm(capsys, container='vllm-ascend', container_step='render', binary='vllm', stop_unlisted=['qwen-a'])
    assert len(seen) == 1
    res = vllm(capsys, container='vllm-ascend', container_step='gate', binary='vllm', stop_unlisted=['qwen-a'])
    assert len(seen) == 1 and res['failed']
    assert_names(res['msg'], 'does not exist', 'community.docker.docker_container')


def test_master_container_render_gets_the_control_devices_only(manager, docker, capsys):
    res = master(manager, capsys, container='vllm-ascend', container_step='render', binary='mooncake_master')
    definition = res['container_definition']
    assert definition['name'] == 'kvpool-mooncake-master' and definition['entrypoint'] == ['mooncake_master']
    assert [d.split(':')[1] for d in definition['devices']] == ['/dev/davinci_manager', '/dev/devmm_svm',
                                                                '/dev/hisi_hdc']
    assert definition['restart_policy'] == 'on-failure' and definition['restart_retries'] == 5


def test_a_failed_master_start_names_the_connection_that_holds_its_port(monkeypatch):
    """mooncake_master exits with status 1 and no message when its RPC port is held (measured on the mock nodes
    with a TIME-WAIT on 50088): the failed start's explanation says so, with the fix."""
    tcp = ('  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n'
           '   0: 0BFA1FAC:C3A8 0CFA1FAC:0016 06 00000000:00000000 03:000016C6 00000000     0        0 0 3 '
           '0000000000000000\n')
    files = {'/proc/net/tcp': tcp, '/proc/net/tcp6': '', '/proc/sys/net/ipv4/ip_local_port_range': '32768\t60999\n',
             '/proc/sys/net/ipv4/ip_local_reserved_ports': '\n'}
    monkeypatch.setattr(mooncake_master, '_read', files.get)
    said = mooncake_master.explainer(50088)('I1203 master_service.cpp:2619] Task cleanup thread stopped\n')
    assert_names(said, 'port 50088', 'held by 1 connection(s)', 'TIME-WAIT 172.31.250.11:50088', '-> 172.31.250.12:22')
    assert_names(said, 'sysctl -w', 'ip_local_reserved_ports=50088')
    assert 'port 50088' not in mooncake_master.explainer(None)('')     # HA masters: no RPC port of their own
    files['/proc/net/tcp'] = ''
    assert mooncake_master.explainer(50088)('') == ''


# --- the real master behind the wheel's Python wrapper (Mooncake up to 0.3.12.post1) --------------------------------
def test_master_pid_is_the_real_binary_behind_a_python_wrapper(tmp_path):
    """A wrapper as the wheel's bin/mooncake_master of 0.3.9-0.3.12.post1 (a Python script that runs the packaged
    binary with subprocess.call): the module reports the binary's pid, and the wrapper's apart."""
    pkg = tmp_path / 'site-packages' / 'mooncake'
    pkg.mkdir(parents=True)
    real = pkg / 'mooncake_master'
    real.symlink_to('/bin/sh')  # stands in for the binary: a shell waiting on its stdin, argv[0] the binary's path
    wrapper = tmp_path / 'bin' / 'mooncake_master'
    wrapper.parent.mkdir()
    wrapper.write_text('import subprocess, sys\nsys.exit(subprocess.call([%r] + sys.argv[1:]))\n' % str(real))
    proc = subprocess.Popen([sys.executable, str(wrapper)], stdin=subprocess.PIPE, start_new_session=True)
    try:
        result = {'pid': proc.pid}
        for _attempt in range(200):  # the child appears within milliseconds
            mooncake_master.real_master(result)
            if result['wrapper_pid']:
                break
            result = {'pid': proc.pid}
            time.sleep(0.01)
        assert result['wrapper_pid'] == proc.pid and result['pid'] != proc.pid
        with open('/proc/%d/cmdline' % result['pid'], 'rb') as f:
            assert f.read().split(b'\0')[0].endswith(b'mooncake/mooncake_master')
        # A main process that is the master itself (0.3.13.post1 execs) stays as it is.
        same = {'pid': result['pid']}
        mooncake_master.real_master(same)
        assert same == {'pid': result['pid'], 'wrapper_pid': None}
        stopped = {'pid': None}
        mooncake_master.real_master(stopped)
        assert stopped == {'pid': None, 'wrapper_pid': None}
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def test_master_pid_under_a_container_init_is_the_real_master(tmp_path):
    """A service container runs with docker's init (docker-init, PID 1 of the container): its pid on the host is the
    init's. The module reports the master under it, and the wrapper's pid apart where the wheel has one."""
    pkg = tmp_path / 'site-packages' / 'mooncake'
    pkg.mkdir(parents=True)
    real = pkg / 'mooncake_master'
    real.symlink_to('/bin/sh')
    wrapper = tmp_path / 'bin' / 'mooncake_master'
    wrapper.parent.mkdir()
    wrapper.write_text('import subprocess, sys\nsys.exit(subprocess.call([%r] + sys.argv[1:]))\n' % str(real))
    # docker-init (argv[0] "docker-init") runs the container's command as its child: a bash under that name
    proc = subprocess.Popen(['bash', '-c', 'exec -a docker-init bash -c "%s %s; true"' % (sys.executable, wrapper)],
                            stdin=subprocess.PIPE, start_new_session=True)
    try:
        for _attempt in range(300):
            result = {'pid': proc.pid}
            mooncake_master.real_master(result)
            if result['wrapper_pid']:
                break
            time.sleep(0.01)
        assert result['wrapper_pid'] not in (None, proc.pid) and result['pid'] not in (proc.pid, result['wrapper_pid'])
        with open('/proc/%d/cmdline' % result['pid'], 'rb') as f:
            assert f.read().split(b'\0')[0].endswith(b'mooncake/mooncake_master')
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
