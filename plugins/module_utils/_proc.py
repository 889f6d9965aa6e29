# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Pure helpers about processes and readiness polls, shared by the service modules and the pre-flight.

The collection no longer supervises processes itself (no pid files, no signals to recorded pids): services are
systemd units or containers (``_service.py``). What is left here reads ``/proc`` texts (``stat_fields``,
``parse_cmdline``, ``wrapper_child``), trims logs (``tail_text``) and polls readiness briskly with an overall
timeout (``tcp_open``, ``wait_until``, and ``http_status`` over ``http_request``, the collection's one plain HTTP
client: ``http.client`` with one deadline for the whole request, redirects never followed); ``split_target`` and
``try_connect`` check a ``host:port`` target once, with the error text. The polls run from the module's own
process, in the host's network namespace: a service container shares the host network, so its ports are probed
where they bind.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import http.client as http_client
import io
import json
import os
import re
import socket
import time
from urllib.parse import unquote, urlsplit

from ansible_collections.ascend.kvpool.plugins.module_utils._shared import is_port


def stat_fields(stat_text):
    """Fields 3.. of a /proc/<pid>/stat line (after the parenthesised command name), or None."""
    if not stat_text:
        return None
    if isinstance(stat_text, bytes):
        stat_text = stat_text.decode('utf-8', 'replace')
    close = stat_text.rfind(')')
    if close < 0:
        return None
    return stat_text[close + 1:].split()


def parse_cmdline(raw):
    """/proc/<pid>/cmdline (NUL separated) as a list of str."""
    if raw is None:
        return None
    if isinstance(raw, str):
        raw = raw.encode('utf-8', 'surrogateescape')
    parts = raw.split(b'\0')
    if parts and parts[-1] == b'':
        parts = parts[:-1]
    return [p.decode('utf-8', 'replace') for p in parts]


PYTHON_NAME = re.compile(r'^python[0-9.]*$')


def wrapper_child(argv, children, name):
    """The pid of the real ``name`` process when ``argv`` (a main process's) is a Python console script named
    ``name`` that runs it as a child, else None. ``children``: [(pid, argv)] of that process's children, or a
    callable giving them (called only when ``argv`` is such a script: reading them costs a scan of /proc).

    The wheel's ``mooncake_master`` up to 0.3.12.post1 is such a script (``subprocess.call`` of the packaged
    binary); from 0.3.13 it ``exec``s the binary, so the main process is the master itself."""
    if not argv or len(argv) < 2 or not PYTHON_NAME.match(os.path.basename(argv[0])):
        return None
    if os.path.basename(argv[1]) != name:
        return None
    for pid, child in (children() if callable(children) else children):
        if child and os.path.basename(child[0]) == name and not PYTHON_NAME.match(os.path.basename(child[0])):
            return pid
    return None


def tail_text(text, lines=40, max_chars=6000):
    """The last ``lines`` lines of ``text`` (at most ``max_chars`` characters), as one string."""
    if not text:
        return ''
    if isinstance(text, bytes):
        text = text.decode('utf-8', 'replace')
    out = '\n'.join(text.rstrip('\n').split('\n')[-int(lines):]) if lines > 0 else ''
    if len(out) > max_chars:
        out = out[-max_chars:]
    return out


def tcp_open(host, port, timeout=0.5):
    """True when a TCP connection to host:port is accepted within ``timeout`` seconds."""
    try:
        sock = socket.create_connection((host, int(port)), timeout=timeout)
    except (OSError, socket.error, ValueError):
        return False
    try:
        sock.close()
    except (OSError, socket.error):
        pass
    return True


def split_target(target):
    """'host:port' or '[v6]:port' -> (host, port); ValueError when malformed."""
    host, sep, port = target.rpartition(':')
    # getaddrinfo wraps a port over 65535 (70000 -> 4464), so an out-of-range port would probe another port.
    if not sep or not host or not is_port(port):
        raise ValueError(target)
    return host.strip('[]'), int(port)


def try_connect(target, timeout):
    """One TCP connection to ``target`` within ``timeout`` seconds: ``ok``, ``error`` (empty when it connected; the
    socket's text, such as ``[Errno 111] Connection refused`` or ``timed out``) and ``ms``."""
    t0 = time.time()
    try:
        host, port = split_target(target)
        sock = socket.create_connection((host, port), timeout=timeout)
        sock.close()
        error = ''
    except ValueError:
        error = 'not host:port'
    except (socket.error, OSError) as exc:
        error = str(exc) or exc.__class__.__name__
    return {'ok': not error, 'error': error, 'ms': round((time.time() - t0) * 1000, 1)}


