# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The detached-process helper: parsers, brisk polling, and real start/stop of processes on this host.

Host-mode tests run real processes (sh, sleep, python) through a real AnsibleModule.run_command; container mode
is checked by the argv it builds (docker exec) with a recording run_command.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import socket
import sys
import threading
import time

import pytest
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.ascend.kvpool.plugins.module_utils import _proc


@pytest.fixture
def module():
    with patch_module_args({}):
        yield basic.AnsibleModule(argument_spec={})


@pytest.fixture
def host(module):
    return _proc.ProcessTarget(module)


# --- parsers ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize('text,pid', [('4682\n', 4682), (b'4682', 4682), ('  77 \nrest', 77), ('', None), (None, None),
                                      ('abc', None), ('1', None), ('0', None), ('-5', None)])
def test_parse_pid(text, pid):
    assert _proc.parse_pid(text) == pid


STATUS = "Name:\tmooncake_master\nUmask:\t0022\nState:\t%s\nTgid:\t4682\nThreads:\t%d\n"


@pytest.mark.parametrize('text,state,threads,gone', [
    (STATUS % ('S (sleeping)', 12), 'S', 12, False),
    (STATUS % ('R (running)', 1), 'R', 1, False),
    # The main thread exited but 11 threads still hold the sockets: not gone yet.
    ((STATUS % ('Z (zombie)', 11)).encode(), 'Z', 11, False),
    (STATUS % ('Z (zombie)', 1), 'Z', 1, True),
    (STATUS % ('X (dead)', 0), 'X', 0, True),
    ('', None, 0, True),
    (None, None, 0, True),
])
def test_parse_status_and_gone(text, state, threads, gone):
    assert _proc.parse_status(text) == (state, threads)
    assert _proc.is_gone(state, threads) is gone


@pytest.mark.parametrize('stat,state', [
    ('4682 (mooncake_master) S 1 4682 4682 0 -1 4194560', 'S'),
    (b'77 (weird) name) (x) Z 1 77', 'Z'),     # the command name may hold spaces and parentheses
    ('', None), ('garbage', None),
])
def test_parse_stat_state(stat, state):
    assert _proc.parse_stat_state(stat) == state


def test_parse_cmdline():
    assert _proc.parse_cmdline(b'/usr/bin/python3\x00-c\x00print(1)\x00') == ['/usr/bin/python3', '-c', 'print(1)']
    assert _proc.parse_cmdline(None) is None
    assert _proc.parse_cmdline('a\x00b') == ['a', 'b']


def test_cmdline_matches_tolerates_entry_point_wrappers():
    wanted = ['/usr/local/bin/mooncake_master', '--port=50088']
    # The pip entry point exec()s the packaged binary: same pid, same args, other directory.
    assert _proc.cmdline_matches(['/usr/lib/python3/site-packages/mooncake/mooncake_master', '--port=50088'], wanted)
    assert not _proc.cmdline_matches(['/usr/local/bin/mooncake_master', '--port=50051'], wanted)
    assert not _proc.cmdline_matches(['/usr/bin/sleep', '--port=50088'], wanted)
    assert not _proc.cmdline_matches([], wanted) and not _proc.cmdline_matches(None, wanted)
    # A #! script run by its interpreter.
    assert _proc.cmdline_matches(['/usr/bin/python3', '/usr/local/bin/mooncake_master', '--port=50088'], wanted)
    assert not _proc.cmdline_matches(['/usr/bin/python3', '/usr/local/bin/other', '--port=50088'], wanted)
    assert not _proc.cmdline_matches(['/usr/bin/python3', '-c', '/usr/local/bin/mooncake_master', '--port=50088'],
                                     wanted)


def test_tail_text():
    text = '\n'.join('line %d' % i for i in range(100)) + '\n'
    assert _proc.tail_text(text, 3) == 'line 97\nline 98\nline 99'
    assert _proc.tail_text(b'a\nb', 5) == 'a\nb'
    assert _proc.tail_text('', 3) == '' and _proc.tail_text('abc', 0) == ''


# --- polling ---------------------------------------------------------------------------------------------------------
class FakeClock(object):
    def __init__(self):
        self.now = 0.0
        self.sleeps = []

    def clock(self):
        return self.now

    def sleep(self, s):
        self.sleeps.append(s)
        self.now += s


def test_wait_until_ready_after_some_polls():
    fc = FakeClock()
    answers = {'a': iter([False, False, True]), 'b': iter([True])}
    res = _proc.wait_until([('a', lambda: next(answers['a'])), ('b', lambda: next(answers['b']))], 5, 0.1,
                           clock=fc.clock, sleep=fc.sleep)
    assert res['ready'] and res['passed'] == ['b', 'a'] and res['pending'] == [] and res['polls'] == 3
    assert fc.sleeps == [0.1, 0.1]  # brisk: the poll interval, not seconds


