# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""vllm_server against a small stand-in `vllm serve` on this host (and through a stand-in `docker exec`).

The stand-in has the surface the module relies on: `vllm serve MODEL --flag value ...`, a model-load delay
before the API port listens, `GET /health` and `GET /v1/models`, a start-time failure that prints a Python error
and exits, and (on request) a worker child in its process group that ignores SIGTERM, like an engine core that
hangs. The module really starts, polls, restarts and stops it. The mock cluster's full vLLM stand-in is exercised
by the molecule scenario `instances`.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import signal
import socket
import sys

import pytest
from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.testing import patch_module_args

from ansible_collections.ascend.kvpool.plugins.module_utils import _proc, _vllm
from ansible_collections.ascend.kvpool.plugins.modules import vllm_server
from ansible_collections.ascend.kvpool.tests.unit.plugins.modules.process_helpers import FAKE_DOCKER, free_port

FAKE_VLLM = r'''#!%(python)s
import json, os, signal, sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
args = sys.argv[1:]
assert args[0] == "serve", args
opts = {"model": args[1]}
i = 2
while i < len(args):
    if args[i].startswith("--") and i + 1 < len(args) and not args[i + 1].startswith("--"):
        opts[args[i][2:]] = args[i + 1]; i += 2
    else:
        opts[args[i][2:]] = True; i += 1
print("INFO api_server.py: vLLM API server (stand-in) args %%s" %% json.dumps(opts), flush=True)
print("INFO env LD_LIBRARY_PATH=%%s ASCEND_RT_VISIBLE_DEVICES=%%s" %% (
    os.environ.get("LD_LIBRARY_PATH"), os.environ.get("ASCEND_RT_VISIBLE_DEVICES")), flush=True)
if os.environ.get("FAKE_FAIL"):
    print("Traceback (most recent call last):", flush=True)
    print("ValueError: %%s" %% os.environ["FAKE_FAIL"], flush=True)
    sys.exit(1)
if os.environ.get("FAKE_HUNG_CHILD") and os.fork() == 0:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    while True:
        time.sleep(1)
time.sleep(float(os.environ.get("FAKE_LOAD", "0.3")))
name = opts.get("served-model-name") or opts["model"]
listed = [] if os.environ.get("FAKE_NO_MODEL") else [{"id": name, "object": "model"}]
key = opts.get("api-key") or os.environ.get("VLLM_API_KEY")  # as vLLM: guards /v1/* only
class H(BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path == "/health":
            code, body = int(os.environ.get("FAKE_HEALTH", "200")), b""
        elif key and self.path.startswith("/v1/") and self.headers.get("Authorization") != "Bearer " + key:
            code, body = 401, b'{"error": "Unauthorized"}'
        elif self.path == "/v1/models":
            code, body = 200, json.dumps({"object": "list", "data": listed}).encode()
        else:
            code, body = 404, b""
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
srv = ThreadingHTTPServer((opts.get("host", "127.0.0.1"), int(opts["port"])), H)
signal.signal(signal.SIGTERM, lambda *a: os._exit(0))
print("INFO Application startup complete.", flush=True)
srv.serve_forever()
'''


@pytest.fixture
def ctx(tmp_path, monkeypatch):
    bindir = tmp_path / 'bin'
    bindir.mkdir()
    binary = bindir / 'vllm'
    binary.write_text(FAKE_VLLM % {'python': sys.executable})
    binary.chmod(0o755)
    docker = bindir / 'docker'
    docker.write_text(FAKE_DOCKER % {'log': tmp_path / 'docker.log'})
    docker.chmod(0o755)
    monkeypatch.setenv('PATH', '%s:%s' % (bindir, os.environ.get('PATH', '')))
    ctx = {'tmp': tmp_path, 'state_dir': str(tmp_path / 'state'), 'port': free_port(), 'binary': str(binary)}
    yield ctx
    # leave nothing running
    for name in os.listdir(ctx['state_dir']) if os.path.isdir(ctx['state_dir']) else []:
        try:
            with open(os.path.join(ctx['state_dir'], name, 'settings.json')) as fh:
                pid = json.load(fh).get('pid')
        except (IOError, OSError, ValueError):
            continue
        if pid:
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass


def run(ctx, capsys, check=False, diff=False, **args):
    params = dict(name='qwen-a', model='/models/qwen', served_model_name='qwen', host='127.0.0.1',
                  port=ctx['port'], state_dir=ctx['state_dir'], ready_timeout=10, poll_interval=0.02, stop_timeout=5)
    params.update(args)
    if check:
        params['_ansible_check_mode'] = True
    if diff:
        params['_ansible_diff'] = True
    with patch_module_args(params):
        with pytest.raises(SystemExit):
            vllm_server.main()
    return json.loads(capsys.readouterr().out)