# --- HTTP: one plain client with a whole-request deadline ------------------------------------------------------------
# http.client, not urllib or ansible.module_utils.urls: a socket timeout bounds each read, so a server that answers
# one byte every 0.4 s held a request (status line, headers, body) for as long as it liked. Here every connect, send
# and receive gets the time left until one deadline, taken when the request starts, so ``timeout`` bounds the whole
# request, the reads of its body included. Redirects are never followed (http.client does not): a 3xx answer is the
# answer, and the request's headers (``Authorization: Bearer <key>``) go nowhere else. Proxies and ``~/.netrc`` are
# never used. Not bounded: the name lookup of a host name (getaddrinfo; the collection's URLs carry addresses).
_TLS = []  # one TLS context for every https request of the process (building one loads the CA certificates)


def _tls_context():
    if not _TLS:
        import ssl

        _TLS.append(ssl.create_default_context())
    return _TLS[0]


def _time_left(deadline, total):
    left = deadline - time.monotonic()
    if left <= 0:
        raise socket.timeout('no complete answer within %g s (the whole request)' % total)
    return left


class _DeadlineSocket(object):
    """A connected socket (plain or TLS) whose every send and receive ends by ``deadline`` (``time.monotonic``):
    each one waits at most the time left. http.client reads the answer through ``makefile('rb')``, a
    ``socket.SocketIO`` over this object, so the reads of the status line, the headers and the body are bounded
    too; the socket is closed once the connection and every such reader are closed, as ``socket.socket`` does."""

    def __init__(self, sock, deadline, total):
        self._sock = sock
        self.deadline = deadline
        self.total = total
        self._readers = 0
        self._closed = False

    def _within(self, method, *args):
        self._sock.settimeout(_time_left(self.deadline, self.total))
        try:
            return method(*args)
        except socket.timeout as exc:
            raise socket.timeout('no complete answer within %g s (the whole request)' % self.total) from exc

    def recv_into(self, *args):
        return self._within(self._sock.recv_into, *args)

    def recv(self, *args):
        return self._within(self._sock.recv, *args)

    def sendall(self, *args):
        return self._within(self._sock.sendall, *args)

    def makefile(self, mode='rb', buffering=None):  # pylint: disable=unused-argument
        if mode not in ('r', 'rb'):
            raise ValueError('only a reader: mode %r' % mode)
        self._readers += 1
        return io.BufferedReader(socket.SocketIO(self, 'rb'), io.DEFAULT_BUFFER_SIZE)

    def _decref_socketios(self):
        self._readers -= 1
        if self._closed and self._readers <= 0:
            self._sock.close()

    def close(self):
        self._closed = True
        if self._readers <= 0:
            self._sock.close()

    def __getattr__(self, name):
        return getattr(self._sock, name)


def _arm(conn, seconds):
    conn.total = float(seconds)
    conn.deadline = time.monotonic() + conn.total
    if isinstance(conn.sock, _DeadlineSocket):  # a kept-alive connection: its next request
        conn.sock.deadline, conn.sock.total = conn.deadline, conn.total


def _connect(conn, base):
    conn.timeout = _time_left(conn.deadline, conn.total)  # the TCP connect (and the TLS handshake) get the time left
    base.connect(conn)
    conn.sock = _DeadlineSocket(conn.sock, conn.deadline, conn.total)


class DeadlineHTTPConnection(http_client.HTTPConnection):
    """``http.client.HTTPConnection`` whose requests end by a deadline: ``arm(seconds)`` sets it for the next
    request (its connect included)."""

    deadline = 0.0
    total = 0.0

    def arm(self, seconds):
        _arm(self, seconds)

    def connect(self):
        _connect(self, http_client.HTTPConnection)


class DeadlineHTTPSConnection(http_client.HTTPSConnection):
    """``http.client.HTTPSConnection`` (the process's one TLS context) whose requests end by the deadline of
    ``arm``."""

    deadline = 0.0
    total = 0.0

    def arm(self, seconds):
        _arm(self, seconds)

    def connect(self):
        _connect(self, http_client.HTTPSConnection)


def connection(scheme, host, port, timeout):
    """A connection to ``host:port`` (``scheme`` http or https) whose first request ends within ``timeout`` seconds
    (``arm`` it again before each further request)."""
    if scheme == 'https':
        conn = DeadlineHTTPSConnection(host, port, timeout=timeout, context=_tls_context())
    else:
        conn = DeadlineHTTPConnection(host, port, timeout=timeout)
    conn.arm(timeout)
    return conn


