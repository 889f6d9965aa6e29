# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The built-in streaming load client: datasets, timing against a server with KNOWN delays, failures, statistics,
and the Prometheus parser. The test server runs on 127.0.0.1 only."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import math
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ansible_collections.ascend.kvpool.plugins.module_utils import _loadgen, _prometheus
from ansible_collections.ascend.kvpool.tests.unit.plugins.modules.process_helpers import free_port


# --- datasets ------------------------------------------------------------------------------------------------
def words_counter(text):
    """The vllm stand-in's chat count: one token per word, +3 for the message, +2 for the generation prompt."""
    return len(text.split()) + 5


def bpe_like_counter(text):
    """A tokenizer that splits words into 3-letter pieces (so random words cost 1-3 tokens), pad words 1 token."""
    return sum(int(math.ceil(len(w) / 3.0)) for w in text.split()) + 5


def test_dataset_is_deterministic_per_seed():
    first = _loadgen.make_dataset(7, 6, 128)
    again = _loadgen.make_dataset(7, 6, 128)
    other = _loadgen.make_dataset(8, 6, 128)
    assert first['prompts'] == again['prompts'] and first['fingerprint'] == again['fingerprint']
    assert other['fingerprint'] != first['fingerprint']
    assert set(first['prompts']).isdisjoint(other['prompts'])
    # prompt i does not depend on the dataset size (or on generation order)
    assert _loadgen.make_dataset(7, 3, 128)['prompts'] == first['prompts'][:3]


def test_dataset_without_tokenizer_assumes_one_token_per_word():
    data = _loadgen.make_dataset(1, 4, 1024)
    assert data['method'] == 'words' and data['exact']
    assert [len(p.split()) for p in data['prompts']] == [1019] * 4
    assert data['tokens'] == [1024] * 4


def test_dataset_prompts_share_no_leading_block():
    data = _loadgen.make_dataset(3, 20, 1024)
    heads = set(tuple(p.split()[:16]) for p in data['prompts'])
    assert len(heads) == 20


def test_fit_with_the_standin_tokenizer_takes_one_call():
    calls = []

    def counter(text):
        calls.append(text)
        return words_counter(text)

    data = _loadgen.make_dataset(5, 3, 1024, counter)
    assert data['method'] == 'tokenize' and data['exact'] and data['tokens'] == [1024] * 3
    assert len(calls) == 3


@pytest.mark.parametrize('target', [64, 300, 1024, 2048])
def test_fit_to_exact_length_with_a_multi_token_tokenizer(target):
    data = _loadgen.make_dataset(11, 5, target, bpe_like_counter)
    assert data['method'] == 'tokenize'
    assert [bpe_like_counter(p) for p in data['prompts']] == [target] * 5
    assert data['exact'] and data['tokens'] == [target] * 5
    assert _loadgen.make_dataset(11, 5, target, bpe_like_counter)['prompts'] == data['prompts']


def test_fit_falls_back_when_the_counter_cannot_tell():
    data = _loadgen.make_dataset(5, 2, 256, lambda text: None)
    assert data['method'] == 'words' and data['tokens'] == [256, 256]


# --- statistics ----------------------------------------------------------------------------------------------
def test_percentiles_interpolate_like_numpy():
    values = list(range(1, 11))
    assert _loadgen.percentile(values, 50) == pytest.approx(5.5)
    assert _loadgen.percentile(values, 90) == pytest.approx(9.1)
    assert _loadgen.percentile(values, 99) == pytest.approx(9.91)
    assert _loadgen.percentile([4.0], 99) == 4.0
    assert _loadgen.percentile([], 50) is None
    stats = _loadgen.describe([3, None, 1, 2])
    assert stats == {'count': 3, 'mean': 2.0, 'median': 2.0, 'p90': 2.8, 'p99': 2.98, 'min': 1.0, 'max': 3.0}
    assert _loadgen.describe([])['median'] is None


# --- a streaming server with known behaviour -------------------------------------------------------------------
class Behaviour(object):
    """What the test server does for a prompt: ``delay=<ms>`` before the first content chunk, ``gap=<ms>``
    between tokens, ``fail`` (HTTP 500), ``error`` (an error event), ``broken`` (close mid-stream), ``stall``
    (wait 3 s before anything)."""

    def __init__(self, prompt):
        self.delay = 0.0
        self.gap = 0.0
        self.mode = 'ok'
        for word in prompt.split():
            if word.startswith('delay='):
                self.delay = float(word[6:]) / 1000.0
            elif word.startswith('gap='):
                self.gap = float(word[4:]) / 1000.0
            elif word in ('fail', 'error', 'broken', 'stall'):
                self.mode = word