def alive(pid):
    try:
        with open('/proc/%d/stat' % pid) as fh:
            return _vllm.stat_state(fh.read()) not in ('Z', 'X', None)
    except (IOError, OSError):
        return False


def group_alive(pgid):
    try:
        os.killpg(pgid, 0)
    except OSError:
        return False
    return True


def settings(ctx, name='qwen-a'):
    with open(os.path.join(ctx['state_dir'], name, 'settings.json')) as fh:
        return json.load(fh)


def test_start_passes_the_health_gate_and_is_recorded(ctx, capsys):
    res = run(ctx, capsys, env={'PYTHONHASHSEED': '0'}, visible_devices=[0, 1, 2, 3], tensor_parallel_size=4,
              path_prepend={'LD_LIBRARY_PATH': ['/opt/ascend/site-packages']},
              kv_transfer_config={'kv_connector': 'AscendStoreConnector', 'kv_role': 'kv_both'})
    assert res['changed'] and res['action'] == 'started' and res['state'] == 'running', res.get('msg')
    assert res['health'] == 'healthy' and res['models'] == ['qwen']
    assert res['endpoint'] == 'http://127.0.0.1:%d' % ctx['port']
    assert 0.2 < res['ready_seconds'] < 5
    assert res['argv'] == [ctx['binary'], 'serve', '/models/qwen', '--served-model-name', 'qwen',
                           '--tensor-parallel-size', '4', '--host', '127.0.0.1', '--port', str(ctx['port']),
                           '--kv-transfer-config', '{"kv_connector":"AscendStoreConnector","kv_role":"kv_both"}']
    assert res['env'] == {'PYTHONHASHSEED': '0', 'ASCEND_RT_VISIBLE_DEVICES': '0,1,2,3'}
    assert alive(res['pid'])
    rec = settings(ctx)
    assert rec['fingerprint'] == res['fingerprint'] and rec['pid'] == res['pid'] and rec['starttime']
    assert not rec['awaiting']
    with open(res['log_path']) as fh:
        log = fh.read()
    # The inherited LD_LIBRARY_PATH is kept behind the prepended directory.
    assert 'LD_LIBRARY_PATH=/opt/ascend/site-packages' in log and 'ASCEND_RT_VISIBLE_DEVICES=0,1,2,3' in log


def test_same_settings_are_ok_and_check_mode_changes_nothing(ctx, capsys):
    first = run(ctx, capsys)
    again = run(ctx, capsys)
    assert not again['changed'] and again['action'] == 'none' and again['pid'] == first['pid']
    assert again['health'] == 'healthy' and again['ready_seconds'] < 1
    checked = run(ctx, capsys, check=True, diff=True, dtype='bfloat16')
    assert checked['changed'] and checked['action'] == 'restarted' and checked['reason'] == 'settings changed'
    assert '--dtype bfloat16' not in checked['diff']['before'] and '  --dtype bfloat16\n' in checked['diff']['after']
    assert alive(first['pid']) and not run(ctx, capsys)['changed']


def test_changed_setting_restarts_with_a_diff(ctx, capsys):
    first = run(ctx, capsys)
    res = run(ctx, capsys, diff=True, env={'PYTHONHASHSEED': '1'})
    assert res['changed'] and res['action'] == 'restarted' and res['pid'] != first['pid'], res.get('msg')
    assert not alive(first['pid']) and alive(res['pid'])
    assert 'env PYTHONHASHSEED=1' in res['diff']['after'] and 'PYTHONHASHSEED' not in res['diff']['before']
    assert not run(ctx, capsys, env={'PYTHONHASHSEED': '1'})['changed']


def test_failed_start_returns_the_log_tail(ctx, capsys):
    res = run(ctx, capsys, env={'FAKE_FAIL': "The environment variable 'MOONCAKE_CONFIG_PATH' is not set."})
    assert res['failed'] and res['state'] == 'stopped' and res['health'] == 'unhealthy'
    assert "exited right after the start (error: ValueError: The environment variable 'MOONCAKE_CONFIG_PATH'" \
        in res['msg']
    assert 'Last lines of %s' % res['log_path'] in res['msg']
    assert 'Traceback (most recent call last):' in res['log_tail']


