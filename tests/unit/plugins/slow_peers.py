# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Hostile and broken peers on loopback for the deadline tests: a server that answers one byte at a time, and a
redirecting server that records who followed it."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import socket
import threading
import time


class DripServer(object):
    """A fake server on 127.0.0.1 that answers every request one byte every ``gap`` seconds (a hung or hostile
    peer): ``head`` (default: a 200 status line and headers announcing ``body`` bytes), then ``body`` bytes."""

    def __init__(self, gap=0.4, body=200, head=b'', port=0):
        self.gap, self.body, self.head = gap, body, head
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(('127.0.0.1', port))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.url = 'http://127.0.0.1:%d' % self.port
        self.requests = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, dummy = self.sock.accept()
            except OSError:
                return
            self.requests += 1
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn):
        answer = self.head or b'HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n' % self.body
        try:
            conn.recv(65536)
            for byte in answer + b'x' * self.body:
                conn.sendall(bytes([byte]))
                time.sleep(self.gap)
        except OSError:
            pass
        finally:
            conn.close()

    def close(self):
        self.sock.close()


class Recorder(object):
    """An HTTP server on 127.0.0.1 that answers 200 to anything and records each request's path and
    Authorization header: the place a redirect points to."""

    def __init__(self):
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        seen = self.seen = []

        class Handler(BaseHTTPRequestHandler):
            def _do(self):
                length = int(self.headers.get('Content-Length') or 0)
                if length:
                    self.rfile.read(length)
                seen.append((self.path, self.headers.get('Authorization')))
                self.send_response(200)
                self.send_header('Content-Length', '2')
                self.end_headers()
                self.wfile.write(b'{}')

            def do_GET(self):  # noqa: N802
                self._do()

            def do_POST(self):  # noqa: N802
                self._do()

            def log_message(self, *args):
                pass

        self.srv = ThreadingHTTPServer(('127.0.0.1', 0), Handler)
        self.url = 'http://127.0.0.1:%d' % self.srv.server_address[1]
        threading.Thread(target=self.srv.serve_forever, kwargs={'poll_interval': 0.05}, daemon=True).start()

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


class Redirect(object):
    """An HTTP server on 127.0.0.1 that answers every request with ``code`` and a Location to ``target``."""

    def __init__(self, target, code=302):
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        class Handler(BaseHTTPRequestHandler):
            def _do(self):
                length = int(self.headers.get('Content-Length') or 0)
                if length:
                    self.rfile.read(length)
                self.send_response(code)
                self.send_header('Location', target + self.path)
                self.send_header('Content-Length', '0')
                self.end_headers()

            def do_GET(self):  # noqa: N802
                self._do()

            def do_POST(self):  # noqa: N802
                self._do()

            def log_message(self, *args):
                pass

        self.srv = ThreadingHTTPServer(('127.0.0.1', 0), Handler)
        self.url = 'http://127.0.0.1:%d' % self.srv.server_address[1]
        threading.Thread(target=self.srv.serve_forever, kwargs={'poll_interval': 0.05}, daemon=True).start()

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()
