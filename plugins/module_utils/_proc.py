# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Pure helpers about processes and readiness polls, shared by the service modules and the pre-flight.

The collection no longer supervises processes itself (no pid files, no signals to recorded pids): services are
systemd units or containers (``_service.py``). What is left here reads ``/proc`` texts (``stat_fields``,
``parse_cmdline``, ``wrapper_child``), trims logs (``tail_text``) and polls readiness briskly with an overall
timeout (``tcp_open``, ``wait_until``, and ``http_status`` over ``http_request``, the collection's one plain HTTP
client, through ``ansible.module_utils.urls``); ``split_target`` and ``try_connect`` check a ``host:port`` target
once, with the error text. The polls run from the module's own process, in the host's network namespace: a service
container shares the host network, so its ports are probed where they bind.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import re
import socket
import time

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


_REQUEST = []  # the one ansible.module_utils.urls.Request of this process (see http_request)


def _requester():
    # Imported here: ansible.module_utils.urls pulls in http.client, ssl and email (~15 ms), which the filter plugins
    # that import this file (through _mooncake) pay again in every forked Ansible worker and never use.
    if not _REQUEST:
        import ssl

        from ansible.module_utils.urls import Request

        # Redirects are never followed: the old http.client client did not, and urllib would forward the request's
        # headers (Authorization: Bearer <key>) to wherever a redirect points.
        options = dict(use_proxy=False, use_netrc=False, http_agent='ascend.kvpool', follow_redirects='none')
        try:
            # One TLS context for every request of the process: open_url builds one per request, loading the CA
            # certificates again (about 30 ms, 90 times a plain request to localhost, measured with ansible-core
            # 2.19), which a health poll every 0.1 s would pay each time.
            request = Request(context=ssl.create_default_context(), **options)
        except TypeError:  # ansible-core 2.16 takes no context: a new one per request
            request = Request(**options)
        _REQUEST.append(request)
    return _REQUEST[0]


def http_request(url, timeout, headers=None, data=None):
    """``(status, response)`` of one GET of ``url``, or POST of the bytes ``data``, through
    ``ansible.module_utils.urls`` (proxies and ``~/.netrc`` bypassed). An HTTP error status comes back with its
    ``HTTPError`` as the response (it reads like one). Raises OSError (``URLError``, a timeout, a reset, and
    ``ansible.module_utils.urls.ConnectionError`` turned into one) or ``http.client.HTTPException`` when nothing
    answered."""
    from urllib.error import HTTPError

    from ansible.module_utils.urls import ConnectionError as UrlsConnectionError

    try:
        resp = _requester().open('POST' if data is not None else 'GET', url, data=data, headers=dict(headers or {}),
                                 timeout=timeout)
    except HTTPError as exc:
        return exc.code, exc
    except UrlsConnectionError as exc:
        raise OSError(str(exc)) from exc
    return resp.getcode(), resp


def http_status(url, timeout=1.0, headers=None, data=None, limit=65536):
    """(status, body) of a GET of ``url``, or of a POST of ``data`` (a JSON-able document, sent as
    ``application/json``), through ``http_request``; status None when nothing answered.

    ``headers`` adds request headers (e.g. ``Authorization``); they are sent, never returned or logged. At most
    ``limit`` bytes of the body are read.
    """
    sent = dict(headers or {})
    payload = None
    if data is not None:
        payload = json.dumps(data).encode('utf-8')
        sent['Content-Type'] = 'application/json'
    try:
        status, resp = http_request(url, timeout, sent, payload)
    except Exception:  # pylint: disable=broad-except  # URLError, OSError, urls.ConnectionError, RemoteDisconnected
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