def test_not_healthy_in_time_is_stopped_and_reported(ctx, capsys):
    res = run(ctx, capsys, ready_timeout=1, env={'FAKE_NO_MODEL': '1'})
    assert res['failed'] and 'was not healthy after 1.0 s' in res['msg']
    assert 'lists qwen' in res['msg'] and 'Application startup complete.' in res['msg']
    assert not alive(settings(ctx).get('pid') or 0)


def test_wait_false_then_wait_overlaps_and_does_not_restart(ctx, capsys):
    other = dict(name='qwen-b', port=free_port())
    load = {'FAKE_LOAD': '2'}
    a = run(ctx, capsys, wait=False, env=load)
    b = run(ctx, capsys, wait=False, env=load, **other)
    assert a['changed'] and a['health'] == 'starting' and b['health'] == 'starting'
    assert settings(ctx)['awaiting'] and settings(ctx, 'qwen-b')['awaiting']
    # b was launched while a was still loading: the two loads overlap.
    assert settings(ctx, 'qwen-b')['started_at'] - settings(ctx)['started_at'] < 2.0
    wa = run(ctx, capsys, env=load)
    wb = run(ctx, capsys, env=load, **other)
    assert not wa['changed'] and wa['pid'] == a['pid'] and wa['health'] == 'healthy'
    assert not wb['changed'] and wb['pid'] == b['pid'] and wb['health'] == 'healthy'
    assert wa['ready_seconds'] >= 2.0 and not settings(ctx)['awaiting']


def test_wait_false_polls_an_instance_that_already_ran_once(ctx, capsys):
    first = run(ctx, capsys)
    again = run(ctx, capsys, wait=False)           # ran before: one poll, no waiting, healthy
    assert not again['changed'] and again['health'] == 'healthy' and again['pid'] == first['pid']
    os.kill(first['pid'], signal.SIGSTOP)           # alive, but answers nothing
    try:
        stuck = run(ctx, capsys, wait=False)
    finally:
        os.kill(first['pid'], signal.SIGCONT)
    assert not stuck['changed'] and stuck['health'] == 'unknown'    # left to a wait, which restarts it if need be


def test_wait_reports_a_launch_that_died_instead_of_starting_it_again(ctx, capsys):
    bad = {'FAKE_FAIL': "Unsupported connector type 'NoSuchConnector'"}
    launched = run(ctx, capsys, wait=False, env=bad)
    assert launched['changed'] or launched['failed']
    res = run(ctx, capsys, env=bad)
    assert res['failed'] and 'NoSuchConnector' in res['msg'] and 'exited' in res['msg']
    with open(res['log_path']) as fh:
        assert fh.read().count('Traceback') == 1  # not started a second time
    # The next run starts it again (and reports again).
    assert run(ctx, capsys, env=bad)['failed']


def test_killed_instance_is_started_again(ctx, capsys):
    first = run(ctx, capsys)
    os.killpg(first['pid'], signal.SIGKILL)
    _proc.wait_until([('dead', lambda: not alive(first['pid']))], 5, 0.02)
    res = run(ctx, capsys)
    assert res['changed'] and res['action'] == 'started' and res['reason'].startswith('not running'), res.get('msg')


def test_unhealthy_running_instance_is_restarted(ctx, capsys):
    first = run(ctx, capsys)
    os.kill(first['pid'], signal.SIGSTOP)  # alive, but answers nothing
    try:
        # ready_timeout bounds both the check of the stopped one and the health gate of its replacement: long
        # enough for the replacement to start on a loaded 2-core machine (0.5 s was not).
        res = run(ctx, capsys, ready_timeout=3)
    finally:
        try:
            os.kill(first['pid'], signal.SIGCONT)
        except OSError:
            pass
    assert res['changed'] and res['action'] == 'restarted' and res['reason'].startswith('running but not healthy')
    assert res['health'] == 'healthy' and res['pid'] != first['pid']


def test_restarted_always_restarts(ctx, capsys):
    first = run(ctx, capsys)
    res = run(ctx, capsys, state='restarted')
    assert res['changed'] and res['action'] == 'restarted' and res['pid'] != first['pid']


def test_stop_waits_for_the_whole_process_group(ctx, capsys):
    first = run(ctx, capsys, env={'FAKE_HUNG_CHILD': '1'})
    assert first['health'] == 'healthy'
    checked = run(ctx, capsys, check=True, state='stopped')
    assert checked['changed'] and alive(first['pid'])
    res = run(ctx, capsys, state='stopped', stop_timeout=0.3, diff=True)
    assert res['changed'] and res['action'] == 'stopped' and res['diff']['after'] == ''
    # The child ignoring SIGTERM was killed too: the NPUs are free when the task returns.
    assert not alive(first['pid']) and not group_alive(first['pid'])
    again = run(ctx, capsys, state='stopped')
    assert not again['changed'] and again['action'] == 'none'