class StreamHandler(BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'

    def log_message(self, *args):  # keep pytest output quiet
        pass

    def _chunk(self, data):
        self.wfile.write(b'%x\r\n%s\r\n' % (len(data), data))
        self.wfile.flush()

    def _event(self, obj):
        self._chunk(b'data: ' + (obj if isinstance(obj, bytes) else json.dumps(obj).encode()) + b'\n\n')

    def do_POST(self):
        server = self.server
        body = json.loads(self.rfile.read(int(self.headers['Content-Length'])))
        received = time.perf_counter()
        prompt = body['messages'][0]['content'] if 'messages' in body else body['prompt']
        how = Behaviour(prompt)
        times = server.times.setdefault(prompt, {})
        with server.lock:
            server.active += 1
            server.max_active = max(server.max_active, server.active)
            server.requests += 1
        try:
            if how.mode == 'fail':
                data = json.dumps({'error': {'message': 'injected failure', 'type': 'InternalServerError'}}).encode()
                self.send_response(500)
                self.send_header('Content-Type', 'application/json')
                self.send_header('Content-Length', str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                return
            if how.mode == 'stall':
                time.sleep(3)
            self.send_response(200)
            self.send_header('Content-Type', 'text/event-stream')
            self.send_header('Transfer-Encoding', 'chunked')
            self.end_headers()
            time.sleep(how.delay)
            chat = 'messages' in body
            role = {'choices': [{'index': 0, 'delta': {'role': 'assistant', 'content': ''}}]}
            if chat:
                self._event(role)
            if how.mode == 'error':
                self._event({'error': {'message': 'injected error event', 'code': 500}})
                self._chunk(b'')
                return
            for n in range(body['max_tokens']):
                if n:
                    time.sleep(how.gap)
                piece = {'delta': {'content': 'tok%d ' % n}} if chat else {'text': 'tok%d ' % n}
                piece['index'] = 0
                self._event({'choices': [piece]})
                if n == 0:
                    # what the server really waited (a loaded machine oversleeps): the reference for the client
                    times['first_ms'] = (time.perf_counter() - received) * 1000.0
                if how.mode == 'broken' and n == 2:
                    self.wfile.flush()
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
            self._event({'choices': [], 'usage': {'prompt_tokens': len(prompt.split()),
                                                  'completion_tokens': body['max_tokens']}})
            self._event(b'[DONE]')
            times['done_ms'] = (time.perf_counter() - received) * 1000.0
            self._chunk(b'')
        finally:
            with server.lock:
                server.active -= 1


@pytest.fixture()
def server():
    srv = ThreadingHTTPServer(('127.0.0.1', 0), StreamHandler)
    srv.daemon_threads = True
    srv.lock = threading.Lock()
    srv.active = srv.max_active = srv.requests = 0
    srv.times = {}
    thread = threading.Thread(target=srv.serve_forever, kwargs={'poll_interval': 0.05}, daemon=True)
    thread.start()
    yield srv, 'http://127.0.0.1:%d' % srv.server_address[1]
    srv.shutdown()
    srv.server_close()


@pytest.mark.parametrize('api', ['chat', 'completions'])
def test_ttft_agrees_with_a_known_server_delay(server, api):
    """The server waits a KNOWN time before its first content chunk: the measured TTFT must agree within a few
    milliseconds, and E2E / TPOT must reflect the known gaps between tokens. The reference is what the server
    really waited (it records it; a loaded machine oversleeps a little), which is at least the injected delay.
    Scheduling noise of a busy machine only ever adds time, so each case gets up to 6 tries and the best counts
    (the TPOT bound too: a first chunk read late shortens the measured span after it)."""
    srv, url = server
    cases = [(150, 20), (60, 5), (300, 0)]
    best = {}
    for attempt in range(6):
        prompts = ['delay=%d gap=%d try%d' % (delay, gap, attempt) for delay, gap in cases]
        results, _wall = _loadgen.run_load(url, 'm', prompts, concurrency=1, max_tokens=6, api=api, timeout=30)
        for res, prompt, case in zip(results, prompts, cases):
            assert res['ok'], res
            assert res['output_tokens'] == 6
            waited = srv.times[prompt]
            assert waited['first_ms'] >= case[0]  # the server's own wait; the client's figures are judged below
            error = max(abs(res['ttft_ms'] - waited['first_ms']), abs(res['e2e_ms'] - waited['done_ms']))
            if case not in best or error < best[case][0]:
                best[case] = (error, res, waited)
        if all(b[0] < 5.0 for b in best.values()):
            break
    # Within 10 ms of what the server did: a client that timed the wrong event (the headers, [DONE]) is off by the
    # delay (60-300 ms); the best of 6 tries on a machine busy with two make jobs was 5.6 ms off (rehearsal 8).
    for (_delay, gap), (error, res, waited) in sorted(best.items()):
        assert error < 10.0, (res, waited)
        assert res['tpot_ms'] >= gap - 4.0, (res, waited)  # a late first chunk (a busy client) shortens the span
        # Not asserted: the TTFT near the NOMINAL delay. That judges the test server's sleep, not the client (a
        # rehearsal with three make jobs saw the server oversleep a 60 ms delay by 37 ms while the client agreed
        # with what the server really waited); the server's own record, above, is the reference.
        assert abs(res['tpot_ms'] - (waited['done_ms'] - waited['first_ms']) / 5) < 4.0, (res, waited)
    assert srv.requests in (3, 6, 9, 12, 15, 18)  # 3 cases a try


def test_closed_loop_concurrency_and_keep_alive(server):
    srv, url = server
    prompts = ['delay=40 p%d' % n for n in range(12)]
    results, wall = _loadgen.run_load(url, 'm', prompts, concurrency=4, max_tokens=2, timeout=30)
    assert [r['index'] for r in results] == list(range(12))
    assert all(r['ok'] for r in results)
    assert srv.max_active == 4  # a closed loop of 4: never more, and all 4 were used
    summary = _loadgen.summarize(results, wall, 2, concurrency=4)
    assert summary['requests'] == 12 and summary['succeeded'] == 12 and summary['failed'] == 0
    assert summary['short_outputs'] == []
    assert 30 < summary['ttft_ms']['median'] < 60
    # 4 workers busy the whole step: about 4 in flight on average (less: the gaps between requests, more so on a
    # busy machine)
    assert summary['concurrency']['requested'] == 4
    assert 2.0 < summary['concurrency']['achieved'] <= 4.05, summary['concurrency']
    assert all(r['end_s'] >= r['start_s'] for r in results)


def test_mean_in_flight_is_littles_law():
    # 4 requests of 1 s each over 2 s of wall time: 2 in flight on average
    assert _loadgen.mean_in_flight([1.0, 1.0, 1.0, 1.0], 2.0) == 2.0
    # None entries (no timing) are left out; no wall time gives no figure
    assert _loadgen.mean_in_flight([0.5, None, 0.25], 1.0) == 0.75
    assert _loadgen.mean_in_flight([1.0], 0) is None
    assert _loadgen.mean_in_flight([], 3.0) == 0.0


def test_request_seconds_counts_failed_requests_too():
    assert _loadgen.request_seconds({'start_s': 0.5, 'end_s': 1.75}) == 1.25
    assert _loadgen.request_seconds({'ok': True, 'e2e_ms': 300.0}) == 0.3
    assert _loadgen.request_seconds({'ok': False, 'start_s': None}) is None


def test_failures_are_counted_never_dropped(server):
    _srv, url = server
    prompts = ['delay=5 ok1', 'fail', 'delay=5 ok2', 'error', 'broken', 'delay=5 ok3']
    results, wall = _loadgen.run_load(url, 'm', prompts, concurrency=2, max_tokens=5, timeout=30)
    assert len(results) == 6
    assert [r['ok'] for r in results] == [True, False, True, False, False, True]
    assert results[1]['status'] == 500 and 'injected failure' in results[1]['error']
    assert 'injected error event' in results[3]['error']
    assert results[4]['error']  # broken stream: never counted as a success
    summary = _loadgen.summarize(results, wall, 5)
    assert summary['requests'] == 6 and summary['succeeded'] == 3 and summary['failed'] == 3
    assert summary['failed_indexes'] == [1, 3, 4]
    assert sum(e['count'] for e in summary['errors']) == 3
    assert summary['ttft_ms']['count'] == 3


def test_a_stalled_request_times_out_and_counts_as_failed(server):
    _srv, url = server
    started = time.monotonic()
    results, _wall = _loadgen.run_load(url, 'm', ['stall', 'delay=1 fine'], concurrency=2, max_tokens=2,
                                       timeout=0.5)
    assert time.monotonic() - started < 3.0
    assert not results[0]['ok'] and 'timeout' in results[0]['error'].lower()
    assert results[1]['ok']


def test_connection_refused_is_a_failure():
    import socket
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        port = sock.getsockname()[1]
    results, _wall = _loadgen.run_load('http://127.0.0.1:%d' % port, 'm', ['a', 'b'], concurrency=2, timeout=2)
    assert [r['ok'] for r in results] == [False, False]
    assert all('Connection' in r['error'] or 'refused' in r['error'] for r in results)


# --- Prometheus --------------------------------------------------------------------------------------------------
METRICS = r'''# HELP vllm:prefix_cache_queries_total [SIMULATED vLLM stand-in] Prefix cache queries, in terms of tokens.
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{engine="0",model_name="qwen"} 2048.0
vllm:prefix_cache_hits_total{engine="0",model_name="qwen"} 256.0
vllm:external_prefix_cache_queries_total{engine="0",model_name="qwen"} 1792.0
vllm:external_prefix_cache_hits_total{engine="0",model_name="qwen"} 1536.0
kvpool_sim_pool_load_tokens_total{source="own_segment"} 1024.0
kvpool_sim_pool_load_tokens_total{source="other_segment"} 512.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="qwen"} 4.0
weird{path="a \"quoted\" \\ value",x="1"} NaN 1700000000000
master_key_count 40
master_allocated_bytes 655360
not a sample line
'''


def test_deltas_hit_rates_and_master_state():
    before = _prometheus.parse(METRICS)
    after_text = METRICS.replace('2048.0', '4096.0').replace('1536.0', '3072.0').replace('1792.0', '3584.0') \
        .replace('"other_segment"} 512.0', '"other_segment"} 2048.0').replace('master_key_count 40',
                                                                              'master_key_count 72')
    after = _prometheus.parse(after_text)
    delta = _loadgen.diff(before, after)
    assert 'weird{path="a \\"quoted\\" \\\\ value",x="1"}' not in delta  # NaN is not a change
    hits = _loadgen.vllm_hits(delta)
    assert hits['prefix_queries'] == 2048 and hits['prefix_hits'] == 0 and hits['prefix_hit_rate'] == 0.0
    assert hits['external_queries'] == 1792 and hits['external_hits'] == 1536
    assert hits['external_hit_rate'] == pytest.approx(0.8571, abs=1e-4)
    assert hits['pool_own_segment_tokens'] == 0 and hits['pool_other_segment_tokens'] == 1536
    assert _prometheus.metric_sum(after, 'kvpool_sim_pool_load_tokens_total') == 3072
    assert _loadgen.master_state(after)['key_count'] == 72
    assert _loadgen.master_state(after)['allocated_bytes'] == 655360
    # a real vLLM has no stand-in counters: None, not 0
    assert _loadgen.vllm_hits({'vllm:prefix_cache_queries_total{engine="0"}': 10})['pool_own_segment_tokens'] is None


def test_shared_prefix_dataset_groups_interleave_and_vary_in_length():
    data = _loadgen.make_shared_prefix_dataset(7, 4, 16, 100, 20)
    assert sorted(data['group_of']) == sorted([0, 1, 2, 3] * 4) and data['groups'] == 4 and data['count'] == 16
    assert data['group_of'] != [0, 1, 2, 3] * 4  # no fixed rotation (round robin would get affinity by accident)
    prefixes = [' '.join(p.split()[:95]) for p in data['prompts']]
    for i, k in enumerate(data['group_of']):
        for j, other in enumerate(data['group_of']):
            assert (prefixes[i] == prefixes[j]) == (k == other)
    assert len(set(data['prompts'])) == 16 and len(set(data['tokens'])) > 1
    again = _loadgen.make_shared_prefix_dataset(7, 4, 16, 100, 20)
    assert again['fingerprint'] == data['fingerprint']
    assert _loadgen.make_shared_prefix_dataset(8, 4, 16, 100, 20)['fingerprint'] != data['fingerprint']
    counted = _loadgen.make_shared_prefix_dataset(7, 2, 4, 50, 10, counter=lambda text: len(text.split()) + 3)
    assert counted['method'] == 'tokenize' and counted['tokens'][0] == len(counted['prompts'][0].split()) + 3


def test_a_failed_metrics_read_never_shows_the_urls_password():
    """A scrape URL with a password (http://user:pw@host/metrics) that nothing answers: the error names the URL with
    its password masked."""
    port = free_port()
    text, error = _loadgen.get_text('http://scraper:s3cret-pw@127.0.0.1:%d/metrics' % port, timeout=1.0)
    assert text is None
    assert 's3cret-pw' not in error and '127.0.0.1:%d/metrics' % port in error
