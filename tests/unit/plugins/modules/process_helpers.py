# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Shared by the tests of the process-managing modules (mooncake_master, vllm_server) and of the HTTP modules
(vllm_router_check, vllm_rollout: ``Server``, a small HTTP server whose answers a test function gives)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# `docker exec -i [-e VAR]... NAME argv...` runs argv here (a `-e VAR` without a value is taken from this process's
# environment, as docker does, so argv inherits it); `docker inspect` says the container runs ("gone" does not
# exist). Every call is logged with its arguments.
FAKE_DOCKER = r'''#!/bin/sh
echo "$*" >> "%(log)s"
case "$1" in
  inspect) [ "$4" = "gone" ] && { echo "Error: No such object: $4" >&2; exit 1; }; echo true ;;
  exec) shift 2; while [ "$1" = "-e" ]; do shift 2; done; shift; exec "$@" ;;
esac
'''


def free_port():
    s = socket.socket()
    s.bind(('127.0.0.1', 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Server(object):
    """An HTTP server on 127.0.0.1 whose answers are ``handler(method, path, body) -> (code, body)``."""

    def __init__(self, handler, port=None):
        self.port = port or free_port()
        self.url = 'http://127.0.0.1:%d' % self.port
        outer = self

        class H(BaseHTTPRequestHandler):
            def _do(self, method):
                length = int(self.headers.get('Content-Length') or 0)
                body = self.rfile.read(length) if length else b''
                code, out = handler(method, self.path, body)
                out = out if isinstance(out, bytes) else json.dumps(out).encode()
                self.send_response(code)
                self.send_header('Content-Length', str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def do_GET(self):  # noqa: N802
                self._do('GET')

            def do_POST(self):  # noqa: N802
                self._do('POST')

            def log_message(self, *args):
                pass
        self.srv = ThreadingHTTPServer(('127.0.0.1', self.port), H)
        thread = threading.Thread(target=self.srv.serve_forever, kwargs={'poll_interval': 0.05})
        thread.daemon = True
        thread.start()
        outer.handler = handler

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()
