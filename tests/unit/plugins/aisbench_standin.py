# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""SIMULATED ``ais_bench`` and a SIMULATED OpenAI-compatible server, for the module tests of ``tool=aisbench``.

The real AISBench (PyPI ``ais_bench_benchmark``, with torch) is too heavy for CI; this stand-in does what the module
relies on, and no more:

- ``ais_bench --help`` prints a usage line (the module's start check); ``MODE`` ``broken`` dies at import the way
  3.1.20260630 does with a pyarrow built for numpy 2.
- A run (``--models NAME --custom-dataset-path P --config-dir D --work-dir W ...``) reads the model config the
  module rendered (``D/models/NAME.py``, executed with stub ``ais_bench`` modules: ``models[0]`` gives
  ``host_ip``, ``host_port``, ``model``, ``path``, ``batch_size``, ``max_out_len``, ``api_key``), fails like
  AISBench's tokenizer when ``path`` does not exist, sends every ``question`` of the custom ``qa`` dataset as
  ``Question: <q>\\nAnswer: `` (AISBench's template) in a streaming chat request to ``http://host_ip:host_port``,
  ``batch_size`` at a time, and writes AISBench's real output layout ``W/<YYYYMMDD_HHMMSS>/performances/
  vllm-api-stream-chat/<dataset>.json`` and ``.csv``, with the key names and value formats of a real run
  (``/work/shared/reference/aisbench-output/``): ``"641.5562 ms"``, ``"Concurrency": {"total": 7.7276}`` beside
  ``"Max Concurrency": {"total": 25}``. ``Concurrency`` is computed as AISBench does: the requests' summed
  end-to-end time over the benchmark's duration.
- ``MODE`` ``fail`` prints a log of more than 20 lines, echoing the model config with its API key (as a debug log
  would), and exits 1 without results.

``write(path, mode)`` writes an executable ``ais_bench`` that runs this file with the test's Python (no shebang
in the repository, so no sanity ignore is needed).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import sys
import threading
import time
import types

try:
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
except ImportError:  # pragma: no cover - Python 2 is not a controller Python
    BaseHTTPRequestHandler = ThreadingHTTPServer = None

# Set by the ais_bench that write() makes (runpy's init_globals); ok when run otherwise.
MODE = globals().get('KVPOOL_STANDIN_MODE', 'ok')


def write(path, mode='ok'):
    """An executable ``ais_bench`` at ``path`` that runs this stand-in in ``mode`` (``ok``, ``fail``, ``broken``)."""
    with open(str(path), 'w') as handle:
        handle.write('#!%s\nimport runpy, sys\nsys.argv[0] = %r\nrunpy.run_path(%r, '
                     'init_globals={"KVPOOL_STANDIN_MODE": %r}, run_name="__main__")\n'
                     % (sys.executable, str(path), os.path.abspath(__file__.replace('.pyc', '.py')), mode))
    os.chmod(str(path), 0o755)
    return str(path)


# --- the SIMULATED OpenAI-compatible server -------------------------------------------------------------------------
class _Handler(BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'

    def log_message(self, *args):
        pass

    def _chunk(self, data):
        self.wfile.write(b'%x\r\n%s\r\n' % (len(data), data))
        self.wfile.flush()

    def do_POST(self):
        server = self.server
        body = json.loads(self.rfile.read(int(self.headers['Content-Length'])))
        with server.lock:
            server.active += 1
            server.max_active = max(server.max_active, server.active)
            server.prompts.append(body['messages'][0]['content'])
            server.auth.append(self.headers.get('Authorization'))
        done = False
        try:
            self.send_response(200)
            self.send_header('Content-Type', 'text/event-stream')
            self.send_header('Transfer-Encoding', 'chunked')
            self.end_headers()
            time.sleep(server.delay)
            for n in range(int(body.get('max_tokens') or 1)):
                event = {'choices': [{'index': 0, 'delta': {'content': 'tok%d ' % n}}]}
                self._chunk(b'data: ' + json.dumps(event).encode() + b'\n\n')
                time.sleep(0.002)
            # The request ends here for the count: before [DONE], which lets the client send its next request on a
            # new connection (a new handler thread), so that one can never be counted while this one still is.
            with server.lock:
                server.active -= 1
                done = True
            self._chunk(b'data: [DONE]\n\n')
            self._chunk(b'')
        finally:
            if not done:
                with server.lock:
                    server.active -= 1


class FakeServer(object):
    """SIMULATED streaming chat server on loopback: every request waits ``delay`` s, then streams ``max_tokens``
    tokens; it records the prompts, the Authorization headers and the most requests it had in flight at once."""

    def __init__(self, delay=0.02):
        self.srv = ThreadingHTTPServer(('127.0.0.1', 0), _Handler)
        self.srv.daemon_threads = True
        self.srv.lock = threading.Lock()
        self.srv.active = self.srv.max_active = 0
        self.srv.prompts, self.srv.auth = [], []
        self.srv.delay = delay
        self.thread = threading.Thread(target=self.srv.serve_forever, kwargs={'poll_interval': 0.05}, daemon=True)
        self.url = 'http://127.0.0.1:%d' % self.srv.server_address[1]

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.srv.shutdown()
        self.srv.server_close()


# --- the SIMULATED ais_bench ----------------------------------------------------------------------------------------
def _args(argv):
    out, key = {}, None
    for item in argv:
        if item.startswith('--'):
            key = item[2:]
            out[key] = True
        elif key:
            out[key] = item
            key = None
    return out


def _model(config_dir, name):
    stubs = {}
    for mod in ('ais_bench', 'ais_bench.benchmark', 'ais_bench.benchmark.models', 'ais_bench.benchmark.utils',
                'ais_bench.benchmark.utils.model_postprocessors'):
        stubs[mod] = types.ModuleType(mod)
    stubs['ais_bench.benchmark.models'].VLLMCustomAPIChatStream = 'VLLMCustomAPIChatStream'
    stubs['ais_bench.benchmark.utils.model_postprocessors'].extract_non_reasoning_content = None
    sys.modules.update(stubs)
    scope = {}
    with open(os.path.join(config_dir, 'models', name + '.py')) as handle:
        exec(compile(handle.read(), name, 'exec'), scope)  # pylint: disable=exec-used  # the rendered config
    return scope['models'][0]


def _send(model, question, out, index):
    import http.client
    conn = http.client.HTTPConnection(model['host_ip'], model['host_port'], timeout=30)
    body = {'model': model['model'], 'stream': True, 'max_tokens': model['max_out_len'],
            'messages': [{'role': 'user', 'content': 'Question: %s\nAnswer: ' % question}]}
    headers = {'Content-Type': 'application/json'}
    if model.get('api_key'):
        headers['Authorization'] = 'Bearer %s' % model['api_key']
    start = time.perf_counter()
    first, tokens = None, 0
    conn.request('POST', '/v1/chat/completions', json.dumps(body), headers)
    resp = conn.getresponse()
    for line in resp:
        line = line.strip()
        if line == b'data: [DONE]':
            break
        if line.startswith(b'data:'):
            tokens += 1
            if first is None:
                first = time.perf_counter()
    end = time.perf_counter()
    conn.close()
    out[index] = {'ttft': (first - start) * 1000.0, 'e2e': (end - start) * 1000.0, 'tokens': tokens,
                  'tpot': (end - first) * 1000.0 / max(1, tokens - 1)}


def _stats(values, unit, digits=1):
    data = sorted(values)

    def pct(p):
        rank = (len(data) - 1) * p / 100.0
        low = int(rank)
        high = min(low + 1, len(data) - 1)
        return data[low] + (data[high] - data[low]) * (rank - low)

    fmt = '%.' + str(digits) + 'f' + ((' ' + unit) if unit else '')
    return [fmt % (sum(data) / len(data)), fmt % data[0], fmt % data[-1], fmt % pct(50), fmt % pct(75),
            fmt % pct(90), fmt % pct(99), str(len(data))]


def run(argv):
    args = _args(argv)
    if MODE == 'broken':
        sys.stderr.write('Traceback (most recent call last):\n  File "ais_bench", line 5, in <module>\n'
                         'ImportError: numpy.core.multiarray failed to import (SIMULATED: pyarrow built for '
                         'numpy 2)\n')
        return 1
    if args.get('help'):
        print('usage: ais_bench [-h] [--models MODELS ...] (SIMULATED stand-in)')
        return 0
    model = _model(args['config-dir'], args['models'])
    if MODE == 'fail':
        for n in range(30):
            print('[SIMULATED ais_bench] log line %d' % n)
        print('models = [dict(host_ip=%r, api_key="%s", path=%r)]'
              % (model['host_ip'], model.get('api_key', ''), model['path']))
        sys.stderr.write('RuntimeError: SIMULATED failure after the requests\n')
        return 1
    if not model['path'] or not os.path.isdir(model['path']):
        sys.stderr.write("OSError: Can't load tokenizer for '%s' (SIMULATED)\n" % model['path'])
        return 1
    with open(args['custom-dataset-path']) as handle:
        questions = [json.loads(line)['question'] for line in handle if line.strip()]
    results = [None] * len(questions)
    pending = list(range(len(questions)))
    lock = threading.Lock()

    def worker():
        while True:
            with lock:
                if not pending:
                    return
                index = pending.pop(0)
            _send(model, questions[index], results, index)

    started = time.perf_counter()
    threads = [threading.Thread(target=worker) for unused in range(min(model['batch_size'], len(questions)))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    duration = (time.perf_counter() - started) * 1000.0
    dataset = os.path.splitext(os.path.basename(args['custom-dataset-path']))[0]
    perf = os.path.join(args['work-dir'], time.strftime('%Y%m%d_%H%M%S'), 'performances', model['abbr'])
    os.makedirs(perf)
    rows = [('E2EL', [r['e2e'] for r in results], 'ms'), ('TTFT', [r['ttft'] for r in results], 'ms'),
            ('TPOT', [r['tpot'] for r in results], 'ms'), ('OutputTokens', [r['tokens'] for r in results], '')]
    with open(os.path.join(perf, dataset + '.csv'), 'w') as handle:
        handle.write('Performance Parameters,Stage,Average,Min,Max,Median,P75,P90,P99,N\n')
        for name, values, unit in rows:
            handle.write(','.join([name, 'total'] + _stats(values, unit)) + '\n')
    count = len(results)
    common = {
        'Benchmark Duration': {'total': '%.4f ms' % duration},
        'Total Requests': {'total': count}, 'Failed Requests': {'total': 0}, 'Success Requests': {'total': count},
        'Concurrency': {'total': round(sum(r['e2e'] for r in results) / duration, 4)},
        'Max Concurrency': {'total': model['batch_size']},
        'Request Throughput': {'total': '%.4f req/s' % (count / (duration / 1000.0))},
        'Total Generated Tokens': {'total': sum(r['tokens'] for r in results)},
    }
    with open(os.path.join(perf, dataset + '.json'), 'w') as handle:
        json.dump(common, handle, indent=4)
    print('[SIMULATED ais_bench] performances written to %s' % perf)
    return 0


if __name__ == '__main__':
    sys.exit(run(sys.argv[1:]))