def test_workers_left_by_a_dead_instance_are_stopped(ctx, capsys):
    first = run(ctx, capsys, env={'FAKE_HUNG_CHILD': '1'})
    os.kill(first['pid'], signal.SIGKILL)  # the API server dies, its worker (same process group) lives on
    _proc.wait_until([('dead', lambda: not alive(first['pid']))], 5, 0.02)
    assert group_alive(first['pid'])
    checked = run(ctx, capsys, check=True, state='stopped')
    assert checked['changed'] and 'worker processes of a dead instance' in checked['reason']
    res = run(ctx, capsys, env={'FAKE_HUNG_CHILD': '1'}, stop_timeout=0.3)
    assert res['changed'] and res['action'] == 'started' and res['health'] == 'healthy', res.get('msg')
    assert not group_alive(first['pid'])  # the old worker is gone before the new instance took the NPUs
    assert run(ctx, capsys, state='stopped', stop_timeout=0.3)['changed'] and not group_alive(res['pid'])


def test_port_held_by_something_else_fails_clearly(ctx, capsys):
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(('127.0.0.1', ctx['port']))
    sock.listen(1)
    try:
        res = run(ctx, capsys)
    finally:
        sock.close()
    assert res['failed'] and 'already accepts connections' in res['msg'] and 'qwen-a' in res['msg']


@pytest.mark.parametrize('args, needle', [
    ({'visible_devices': [0, 1], 'tensor_parallel_size': 4}, 'does not match the 2 visible device(s)'),
    ({'name': 'bad name'}, 'letters, digits'),
    ({'port': 70000}, 'TCP port'),
    ({'gpu_memory_utilization': 1.5}, 'gpu_memory_utilization'),
    ({'env': {'BAD-NAME': '1'}}, 'not valid environment variable names'),
    ({'binary': 'no-such-vllm'}, 'no-such-vllm not found in host'),
])
def test_bad_parameters_fail_before_starting(ctx, capsys, args, needle):
    res = run(ctx, capsys, **args)
    assert res['failed'] and needle in res['msg'], res['msg']
    assert not os.path.exists(os.path.join(ctx['state_dir'], 'qwen-a', 'vllm.pid'))


def test_container_mode_runs_through_docker_exec(ctx, capsys):
    res = run(ctx, capsys, container='vllm-ascend')
    assert res['health'] == 'healthy', res.get('msg')
    again = run(ctx, capsys, container='vllm-ascend')
    assert not again['changed']
    stopped = run(ctx, capsys, container='vllm-ascend', state='stopped')
    assert stopped['changed'] and not alive(res['pid'])
    with open(str(ctx['tmp'] / 'docker.log')) as fh:
        calls = fh.read().splitlines()
    assert 'inspect --format {{.State.Running}} vllm-ascend' in calls
    assert any(c.startswith('exec -i vllm-ascend sh -c') and 'kvpool-start' in c for c in calls)


@pytest.mark.parametrize('container', [None, 'vllm-ascend'])
def test_stop_unlisted_stops_the_others_before_the_launch(ctx, capsys, container):
    b = run(ctx, capsys, name='qwen-b', port=free_port(), container=container)
    c = run(ctx, capsys, name='qwen-c', port=free_port(), container=container, wait=False)
    assert b['health'] == 'healthy' and c['state'] == 'running', (b.get('msg'), c.get('msg'))
    keep = ['qwen-a', 'qwen-b']
    # Check mode names the instance that would go and stops nothing.
    checked = run(ctx, capsys, check=True, stop_unlisted=keep, container=container)
    assert checked['stopped_unlisted'] == ['qwen-c'] and checked['changed'] and alive(c['pid'])
    res = run(ctx, capsys, stop_unlisted=keep, container=container, wait=False)
    assert res['stopped_unlisted'] == ['qwen-c'] and res['changed'] and res['action'] == 'started'
    assert not group_alive(c['pid']) and alive(b['pid']) and settings(ctx, 'qwen-c')['pid'] is None
    # Nothing left to stop: the next call changes nothing (qwen-a is being loaded, qwen-b runs).
    again = run(ctx, capsys, stop_unlisted=keep, container=container)
    assert again['stopped_unlisted'] == [] and not again['changed'] and again['health'] == 'healthy'
    # Unset: nothing else is looked at.
    stopped = run(ctx, capsys, name='qwen-b', container=container, state='stopped')
    assert stopped['stopped_unlisted'] == [] and stopped['changed'] and not group_alive(b['pid'])