class _Answer(object):
    """The answer of ``http_request``: ``status``, ``reason``, ``headers``, ``getcode()``, ``getheader()``,
    ``read([n])``, ``readline()``; every read ends by the request's deadline. ``close()`` ends the connection."""

    def __init__(self, conn, resp):
        self._conn = conn
        self._resp = resp
        self.status = resp.status
        self.reason = resp.reason
        self.headers = resp.msg

    def getcode(self):
        return self.status

    def getheader(self, name, default=None):
        return self._resp.getheader(name, default)

    def read(self, amt=None):
        return self._resp.read(amt)

    def readline(self, limit=-1):
        return self._resp.readline(limit)

    def close(self):
        try:
            self._resp.close()
        finally:
            self._conn.close()


def http_request(url, timeout, headers=None, data=None):
    """``(status, answer)`` of one GET of ``url``, or POST of the bytes ``data``, whatever the status (a 3xx is
    returned as it is, never followed). ``timeout`` seconds bound the whole request: connect, send, status line,
    headers, and every read of the body through ``answer`` (close it when done). Raises OSError (refused, reset,
    ``socket.timeout`` at the deadline), ``http.client.HTTPException`` (no HTTP answer) or ValueError (not an
    http(s) URL with a host)."""
    parts = urlsplit(url)
    if parts.scheme not in ('http', 'https') or not parts.hostname:
        raise ValueError('%s is not an http:// or https:// URL with a host' % url)
    conn = connection(parts.scheme, parts.hostname, parts.port, timeout)
    path = (parts.path or '/') + ('?' + parts.query if parts.query else '')
    sent = {'User-Agent': 'ascend.kvpool', 'Connection': 'close'}
    if parts.username is not None:  # http://user:password@host as urllib reads it: basic authentication
        pair = '%s:%s' % (unquote(parts.username), unquote(parts.password or ''))
        sent['Authorization'] = 'Basic %s' % base64.b64encode(pair.encode('utf-8')).decode('ascii')
    sent.update(headers or {})
    try:
        conn.request('POST' if data is not None else 'GET', path, body=data, headers=sent)
        resp = conn.getresponse()
    except BaseException:
        conn.close()
        raise
    return resp.status, _Answer(conn, resp)


def http_status(url, timeout=1.0, headers=None, data=None, limit=65536):
    """(status, body) of a GET of ``url``, or of a POST of ``data`` (a JSON-able document, sent as
    ``application/json``), through ``http_request``; status None when nothing answered.

    ``headers`` adds request headers (e.g. ``Authorization``); they are sent, never returned or logged. At most
    ``limit`` bytes of the body are read. ``timeout`` bounds the whole request, from the connect to the last byte
    read (a body that broke off or did not end in time is no answer, unless the status was an error). A redirect
    comes back as its 3xx status: never followed, so the headers go nowhere else.
    """
    sent = dict(headers or {})
    payload = None
    if data is not None:
        payload = json.dumps(data).encode('utf-8')
        sent['Content-Type'] = 'application/json'
    try:
        status, resp = http_request(url, timeout, sent, payload)
    except Exception:  # pylint: disable=broad-except  # OSError, socket.timeout, HTTPException, ValueError
        return None, ''
    try:
        return status, resp.read(limit).decode('utf-8', 'replace')
    except Exception:  # pylint: disable=broad-except  # the answer broke off: an error status stays one
        return (status, '') if status >= 400 else (None, '')
    finally:
        resp.close()


def wait_until(checks, timeout, interval=0.1, alive=None, clock=time.monotonic, sleep=time.sleep):
    """Poll named checks until all pass, the process dies, or ``timeout`` seconds elapse.

    ``checks`` is a list of (name, callable returning bool); a check that passed is not polled again.
    ``alive`` is an optional callable; when it returns False the wait ends at once.
    Returns a dict: ready, elapsed (s), passed (names), pending (names), died, polls.
    """
    started = clock()
    deadline = started + max(0.0, float(timeout))
    pending = list(checks)
    passed = []
    polls = 0
    died = False
    while True:
        polls += 1
        still = []
        for name, fn in pending:
            if fn():
                passed.append(name)
            else:
                still.append((name, fn))
        pending = still
        if not pending:
            break
        if alive is not None and not alive():
            died = True
            break
        if clock() >= deadline:
            break
        sleep(max(0.0, min(float(interval), deadline - clock())))
    return {
        'ready': not pending,
        'elapsed': round(clock() - started, 3),
        'passed': passed,
        'pending': [item[0] for item in pending],
        'died': died,
        'polls': polls,
    }
