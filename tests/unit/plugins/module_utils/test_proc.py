# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The pure process helpers: /proc parsers, command-line matching, log tails and brisk polling."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import socket
import threading
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ansible_collections.ascend.kvpool.plugins.module_utils import _proc
from ansible_collections.ascend.kvpool.tests.unit.plugins.slow_peers import DripServer


# --- parsers ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize('stat,state', [
    ('4682 (mooncake_master) S 1 4682 4682 0 -1 4194560', 'S'),
    (b'77 (weird) name) (x) Z 1 77', 'Z'),     # the command name may hold spaces and parentheses
])
def test_stat_fields_start_after_the_command_name(stat, state):
    assert _proc.stat_fields(stat)[0] == state


@pytest.mark.parametrize('stat', ['', None, 'garbage'])
def test_stat_fields_of_no_stat_line_is_none(stat):
    assert _proc.stat_fields(stat) is None


def test_stat_fields_of_a_real_process():
    with open('/proc/%d/stat' % os.getpid()) as fh:
        fields = _proc.stat_fields(fh.read())
    assert fields[0] in ('R', 'S') and int(fields[1]) == os.getppid()


def test_parse_cmdline():
    assert _proc.parse_cmdline(b'/usr/bin/python3\x00-c\x00print(1)\x00') == ['/usr/bin/python3', '-c', 'print(1)']
    assert _proc.parse_cmdline(None) is None
    assert _proc.parse_cmdline('a\x00b') == ['a', 'b']


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
    threading.Thread(target=srv.serve_forever, kwargs={'poll_interval': 0.05}, daemon=True).start()
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
    threading.Thread(target=srv.serve_forever, kwargs={'poll_interval': 0.05}, daemon=True).start()
    url = 'http://127.0.0.1:%d/v1/models' % srv.server_address[1]
    try:
        assert _proc.http_status(url)[0] == 401
        assert _proc.http_status(url, headers={'Authorization': 'Bearer k1'})[0] == 200
    finally:
        srv.shutdown()
        srv.server_close()


def test_a_redirect_is_not_followed_and_the_key_goes_nowhere_else():
    """A 302 comes back as it is: the request (and its Authorization header) is never sent to the Location."""
    from http.server import BaseHTTPRequestHandler, HTTPServer

    seen = []

    class Target(BaseHTTPRequestHandler):
        def do_GET(self):
            seen.append(self.headers.get('Authorization'))
            self.send_response(200)
            self.send_header('Content-Length', '0')
            self.end_headers()

        def log_message(self, *a):
            pass

    target = HTTPServer(('127.0.0.1', 0), Target)

    class Redirect(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(302)
            self.send_header('Location', 'http://127.0.0.1:%d/elsewhere' % target.server_address[1])
            self.send_header('Content-Length', '0')
            self.end_headers()

        def log_message(self, *a):
            pass

    redirect = HTTPServer(('127.0.0.1', 0), Redirect)
    for srv in (target, redirect):
        threading.Thread(target=srv.serve_forever, kwargs={'poll_interval': 0.05}, daemon=True).start()
    try:
        status, body = _proc.http_status('http://127.0.0.1:%d/v1/models' % redirect.server_address[1],
                                         headers={'Authorization': 'Bearer k1'})
        assert status == 302
        assert seen == []
    finally:
        for srv in (target, redirect):
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


@pytest.mark.parametrize('head', [b'', b'HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\n'])
def test_a_server_that_answers_one_byte_at_a_time_is_cut_at_the_whole_request_timeout(head):
    """The timeout bounds the whole request (status line, headers, body), not each read: a server that sends one
    byte every 0.4 s (each read well within the timeout) is no answer once the timeout has passed."""
    srv = DripServer(gap=0.4, head=head, body=200 if not head else 0)
    try:
        started = time.monotonic()
        assert _proc.http_status(srv.url + '/health', timeout=1.0) == (None, '')
        assert time.monotonic() - started < 2.0
        started = time.monotonic()
        with pytest.raises(socket.timeout) as raised:
            status, answer = _proc.http_request(srv.url + '/health', 1.0)
            try:
                answer.read()
            finally:
                answer.close()
        assert time.monotonic() - started < 2.0
        assert 'whole request' in str(raised.value) or 'timed out' in str(raised.value)
    finally:
        srv.close()


def test_a_slow_stream_of_the_benchmark_client_ends_at_its_timeout():
    """The benchmark's kept-alive stream (_loadgen) takes the same deadline, armed for each request."""
    from ansible_collections.ascend.kvpool.plugins.module_utils import _loadgen

    srv = DripServer(gap=0.4, head=b'HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\ndata: {',
                     body=200)
    try:
        stream = _loadgen._Stream(srv.url, 1.0)  # pylint: disable=protected-access
        started = time.monotonic()
        out = stream.send('/v1/completions', {'prompt': 'x'}, 'completions')
        assert time.monotonic() - started < 2.0
        assert not out['ok'] and out['error']
    finally:
        srv.close()


class OneAnswer(object):
    """A loopback server that answers each connection with the same bytes, then closes it."""

    def __init__(self):
        self.answer = b''
        self.sock = socket.socket()
        self.sock.bind(('127.0.0.1', 0))
        self.sock.listen(16)
        self.url = 'http://127.0.0.1:%d/health' % self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, dummy = self.sock.accept()
            except OSError:
                return
            try:
                conn.settimeout(2)
                conn.recv(65536)
                conn.sendall(self.answer)
            except OSError:
                pass
            finally:
                conn.close()


@pytest.fixture(scope='module')
def one_answer():
    srv = OneAnswer()
    yield srv
    srv.sock.close()


ANSWERS = st.one_of(
    st.binary(max_size=300),
    st.builds(lambda code, head, body: b'HTTP/1.1 ' + code + b'\r\n' + head + b'\r\n\r\n' + body,
              st.sampled_from([b'200 OK', b'302 Found', b'500 Oops', b'999 X', b'abc', b'']),
              st.binary(max_size=80), st.binary(max_size=200)))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ANSWERS)