def test_stop_unlisted_must_list_the_instance_itself(ctx, capsys):
    res = run(ctx, capsys, stop_unlisted=['qwen-b'])
    assert res['failed'] and 'name qwen-a must be one of stop_unlisted' in res['msg'] and 'qwen-b' in res['msg']
    assert not os.path.exists(os.path.join(ctx['state_dir'], 'qwen-a'))


def test_missing_container(ctx, capsys):
    res = run(ctx, capsys, container='gone')
    assert res['failed'] and 'container gone not found' in res['msg']
    # Check mode: the container would be created by an earlier task first.
    res = run(ctx, capsys, container='gone', check=True)
    assert res['changed'] and res['action'] == 'started' and 'not found' in res['reason']
    # Nothing runs in a container that does not exist: a stop is ok.
    res = run(ctx, capsys, container='gone', state='stopped')
    assert not res['changed'] and res['state'] == 'stopped'


def test_pid_reuse_is_not_mistaken_for_the_instance(ctx, capsys):
    first = run(ctx, capsys)
    rec = settings(ctx)
    rec['starttime'] = rec['starttime'] - 1  # the recorded pid now "belongs" to another process
    with open(os.path.join(ctx['state_dir'], 'qwen-a', 'settings.json'), 'w') as fh:
        json.dump(rec, fh)
    res = run(ctx, capsys, state='stopped')
    assert not res['changed'] and alive(first['pid'])  # someone else's process is never signalled
    os.killpg(first['pid'], signal.SIGKILL)


# --- the API key ------------------------------------------------------------------------------------------------------
KEY = 'sk-kvpool-Ab3dE5-unit-test-key'
OTHER_KEY = 'sk-kvpool-Zy9xW8-another-key'


@pytest.fixture
def commands(monkeypatch):
    """Every command line the module runs (the launch included), as given to run_command."""
    seen = []
    original = AnsibleModule.run_command

    def recording(self, args, *a, **kw):
        seen.append([str(x) for x in args])
        return original(self, args, *a, **kw)

    monkeypatch.setattr(AnsibleModule, 'run_command', recording)
    return seen


def environ_of(pid):
    with open('/proc/%d/environ' % pid, 'rb') as fh:
        return dict(item.decode().partition('=')[::2] for item in fh.read().split(b'\0') if item)


def cmdline_of(pid):
    with open('/proc/%d/cmdline' % pid, 'rb') as fh:
        return fh.read().decode()


def files_under(path):
    for root, _dirs, names in os.walk(path):
        for name in names:
            yield os.path.join(root, name)


def test_api_key_goes_to_the_environment_never_to_a_command_line_file_or_output(ctx, capsys, commands):
    res = run(ctx, capsys, api_key=KEY)
    assert res['changed'] and res['health'] == 'healthy' and res['models'] == ['qwen'], res.get('msg')
    # The instance requires the key on /v1 (so the health gate sent it); /health stays open.
    assert _proc.http_status(res['endpoint'] + '/v1/models')[0] == 401
    assert _proc.http_status(res['endpoint'] + '/v1/models', headers={'Authorization': 'Bearer ' + KEY})[0] == 200
    assert _proc.http_status(res['endpoint'] + '/health')[0] == 200
    # The process has it in its environment (readable by its owner and root only), not in its command line.
    assert environ_of(res['pid'])['VLLM_API_KEY'] == KEY
    assert KEY not in cmdline_of(res['pid'])
    # No command the module ran (the launch through sh and setsid included) carried it.
    assert commands and not [c for c in commands if any(KEY in part for part in c)]
    # Not in the result, the returned env or argv.
    assert KEY not in json.dumps(res) and 'VLLM_API_KEY' not in res['env']
    assert res['invocation']['module_args']['api_key'] == 'VALUE_SPECIFIED_IN_NO_LOG_PARAMETER'
    # Not in any file of the instance: the settings file holds a salted digest (and is 0600 in any case).
    written = list(files_under(ctx['state_dir']))
    assert written and not [f for f in written if KEY.encode() in open(f, 'rb').read()]
    rec = settings(ctx)
    assert rec['api_key_sha256'] == _vllm.api_key_digest(KEY, rec['api_key_salt'])
    assert len(rec['api_key_salt']) == 32 and 'VLLM_API_KEY' not in rec['env']
    path = os.path.join(ctx['state_dir'], 'qwen-a', 'settings.json')
    assert os.stat(path).st_mode & 0o777 == 0o600