def test_wait_until_times_out_and_names_what_is_missing():
    fc = FakeClock()
    res = _proc.wait_until([('rpc', lambda: True), ('health', lambda: False)], 1.0, 0.3, clock=fc.clock, sleep=fc.sleep)
    assert not res['ready'] and res['pending'] == ['health'] and not res['died']
    assert fc.now == pytest.approx(1.0)  # the last sleep is cut to the deadline


def test_wait_until_stops_when_the_process_dies():
    fc = FakeClock()
    res = _proc.wait_until([('x', lambda: False)], 60, 0.1, alive=lambda: fc.now < 0.25, clock=fc.clock,
                           sleep=fc.sleep)
    assert res['died'] and not res['ready'] and fc.now < 1


def test_tcp_open():
    srv = socket.socket()
    srv.bind(('127.0.0.1', 0))
    srv.listen(5)
    port = srv.getsockname()[1]
    try:
        assert _proc.tcp_open('127.0.0.1', port)
    finally:
        srv.close()
    assert not _proc.tcp_open('127.0.0.1', port, timeout=0.2)
    assert not _proc.tcp_open('127.0.0.1', 'not-a-port')


def _http_server(status):
    from http.server import BaseHTTPRequestHandler, HTTPServer

    class H(BaseHTTPRequestHandler):
        def do_GET(self):
            body = ('{"status":"ok","path":"%s"}' % self.path).encode()
            self.send_response(status)
            self.send_header('Content-Length', str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    srv = HTTPServer(('127.0.0.1', 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def test_http_status_ignores_proxies(monkeypatch):
    monkeypatch.setenv('http_proxy', 'http://127.0.0.1:9')  # nothing listens there: must not be used
    srv = _http_server(200)
    try:
        status, body = _proc.http_status('http://127.0.0.1:%d/health' % srv.server_address[1])
        assert status == 200 and '"path":"/health"' in body
    finally:
        srv.shutdown()
        srv.server_close()


def test_http_status_sends_extra_headers():
    from http.server import BaseHTTPRequestHandler, HTTPServer

    class H(BaseHTTPRequestHandler):
        def do_GET(self):
            ok = self.headers.get('Authorization') == 'Bearer k1'
            self.send_response(200 if ok else 401)
            self.send_header('Content-Length', '0')
            self.end_headers()

        def log_message(self, *a):
            pass

    srv = HTTPServer(('127.0.0.1', 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    url = 'http://127.0.0.1:%d/v1/models' % srv.server_address[1]
    try:
        assert _proc.http_status(url)[0] == 401
        assert _proc.http_status(url, headers={'Authorization': 'Bearer k1'})[0] == 200
    finally:
        srv.shutdown()
        srv.server_close()


def test_http_status_error_and_nothing():
    srv = _http_server(503)
    port = srv.server_address[1]
    try:
        assert _proc.http_status('http://127.0.0.1:%d/health' % port)[0] == 503
    finally:
        srv.shutdown()
        srv.server_close()
    assert _proc.http_status('http://127.0.0.1:%d/health' % port, timeout=0.3) == (None, '')


# --- real processes on this host -------------------------------------------------------------------------------------
def test_start_detached_running_and_stop(host, tmp_path):
    pid_file, log_file = str(tmp_path / 'run' / 'p.pid'), str(tmp_path / 'run' / 'p.log')
    argv = [sys.executable, '-c', 'import sys, time; print("hello", sys.argv[1], flush=True); time.sleep(60)', 'arg']
    pid = host.start(argv, pid_file, log_file, env={'KVPOOL_T': '1'}, cwd=str(tmp_path))
    try:
        assert host.read_pid(pid_file) == pid
        # setsid and env exec() the program: the pid becomes the program's own, not a shell's.
        res = _proc.wait_until([('exec', lambda: host.running_pid(pid_file, argv) == pid)], 10, 0.02)
        assert res['ready']
        assert host.running_pid(pid_file, argv[:-1] + ['other']) is None
        with open('/proc/%d/environ' % pid, 'rb') as fh:
            assert b'KVPOOL_T=1' in fh.read().split(b'\0')
        assert os.getsid(pid) == pid                               # own session: survives the module
        assert os.readlink('/proc/%d/cwd' % pid) == str(tmp_path)
        res = _proc.wait_until([('log', lambda: 'hello arg' in host.log_tail(log_file))], 10, 0.05)
        assert res['ready'], host.log_tail(log_file)
    finally:
        how = host.stop(pid, timeout=5, interval=0.05, pid_file=pid_file)
    assert how == 'term'
    assert not host.pid_alive(pid) and host.read_pid(pid_file) is None


def test_secret_env_is_inherited_never_in_a_command_line(host, tmp_path, monkeypatch):
    seen = []
    original = host.module.run_command

    def recording(args, **kwargs):
        seen.append((list(args), dict(kwargs.get('environ_update') or {})))
        return original(args, **kwargs)

    monkeypatch.setattr(host.module, 'run_command', recording)
    pid_file, log_file = str(tmp_path / 'p.pid'), str(tmp_path / 'p.log')
    argv = [sys.executable, '-c', 'import time; time.sleep(60)']
    pid = host.start(argv, pid_file, log_file, env={'KVPOOL_T': '1'}, secret_env={'KVPOOL_SECRET': 's3cr3t'})
    try:
        assert _proc.wait_until([('exec', lambda: host.running_pid(pid_file, argv) == pid)], 10, 0.02)['ready']
        with open('/proc/%d/environ' % pid, 'rb') as fh:
            environ = fh.read().split(b'\0')
        assert b'KVPOOL_SECRET=s3cr3t' in environ and b'KVPOOL_T=1' in environ
        with open('/proc/%d/cmdline' % pid, 'rb') as fh:
            assert b's3cr3t' not in fh.read()
        (launch, environ_update), = seen
        assert not [a for a in launch if 's3cr3t' in a] and environ_update['KVPOOL_SECRET'] == 's3cr3t'
    finally:
        host.stop(pid, timeout=5, interval=0.05, pid_file=pid_file)


def test_stop_kills_what_ignores_term(host, tmp_path):
    code = 'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print("up", flush=True); time.sleep(60)'
    log_file = str(tmp_path / 'p.log')
    pid = host.start([sys.executable, '-c', code], str(tmp_path / 'p.pid'), log_file)
    assert _proc.wait_until([('up', lambda: 'up' in host.log_tail(log_file))], 10, 0.05)['ready']
    started = time.monotonic()
    assert host.stop(pid, timeout=0.3, interval=0.05) == 'kill'
    assert time.monotonic() - started < 5
    assert not host.pid_alive(pid)


def test_stop_reaches_the_whole_process_group(host, tmp_path):
    # A daemon with a worker child (as vllm serve has): both must go.
    code = ('import subprocess, sys, time; c = subprocess.Popen(["sleep", "60"]); '
            'print(c.pid, flush=True); time.sleep(60)')
    log_file = str(tmp_path / 'p.log')
    pid = host.start([sys.executable, '-c', code], str(tmp_path / 'p.pid'), log_file)
    assert _proc.wait_until([('child', lambda: host.log_tail(log_file).strip().isdigit())], 10, 0.05)['ready']
    child = int(host.log_tail(log_file).strip())
    host.stop(pid, timeout=5, interval=0.05)
    assert _proc.wait_until([('child gone', lambda: not host.pid_alive(child))], 5, 0.05)['ready']


def test_previous_log_is_kept(host, tmp_path):
    pid_file, log_file = str(tmp_path / 'p.pid'), str(tmp_path / 'p.log')
    for word in ('first', 'second'):
        pid = host.start(['sh', '-c', 'echo %s' % word], pid_file, log_file)
        assert _proc.wait_until([('done', lambda p=pid: not host.pid_alive(p))], 5, 0.05)['ready']
    assert host.log_tail(log_file).strip() == 'second'
    assert host.log_tail(log_file + '.1').strip() == 'first'


def test_dead_and_missing_pids(host, tmp_path):
    assert host.running_pid(str(tmp_path / 'none.pid')) is None
    (tmp_path / 'stale.pid').write_text('999999999\n')
    assert host.running_pid(str(tmp_path / 'stale.pid')) is None
    assert host.stop(None) == 'gone'


def test_arguments_are_not_expanded(host, tmp_path):
    # argv items reach the program verbatim: no shell, no $VAR or ~ expansion.
    log_file = str(tmp_path / 'p.log')
    pid = host.start(['printf', '%s|', '$HOME', '~', '$(id)', 'a b'], str(tmp_path / 'p.pid'), log_file)
    assert _proc.wait_until([('done', lambda: not host.pid_alive(pid))], 5, 0.05)['ready']
    assert host.log_tail(log_file) == '$HOME|~|$(id)|a b|'


def test_files_and_which(host, tmp_path):
    path = str(tmp_path / 'd' / 'f.json')
    host.write_file(path, '{"a": 1}\n')
    assert host.read_file(path) == b'{"a": 1}\n'
    assert oct(os.stat(path).st_mode & 0o777) == oct(0o644)
    host.remove_file(path)
    host.remove_file(path)
    assert host.read_file(path) is None
    assert host.which('sh') and host.which('no-such-binary-kvpool') is None
    exe = tmp_path / 'bin1' / 'tool'
    exe.parent.mkdir()
    exe.write_text('#!/bin/sh\n')
    exe.chmod(0o755)
    assert host.which('tool', [str(tmp_path / 'bin*')]) == str(exe)
    assert host.which(str(exe)) == str(exe)


# --- container mode: the argv that runs -------------------------------------------------------------------------------
class Recorder(object):
    def __init__(self, answers=None):
        self.calls = []
        self.answers = answers or []

    def run_command(self, argv, **kwargs):
        self.calls.append((list(argv), kwargs))
        return self.answers.pop(0) if self.answers else (0, '', '')

    def get_bin_path(self, *a, **kw):
        return None


def test_container_commands_go_through_docker_exec():
    rec = Recorder([(0, '', ''), (0, '4242\n', '')])
    target = _proc.ProcessTarget(rec, 'vllm-ascend', docker='/usr/bin/docker')
    pid = target.start(['mooncake_master', '--port=50088'], '/var/lib/x/m.pid', '/var/lib/x/m.log')
    assert pid == 4242
    argv, kwargs = rec.calls[-1]
    assert argv[:4] == ['/usr/bin/docker', 'exec', '-i', 'vllm-ascend']
    assert argv[4:7] == ['sh', '-c', _proc.START_SCRIPT]
    assert argv[7:] == ['kvpool-start', '/var/lib/x/m.log', '/var/lib/x/m.pid', '/', 'mooncake_master', '--port=50088']
    assert kwargs['environ_update'] == {'LANG': 'C', 'LC_ALL': 'C'}
    assert kwargs['expand_user_and_vars'] is False
    assert rec.calls[0][0] == ['/usr/bin/docker', 'exec', '-i', 'vllm-ascend', 'mkdir', '-p', '/var/lib/x']


def test_container_secret_env_goes_by_name():
    rec = Recorder([(0, '', ''), (0, '4242\n', '')])
    target = _proc.ProcessTarget(rec, 'vllm-ascend', docker='/usr/bin/docker')
    assert target.start(['vllm', 'serve', 'm'], '/x/p.pid', '/x/p.log', env={'A': '1'},
                        secret_env={'VLLM_API_KEY': 's3cr3t'}) == 4242
    argv, kwargs = rec.calls[-1]
    # docker exec -e NAME takes the value from docker's own environment: the key is never in an argv.
    assert argv[:6] == ['/usr/bin/docker', 'exec', '-i', '-e', 'VLLM_API_KEY', 'vllm-ascend']
    assert not [a for a in argv if 's3cr3t' in a] and 'A=1' in argv
    assert kwargs['environ_update'] == {'LANG': 'C', 'LC_ALL': 'C', 'VLLM_API_KEY': 's3cr3t'}
    assert rec.calls[0][0] == ['/usr/bin/docker', 'exec', '-i', 'vllm-ascend', 'mkdir', '-p', '/x']


def test_container_signal_and_proc_info():
    status = (STATUS % ('S (sleeping)', 3)).encode()
    rec = Recorder([(0, status + b'\n--kvpool--\n/usr/bin/mooncake_master\x00--port=1\x00', b''), (1, b'', b'')])
    target = _proc.ProcessTarget(rec, 'c1')
    assert target.proc_info(4242) == ('S', 3, ['/usr/bin/mooncake_master', '--port=1'])
    assert target.proc_info(4243) == (None, 0, None)
    target.signal(4242, 'TERM')
    argv = rec.calls[-1][0]
    assert argv[:4] == ['docker', 'exec', '-i', 'c1'] and argv[-3:] == ['kvpool-kill', 'TERM', '4242']


def test_container_must_run():
    target = _proc.ProcessTarget(Recorder([(0, 'false\n', '')]), 'c1')
    with pytest.raises(_proc.ProcError, match='not running'):
        target.check_container()
    target = _proc.ProcessTarget(Recorder([(1, '', 'Error: No such object: c1')]), 'c1')
    with pytest.raises(_proc.ProcError, match='not found'):
        target.check_container()
    _proc.ProcessTarget(Recorder(), None).check_container()  # host: nothing to check


def test_failed_launch_is_an_error():
    target = _proc.ProcessTarget(Recorder([(0, '', ''), (97, '', 'cd: /nope: No such file')]), 'c1')
    with pytest.raises(_proc.ProcError, match='could not launch'):
        target.start(['x'], '/a/p.pid', '/a/p.log', cwd='/nope')