def test_whatever_a_peer_answers_http_status_gives_a_status_or_none_and_text(one_answer, answer):
    """Arbitrary bytes from a peer (garbage, a truncated or malformed status line or headers, any body): a status
    (an int) or None, and text; never an exception, never past the deadline."""
    one_answer.answer = answer
    started = time.monotonic()
    status, body = _proc.http_status(one_answer.url, timeout=2.0)
    assert time.monotonic() - started < 3.5
    assert (status is None or isinstance(status, int)) and isinstance(body, str)


def test_http_request_refuses_what_is_not_an_http_url():
    for url in ('file:///etc/passwd', 'ftp://h/x', 'http:///x'):
        with pytest.raises(ValueError):
            _proc.http_request(url, 1.0)
    assert _proc.http_status('file:///etc/passwd') == (None, '')


# --- real processes on this host -------------------------------------------------------------------------------------


# --- the wheel's Python wrapper of mooncake_master (up to 0.3.12.post1: subprocess.call of the packaged binary) ----
WRAPPER = ['/opt/kvpool-mooncake/bin/python3', '/opt/kvpool-mooncake/bin/mooncake_master', '--port=50088']
REAL = '/opt/kvpool-mooncake/lib/python3.11/site-packages/mooncake/mooncake_master'


def test_wrapper_child_is_the_real_binary_child():
    children = [(7, ['/bin/sh', '-c', 'x']), (8, [REAL, '--port=50088'])]
    assert _proc.wrapper_child(WRAPPER, children, 'mooncake_master') == 8


@pytest.mark.parametrize('argv, children', [
    ([REAL, '--port=50088'], [(8, [REAL])]),  # 0.3.13.post1 execs: the main process is the master itself
    (WRAPPER, []),  # the wrapper before its child started, or after it died
    (WRAPPER, [(8, ['/usr/bin/python3', 'mooncake_master'])]),  # a Python child is not the binary
    (['/usr/bin/python3', '/usr/local/bin/vllm', 'serve'], [(8, [REAL])]),  # another script
    (None, [(8, [REAL])]), ([], []), (['python3'], [(8, [REAL])]),
])
def test_wrapper_child_none_where_the_main_process_is_not_the_wrapper(argv, children):
    assert _proc.wrapper_child(argv, children, 'mooncake_master') is None


def test_wrapper_child_reads_the_children_only_for_a_wrapper():
    calls = []

    def children():
        calls.append(1)
        return [(8, [REAL])]
    assert _proc.wrapper_child([REAL, '--port=50088'], children, 'mooncake_master') is None and calls == []
    assert _proc.wrapper_child(WRAPPER, children, 'mooncake_master') == 8 and calls == [1]