def test_same_key_is_ok_a_new_key_restarts_and_no_key_restarts(ctx, capsys):
    first = run(ctx, capsys, api_key=KEY)
    salt = settings(ctx)['api_key_salt']
    again = run(ctx, capsys, api_key=KEY)
    assert not again['changed'] and again['action'] == 'none' and again['pid'] == first['pid']
    assert again['health'] == 'healthy' and again['fingerprint'] == first['fingerprint']
    # The fingerprint (shown in the output) is salted too: it cannot be recomputed from a guessed key.
    assert first['fingerprint'] != _vllm.fingerprint(first['argv'], first['env'], {},
                                                     _vllm.api_key_digest(KEY, ''))
    checked = run(ctx, capsys, check=True, diff=True, api_key=OTHER_KEY)
    assert checked['changed'] and checked['action'] == 'restarted' and checked['reason'] == 'settings changed'
    before, after = checked['diff']['before'], checked['diff']['after']
    assert 'env VLLM_API_KEY=<secret, salted sha256 ' in before and 'env VLLM_API_KEY=<secret' in after
    assert before != after and KEY not in json.dumps(checked) and OTHER_KEY not in json.dumps(checked)
    assert alive(first['pid']) and environ_of(first['pid'])['VLLM_API_KEY'] == KEY  # check mode changed nothing
    new = run(ctx, capsys, diff=True, api_key=OTHER_KEY)
    assert new['changed'] and new['action'] == 'restarted' and new['pid'] != first['pid'], new.get('msg')
    assert new['health'] == 'healthy' and environ_of(new['pid'])['VLLM_API_KEY'] == OTHER_KEY
    assert not alive(first['pid']) and settings(ctx)['api_key_salt'] == salt
    assert not run(ctx, capsys, api_key=OTHER_KEY)['changed']
    # Dropping the key restarts the instance without one; the digest goes from the settings file.
    open_again = run(ctx, capsys, diff=True)
    assert open_again['changed'] and open_again['action'] == 'restarted', open_again.get('msg')
    assert 'VLLM_API_KEY' in open_again['diff']['before'] and 'VLLM_API_KEY' not in open_again['diff']['after']
    assert 'VLLM_API_KEY' not in environ_of(open_again['pid']) and 'api_key_sha256' not in settings(ctx)
    assert _proc.http_status(open_again['endpoint'] + '/v1/models')[0] == 200
    assert not run(ctx, capsys)['changed']


def test_wait_false_then_wait_with_a_key_picks_up_the_launch(ctx, capsys):
    launched = run(ctx, capsys, wait=False, api_key=KEY)
    assert launched['changed'] and launched['health'] == 'starting'
    waited = run(ctx, capsys, api_key=KEY)
    assert not waited['changed'] and waited['pid'] == launched['pid'] and waited['health'] == 'healthy'


def test_api_key_in_a_container_is_passed_by_name(ctx, capsys):
    res = run(ctx, capsys, container='vllm-ascend', api_key=KEY)
    assert res['health'] == 'healthy', res.get('msg')
    assert environ_of(res['pid'])['VLLM_API_KEY'] == KEY
    with open(str(ctx['tmp'] / 'docker.log')) as fh:
        calls = fh.read()
    # `docker exec -e VLLM_API_KEY` takes the value from docker's environment: never on docker's command line.
    assert 'exec -i -e VLLM_API_KEY vllm-ascend sh -c' in calls and KEY not in calls
    assert not run(ctx, capsys, container='vllm-ascend', api_key=KEY)['changed']
    assert run(ctx, capsys, container='vllm-ascend', state='stopped')['changed']


@pytest.mark.parametrize('args, needle', [
    ({'env': {'VLLM_API_KEY': KEY}}, 'VLLM_API_KEY in the environment'),
    ({'extra_args': ['--api-key', KEY]}, '--api-key in the arguments'),
])
def test_a_key_outside_api_key_is_refused(ctx, capsys, args, needle):
    res = run(ctx, capsys, **args)
    assert res['failed'] and needle in res['msg'] and 'set the API key with api_key' in res['msg']
    assert not os.path.exists(os.path.join(ctx['state_dir'], 'qwen-a'))


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
