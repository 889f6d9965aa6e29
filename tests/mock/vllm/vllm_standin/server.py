"""The OpenAI-compatible HTTP surface of `vllm serve` (stdlib ThreadingHTTPServer, HTTP/1.1, SSE streaming).

Routes and shapes follow vLLM's OpenAI server: /health, /ping, /version, /v1/models, /metrics, /tokenize,
/detokenize, /v1/completions, /v1/chat/completions (stream and non-stream), and the render endpoints
/v1/{chat/,}completions/render for the releases that serve them (see _render_routes). --api-key (or VLLM_API_KEY)
guards /v1/* only, answering 401 {"error": "Unauthorized"} as vLLM's AuthenticationMiddleware does.
Generated text is SIMULATED filler; see engine.py for what is real.
"""

import json
import socket
import socketserver
import sys
import time
import traceback
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from . import emulated_version, log, reported_version, version_tuple
from .engine import Aborted, KvLoadFailed

REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 405: "Method Not Allowed",
           500: "Internal Server Error"}


class ApiError(Exception):
    def __init__(self, status, message, kind="BadRequestError", param=None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.kind = kind
        self.param = param


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, address, app):
        host = address[0]
        self.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.app = app
        super().__init__(address, Handler, bind_and_activate=False)

    def handle_error(self, request, client_address):
        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionResetError, BrokenPipeError, TimeoutError)):
            return  # a client went away; uvicorn does not log these either
        log.raw("ERROR:    Exception in ASGI application (client %s:%s)" % client_address[:2], sys.stderr)
        log.raw(traceback.format_exc().rstrip(), sys.stderr)

    def server_bind(self):
        # like vLLM's create_server_socket: bind now (port clashes fail before the engine starts), listen later
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # TCP_NODELAY on every connection, as uvicorn's asyncio transports have it (asyncio/selector_events.py,
    # _SelectorSocketTransport: base_events._set_nodelay). Without it each small SSE chunk after the headers waited
    # for the client's delayed ACK (~40 ms on Linux), time that real vLLM never adds and its TTFT metric never sees.
    disable_nagle_algorithm = True

    def version_string(self):
        return "uvicorn"

    def log_message(self, fmt, *args):  # noqa: D102 - http.server's own chatter (malformed requests etc.)
        log.raw("WARNING:  %s - %s" % (self.address_string(), fmt % args))

    def log_request(self, code="-", size="-"):
        if self.server.app.access_log:
            client = "%s:%s" % self.client_address[:2]
            log.raw('INFO:     %s - "%s" %s %s' % (client, self.requestline, code, REASONS.get(code, "")))

    # --- plumbing ----------------------------------------------------------------------------------
    def _send(self, status, body=b"", content_type="application/json"):
        self.send_response(status)
        if content_type:
            self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        if body and self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, status, obj):
        self._send(status, json.dumps(obj, separators=(",", ":")).encode())

    def _error(self, err):
        self._json(err.status, {"error": {"message": err.message, "type": err.kind, "param": err.param,
                                          "code": err.status}})

    def _body(self):
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        self._body_read = True
        try:
            data = json.loads(raw or b"null")
        except ValueError as exc:
            raise ApiError(400, "JSON decode error: %s" % exc) from None
        if not isinstance(data, dict):
            raise ApiError(400, "Request body must be a JSON object")
        return data

    def _authorized(self):
        keys = self.server.app.api_keys
        if not keys or self.command == "OPTIONS" or not self.path.split("?")[0].startswith("/v1"):
            return True
        return self.headers.get("Authorization", "") in ["Bearer " + key for key in keys]

    def _drain(self):
        """Read a request body no handler read (a 401, 404 or 405 answered before it), as uvicorn does: on a kept-alive
        connection its bytes would otherwise be parsed as the next request."""
        if getattr(self, "_body_read", False):
            return
        try:
            length = int(self.headers.get("content-length") or 0)
        except ValueError:
            length = 0
        if length > 0:
            try:
                self.rfile.read(length)
            except OSError:
                self.close_connection = True

    def send_response(self, code, message=None):
        self._status = code
        super().send_response(code, message)

    def _route(self, method):
        self._body_read = False
        self._status = None
        self._handler = "none"
        try:
            self._dispatch(method)
        finally:
            self._drain()
            if self._status is not None:
                self.server.app.metrics.count_http(self._handler, self.command, self._status)

    def _dispatch(self, method):
        path = self.path.split("?")[0]
        app = self.server.app
        routes = {
            # vLLM answers /health with an empty Response(): no content-type (seen on the real engine)
            ("GET", "/health"): lambda: self._send(200, content_type=None),
            ("GET", "/ping"): lambda: self._send(200),
            ("POST", "/ping"): lambda: self._send(200),
            ("GET", "/version"): lambda: self._json(200, {"version": reported_version()}),
            ("GET", "/v1/models"): lambda: self._json(200, app.models()),
            ("GET", "/metrics"): lambda: self._send(200, app.metrics_text().encode(),
                                                    "text/plain; version=0.0.4; charset=utf-8"),
            ("POST", "/tokenize"): self._tokenize,
            ("POST", "/detokenize"): self._detokenize,
            ("POST", "/v1/completions"): lambda: self._generate(chat=False),
            ("POST", "/v1/chat/completions"): lambda: self._generate(chat=True),
        }
        routes.update(self._render_routes())
        if any(route[1] == path for route in routes):
            self._handler = path
        if not self._authorized():
            self._json(401, {"error": "Unauthorized"})
            return
        handler = routes.get((method, path))
        if handler is None:
            if any(route[1] == path for route in routes):
                self._json(405, {"detail": "Method Not Allowed"})
            else:
                self._json(404, {"detail": "Not Found"})
            return
        try:
            handler()
        except ApiError as err:
            self._error(err)
        except KvLoadFailed as exc:
            self._error(ApiError(500, str(exc), kind="InternalServerError"))
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def do_GET(self):  # noqa: N802 - http.server naming
        self._route("GET")

    def do_HEAD(self):  # noqa: N802
        self._route("GET")

    def do_POST(self):  # noqa: N802
        self._route("POST")

    # --- endpoints ---------------------------------------------------------------------------------
    def _render_routes(self):
        """POST /v1/{chat/,}completions/render as the emulated release's vLLM serves it (read from the vLLM wheels'
        entrypoints, docs/router.md): none before 0.15.0; served from 0.15.0 to 0.29.x; from 0.30.0 only with
        --enable-scale-out, else not routed (404) in 0.30-0.31 and 403 PermissionDeniedError from 0.32."""
        version = version_tuple(emulated_version())
        if version < (0, 15, 0):
            return {}
        if version >= (0, 30, 0) and not getattr(self.server.app.args, "enable_scale_out", False):
            if version < (0, 32, 0):
                return {}
            return dict(((m, path), self._render_disabled) for m, path in
                        (("POST", "/v1/chat/completions/render"), ("POST", "/v1/completions/render")))
        return {("POST", "/v1/chat/completions/render"): lambda: self._render(chat=True),
                ("POST", "/v1/completions/render"): lambda: self._render(chat=False)}

    def _render_disabled(self):
        self._json(403, {"error": {"message": "Scale-out endpoints are disabled. Restart vllm serve with "
                                              "--enable-scale-out to enable them.",
                                   "type": "PermissionDeniedError", "param": None, "code": 403}})

    def _render(self, chat):
        """The prompt's token ids without generating (vLLM 0.18+ shape: a GenerateRequest, a list of them for
        completions; 0.15-0.17 returned the prompts as a list)."""
        app = self.server.app
        body = self._body()
        app.check_model(body.get("model"))
        if chat:
            text = app.chat_text(body.get("messages"))
            ids = app.engine.tokenizer.encode(text)
        else:
            text, ids = None, app.prompt_ids(body.get("prompt"))
        if version_tuple(emulated_version()) < (0, 18, 0):
            prompt = {"prompt": text, "prompt_token_ids": ids}
            self._json(200, [body.get("messages") or [], [prompt]] if chat else [prompt])
            return
        params = app.sampling_params(body, len(ids), chat)
        doc = {"request_id": ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex, "token_ids": ids,
               "features": None, "sampling_params": {"max_tokens": params["max_tokens"]},
               "model": body.get("model"), "stream": bool(body.get("stream", False)), "stream_options": None,
               "cache_salt": None, "priority": 0, "kv_transfer_params": None}
        self._json(200, doc if chat else [doc])

    def _tokenize(self):
        app = self.server.app
        body = self._body()
        if "messages" in body:
            ids = app.engine.tokenizer.encode(app.chat_text(body["messages"]))
        else:
            ids = app.prompt_ids(body.get("prompt"))
        self._json(200, {"count": len(ids), "max_model_len": app.max_model_len, "tokens": ids, "token_strs": None})

    def _detokenize(self):
        raise ApiError(400, "[sim] /detokenize is not simulated: the toy tokenizer's ids (crc32 of words) are not "
                            "reversible")

    def _generate(self, chat):
        app = self.server.app
        body = self._body()
        name = app.check_model(body.get("model"))
        if chat:
            messages = body.get("messages")
            text = app.chat_text(messages)
            token_ids = app.engine.tokenizer.encode(text)
            seed_text = text
        else:
            token_ids = app.prompt_ids(body.get("prompt"))
            seed_text = " ".join(str(t) for t in token_ids[:64])
        params = app.sampling_params(body, len(token_ids), chat)
        stream = bool(body.get("stream", False))
        include_usage = bool((body.get("stream_options") or {}).get("include_usage", False))
        created = int(time.time())
        rid = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex
        gen = app.engine.generate(token_ids, params["max_tokens"], params["ignore_eos"], seed_text)
        if stream:
            self._stream(gen, chat, rid, created, name, len(token_ids), include_usage)
        else:
            self._complete(gen, chat, rid, created, name, len(token_ids))

    def _complete(self, gen, chat, rid, created, name, prompt_tokens):
        pieces = []
        finish = None
        for text, reason in gen:
            pieces.append(text)
            finish = reason
        content = "".join(pieces)
        usage = {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens + len(pieces),
                 "completion_tokens": len(pieces), "prompt_tokens_details": None}
        if chat:
            choice = {"index": 0, "message": {"role": "assistant", "content": content, "refusal": None,
                                              "annotations": None, "audio": None, "function_call": None,
                                              "tool_calls": [], "reasoning_content": None},
                      "logprobs": None, "finish_reason": finish, "stop_reason": None}
            obj = {"id": rid, "object": "chat.completion", "created": created, "model": name, "choices": [choice],
                   "service_tier": None, "system_fingerprint": None, "usage": usage, "prompt_logprobs": None,
                   "kv_transfer_params": None}
        else:
            choice = {"index": 0, "text": content, "logprobs": None, "finish_reason": finish, "stop_reason": None,
                      "prompt_logprobs": None}
            obj = {"id": rid, "object": "text_completion", "created": created, "model": name, "choices": [choice],
                   "service_tier": None, "system_fingerprint": None, "usage": usage, "kv_transfer_params": None}
        self._json(200, obj)

    def _stream(self, gen, chat, rid, created, name, prompt_tokens, include_usage):
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        kind = "chat.completion.chunk" if chat else "text_completion"

        def event(choices, usage=None):
            obj = {"id": rid, "object": kind, "created": created, "model": name, "choices": choices}
            if usage is not None:
                obj["usage"] = usage
            return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"

        def send(data):
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()

        produced = 0
        try:
            for text, finish in gen:
                produced += 1
                if chat:
                    choice = {"index": 0, "delta": {"content": text}, "logprobs": None, "finish_reason": finish}
                else:
                    choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}
                if finish is not None:
                    choice["stop_reason"] = None
                data = event([choice])
                if chat and produced == 1:
                    # vLLM sends the role chunk when the first output arrives, right before its content
                    role = {"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None,
                            "finish_reason": None}
                    data = event([role]) + data
                send(data)
            if include_usage:
                send(event([], {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens + produced,
                                "completion_tokens": produced}))
            send(b"data: [DONE]\n\n")
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, Aborted, KvLoadFailed):
            self.close_connection = True
            self.server.app.metrics.inc_success("abort")
        finally:
            gen.close()
