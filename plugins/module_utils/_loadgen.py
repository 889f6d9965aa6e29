# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Built-in streaming load client for the guide's TTFT benchmark (standard library only, Python 3.8+).

* Datasets: ``make_dataset`` builds N fully random prompts of exactly L prompt tokens, deterministic per seed.
  Prompt i is a stream of random lowercase words drawn from ``random.Random("<seed>/<i>")`` (string seeds are
  hashed with SHA-512 by ``random``, so neither ``PYTHONHASHSEED`` nor the order of generation matters). The
  length is fitted with the server's own tokenizer (``POST /tokenize``, which vLLM serves) when there is one,
  else one token per word plus the chat template's overhead is assumed.
* Load: ``run_load`` sends OpenAI chat/completions requests with ``stream: true`` from a closed loop of
  ``concurrency`` worker threads (AISBench's ``batch_size`` with ``request_rate = 0``), each with its own
  keep-alive connection, and times every request: TTFT (request sent -> first chunk carrying content), E2E
  (-> ``data: [DONE]``), TPOT ((E2E - TTFT) / (output tokens - 1), as AISBench). A failed request (HTTP error,
  error event, broken or timed-out stream) is kept in the results with its error; it is never dropped.
* Statistics: ``describe`` gives count, mean, median, p90, p99, min and max (percentiles interpolate linearly
  between closest ranks, as numpy's default and AISBench do).
* ``/metrics`` (read by ``_prometheus.parse`` into ``{series: value}``): ``diff`` and ``metric_sum`` give the
  counters' change over a step; ``vllm_hits`` and ``master_state`` summarise where KV
  hits came from; ``histogram``, ``histogram_quantile`` and ``server_ttft`` give the server's own TTFT over a
  step (mean from ``_sum`` / ``_count``, p50 / p90 from the buckets, as Prometheus' ``histogram_quantile``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import math
import random
import socket
import threading
import time

from ansible_collections.ascend.kvpool.plugins.module_utils import _proc
from ansible_collections.ascend.kvpool.plugins.module_utils._prometheus import metric_sum, number, split_series
from ansible_collections.ascend.kvpool.plugins.module_utils._secrets import mask_text

try:
    import http.client as http_client
    from urllib.parse import urlsplit
except ImportError:  # pragma: no cover - Python 2 is not supported by this collection
    http_client = None
    urlsplit = None

LETTERS = 'abcdefghijklmnopqrstuvwxyz'
# Short, common words that most BPE vocabularies hold as one token: used to pad a prompt to the exact length.
PAD_WORDS = ('the', 'of', 'and', 'to', 'in', 'is', 'it', 'on', 'at', 'as', 'be', 'by', 'or', 'we', 'an', 'so')
# Chat template overhead assumed without a tokenizer: the vLLM stand-in (and Qwen's template) add 3 tokens per
# message plus 2 for the generation prompt.
CHAT_OVERHEAD = 5
MAX_TOKENIZE_CALLS = 24


# --- datasets ------------------------------------------------------------------------------------------------
def _word(rng):
    return ''.join(rng.choice(LETTERS) for _pos in range(rng.randint(3, 7)))


def prompt_rng(seed, index):
    """The random stream of prompt ``index`` of the dataset with ``seed`` (independent of every other prompt)."""
    return random.Random('%d/%d' % (int(seed), int(index)))


def fit_prompt(rng, target, counter=None, overhead=CHAT_OVERHEAD):
    """One random prompt of ``target`` tokens.

    ``counter(text)`` returns the server's token count of the whole request for ``text`` (template included), or
    None when it cannot tell. Returns ``(text, tokens, exact)``: ``tokens`` is the counted length (or the assumed
    one without a counter).
    """
    target = int(target)
    words = [_word(rng) for _pos in range(max(1, target - overhead))]
    if counter is None:
        return ' '.join(words), len(words) + overhead, True
    calls = [0]
    cache = {}

    def count(n, extra=()):
        key = (n, tuple(extra))
        if key not in cache:
            calls[0] += 1
            cache[key] = counter(' '.join(words[:n] + list(extra)))
        return cache[key]

    n = len(words)
    first = count(n)
    if first is None:
        return ' '.join(words), len(words) + overhead, True
    if first == target:
        return ' '.join(words), first, True
    # Bracket the word count: lo fits (count <= target), hi does not.
    per_word = max(0.2, float(first - overhead) / max(1, n))
    if first < target:
        lo = n
        hi = None
        while hi is None and calls[0] < MAX_TOKENIZE_CALLS:
            grow = max(1, int(math.ceil((target - count(lo)) / per_word)))
            words.extend(_word(rng) for _pos in range(grow))
            cand = lo + grow
            if count(cand) is None:
                break
            if count(cand) <= target:
                lo = cand
                if count(cand) == target:
                    return ' '.join(words[:cand]), target, True
            else:
                hi = cand
        if hi is None:
            hi = len(words) + 1
    else:
        hi = n
        lo = 0
        guess = max(1, int((target - overhead) / per_word))
        if guess < n and count(guess) is not None and count(guess) <= target:
            lo = guess
    while hi - lo > 1 and calls[0] < MAX_TOKENIZE_CALLS:
        mid = (lo + hi) // 2
        value = count(mid)
        if value is None:
            break
        if value <= target:
            lo = mid
        else:
            hi = mid
    lo = max(1, lo)
    best = count(lo)
    if best is None:
        return ' '.join(words[:lo]), lo + overhead, False
    # Pad with short words until the count is exact (or cannot be hit).
    pad = []
    while best < target and calls[0] < MAX_TOKENIZE_CALLS:
        trial = pad + [rng.choice(PAD_WORDS)]
        value = count(lo, trial)
        if value is None or value > target:
            break
        pad, best = trial, value
    return ' '.join(words[:lo] + pad), best, best == target


def fingerprint(prompts):
    """sha256 prefix over the prompts: equal fingerprints mean the very same dataset."""
    digest = hashlib.sha256()
    for text in prompts:
        digest.update(text.encode('utf-8'))
        digest.update(b'\0')
    return digest.hexdigest()[:16]


def make_dataset(seed, count, input_tokens, counter=None, overhead=CHAT_OVERHEAD):
    """``count`` fully random prompts of ``input_tokens`` tokens each, deterministic for ``seed`` (and tokenizer).

    Returns a dict: ``prompts``, ``tokens`` (per prompt), ``exact`` (all prompts hit the length), ``seed``,
    ``count``, ``input_tokens``, ``method`` (``tokenize`` when ``counter`` answered, else ``words``) and
    ``fingerprint`` (sha256 over the prompts: equal fingerprints mean the very same dataset).
    """
    prompts, tokens, exact = [], [], True
    used_counter = [False]

    def counting(text):
        value = counter(text) if counter is not None else None
        if value is not None:
            used_counter[0] = True
        return value

    for index in range(int(count)):
        text, n_tokens, ok = fit_prompt(prompt_rng(seed, index), input_tokens,
                                        counting if counter is not None else None, overhead)
        prompts.append(text)
        tokens.append(n_tokens)
        exact = exact and ok
    return {
        'prompts': prompts, 'tokens': tokens, 'exact': exact, 'seed': int(seed), 'count': int(count),
        'input_tokens': int(input_tokens), 'method': 'tokenize' if used_counter[0] else 'words',
        'fingerprint': fingerprint(prompts),
    }


def make_shared_prefix_dataset(seed, groups, count, prefix_tokens, question_tokens, counter=None,
                               overhead=CHAT_OVERHEAD):
    """``count`` prompts in ``groups`` groups that share a long prefix (``prefix_tokens`` words at the start of the
    text, as a long shared system prompt would be) and each end with a question of its own, of about
    ``question_tokens`` tokens plus 0-9 more (lengths
    vary, as vllm-router has keyed token routing by the token count). The groups take turns in a seeded random
    order, each as often as the others (to within one): a fixed rotation would give round robin over an even number
    of instances a prefix affinity by accident (prefix k, k+K, k+2K, ... all on one instance when K is even).

    Deterministic for ``seed``; ``tokens`` are the server's counts of the whole request when ``counter`` answers,
    else the word count plus the template overhead. Returns the dict of ``make_dataset`` plus ``groups``,
    ``group_of`` (per prompt) and ``prefix_tokens``.
    """
    groups = max(1, int(groups))
    prefixes = []
    for k in range(groups):
        rng = random.Random('%d/prefix/%d' % (int(seed), k))
        prefixes.append(' '.join(_word(rng) for _pos in range(max(1, int(prefix_tokens) - overhead))))
    order = [index % groups for index in range(int(count))]
    random.Random('%d/order' % int(seed)).shuffle(order)
    prompts, tokens, group_of = [], [], []
    used_counter = [False]
    for index in range(int(count)):
        k = order[index]
        rng = random.Random('%d/question/%d' % (int(seed), index))
        question = ' '.join(_word(rng) for _pos in range(max(1, int(question_tokens) + rng.randrange(10))))
        text = prefixes[k] + ' ' + question
        value = counter(text) if counter is not None else None
        if value is not None:
            used_counter[0] = True
        prompts.append(text)
        tokens.append(value if value is not None else len(text.split()) + overhead)
        group_of.append(k)
    return {
        'prompts': prompts, 'tokens': tokens, 'exact': False, 'seed': int(seed), 'count': int(count),
        'input_tokens': int(prefix_tokens) + int(question_tokens), 'method': 'tokenize' if used_counter[0] else 'words',
        'fingerprint': fingerprint(prompts), 'groups': groups, 'group_of': group_of,
        'prefix_tokens': int(prefix_tokens),
    }


# --- HTTP: plain requests through _proc.http_request; the timed stream on _proc.connection (both: a deadline) --
def split_url(url):
    """``(scheme, host, port, base_path)`` of an instance URL such as ``http://10.0.0.1:8002``."""
    parts = urlsplit(url if '://' in url else 'http://' + url)
    scheme = parts.scheme or 'http'
    port = parts.port or (443 if scheme == 'https' else 80)
    return scheme, parts.hostname, port, parts.path.rstrip('/')


def _connect(scheme, host, port, timeout):
    # _proc's connection: each request ends by a deadline (armed per request), not only each read by a timeout.
    return _proc.connection(scheme, host, port, timeout)


def _headers(api_key=None, json_body=True):
    out = {'Accept': 'application/json'}
    if json_body:
        out['Content-Type'] = 'application/json'
    if api_key:
        out['Authorization'] = 'Bearer %s' % api_key
    return out


def http_request(url, body=None, api_key=None, timeout=30.0):
    """One plain request (a GET, or a POST of the JSON document ``body``) through ``_proc.http_request``
    (``timeout`` bounds the whole request, the body's reads included); returns ``(status, body text)`` whatever the
    status; raises OSError or ``http.client.HTTPException`` when nothing answered."""
    payload = json.dumps(body).encode('utf-8') if body is not None else None
    status, resp = _proc.http_request(url if '://' in url else 'http://' + url, timeout,
                                      _headers(api_key, payload is not None), payload)
    try:
        return status, resp.read().decode('utf-8', 'replace')
    finally:
        resp.close()


def get_text(url, timeout=10.0, api_key=None):
    """``(text, error)`` of a GET: text is None on any failure and error says why (the URL's password masked)."""
    try:
        status, text = http_request(url, None, api_key, timeout)
    except (OSError, socket.timeout, http_client.HTTPException, ValueError) as exc:
        return None, '%s: %s' % (mask_text(url), mask_text(str(exc)))
    if status != 200:
        return None, '%s: HTTP %d %s' % (mask_text(url), status, mask_text(text[:200]))
    return text, None


def served_models(base_url, api_key=None, timeout=10.0):
    """The model ids of ``GET /v1/models``."""
    status, text = http_request(base_url.rstrip('/') + '/v1/models', None, api_key, timeout)
    if status != 200:
        raise ValueError('%s/v1/models: HTTP %d %s' % (base_url.rstrip('/'), status, text[:200]))
    try:
        doc = json.loads(text)
    except RecursionError as exc:
        raise ValueError('%s/v1/models: not JSON' % base_url.rstrip('/')) from exc
    data = doc.get('data') if isinstance(doc, dict) else None
    if not isinstance(data, list):
        raise ValueError('%s/v1/models: not a list of models (no "data" list): %r'
                         % (base_url.rstrip('/'), text[:200]))
    return [m['id'] for m in data if isinstance(m, dict) and isinstance(m.get('id'), str) and m['id']]


def tokenize_counter(base_url, model, api='chat', api_key=None, timeout=30.0):
    """A ``counter(text)`` for ``fit_prompt`` backed by the server's ``POST /tokenize``.

    Returns None (no counter) when the server has no such route; the counter itself returns None on errors.
    """
    url = base_url.rstrip('/') + '/tokenize'

    def body(text):
        if api == 'chat':
            return {'model': model, 'messages': [{'role': 'user', 'content': text}], 'add_generation_prompt': True}
        return {'model': model, 'prompt': text}

    def counter(text):
        try:
            status, data = http_request(url, body(text), api_key, timeout)
        except (OSError, socket.timeout, http_client.HTTPException):
            return None
        if status != 200:
            return None
        try:
            count = json.loads(data)['count']
        except (ValueError, KeyError, TypeError, IndexError, RecursionError):
            return None
        return count if isinstance(count, int) and not isinstance(count, bool) and count >= 0 else None

    return counter if counter('probe') is not None else None


def request_body(api, model, prompt, max_tokens, temperature=0.0, ignore_eos=True, extra=None):
    """The streaming request the benchmark sends (AISBench's vllm_api_stream_chat sends the same fields)."""
    body = {'model': model, 'max_tokens': int(max_tokens), 'temperature': temperature, 'stream': True,
            'stream_options': {'include_usage': True}}
    if ignore_eos:
        body['ignore_eos'] = True
    if api == 'chat':
        body['messages'] = [{'role': 'user', 'content': prompt}]
    else:
        body['prompt'] = prompt
    body.update(extra or {})
    return body


def _chunk_text(chunk, api):
    """The text of one stream chunk; a server's garbage (choices that are not a list of objects, a delta that
    is not one, a piece that is not text) adds nothing, never an exception."""
    pieces = []
    choices = chunk.get('choices')
    for choice in choices if isinstance(choices, list) else []:
        if not isinstance(choice, dict):
            continue
        if api == 'chat':
            delta = choice.get('delta')
            piece = delta.get('content') if isinstance(delta, dict) else None
        else:
            piece = choice.get('text')
        if isinstance(piece, str) and piece:
            pieces.append(piece)
    return ''.join(pieces)


def usage_tokens(usage):
    """``(completion_tokens, prompt_tokens)`` of a stream's ``usage`` object, each None unless a whole number 0 or
    more (a server's NaN, text or object is no count)."""
    if not isinstance(usage, dict):
        return None, None

    def count(value):
        return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None
    return count(usage.get('completion_tokens')), count(usage.get('prompt_tokens'))


class _Stream(object):
    """One worker's keep-alive connection to the instance."""

    def __init__(self, url, timeout):
        self.scheme, self.host, self.port, self.base = split_url(url)
        self.timeout = timeout
        self.conn = None

    def close(self):
        if self.conn is not None:
            try:
                self.conn.close()
            except Exception:  # pylint: disable=broad-except
                pass
            self.conn = None

    def _post(self, path, payload, api_key):
        """POST on the kept-alive connection; a connection the server closed while idle is reopened once."""
        reused = self.conn is not None
        if self.conn is None:
            self.conn = _connect(self.scheme, self.host, self.port, self.timeout)
        self.conn.arm(self.timeout)  # the whole request, the stream's last byte included, ends within the timeout
        try:
            self.conn.request('POST', self.base + path, payload, _headers(api_key))
            return self.conn.getresponse()
        except (http_client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
            if not reused:
                raise
            self.close()
            self.conn = _connect(self.scheme, self.host, self.port, self.timeout)
            self.conn.request('POST', self.base + path, payload, _headers(api_key))
            return self.conn.getresponse()

    def send(self, path, body, api, api_key=None, t0=None):
        """Send one streaming request; returns the per-request timing dict (``ok`` false on any failure)."""
        out = {'ok': False, 'status': None, 'error': None, 'ttft_ms': None, 'e2e_ms': None, 'tpot_ms': None,
               'output_tokens': 0, 'prompt_tokens': None, 'chunks': 0}
        payload = json.dumps(body).encode('utf-8')
        start = time.perf_counter()
        out['start_s'] = round(start - t0, 4) if t0 is not None else 0.0
        deadline = start + self.timeout
        first = None
        content_chunks = 0
        usage = None
        done = False
        try:
            resp = self._post(path, payload, api_key)
            out['status'] = resp.status
            if resp.status != 200:
                text = resp.read().decode('utf-8', 'replace')
                out['error'] = 'HTTP %d: %s' % (resp.status, _error_message(text))
                return out
            while True:
                line = resp.readline()
                now = time.perf_counter()
                if not line:
                    break
                if now > deadline:
                    raise socket.timeout('request took longer than %.0f s' % self.timeout)
                line = line.strip()
                if not line or line.startswith(b':') or not line.startswith(b'data:'):
                    continue
                data = line[5:].strip()
                if data == b'[DONE]':
                    done = True
                    break
                chunk = json.loads(data.decode('utf-8'))
                if not isinstance(chunk, dict):
                    raise ValueError('a stream chunk that is not a JSON object: %r' % data[:100])
                out['chunks'] += 1
                if chunk.get('error'):
                    out['error'] = 'error event: %s' % _error_message(json.dumps(chunk))
                    break
                if chunk.get('usage'):
                    usage = chunk['usage']
                if _chunk_text(chunk, api):
                    content_chunks += 1
                    if first is None:
                        first = now
            end = time.perf_counter()
            if done:
                # Read the rest of the response (the last chunk) so that the connection can be reused.
                resp.read()
                if resp.will_close:
                    self.close()
            else:
                # The connection state is unknown now: do not reuse it.
                self.close()
                if out['error'] is None:
                    out['error'] = 'stream ended before data: [DONE]'
                return out
        except (OSError, socket.timeout, http_client.HTTPException, ValueError) as exc:
            self.close()
            out['error'] = '%s: %s' % (type(exc).__name__, exc) if str(exc) else type(exc).__name__
            return out
        if first is None:
            out['error'] = 'no content token in the stream'
            return out
        tokens = content_chunks
        completion, prompt = usage_tokens(usage)
        if completion is not None:
            tokens = completion
            out['prompt_tokens'] = prompt
        out.update(ok=True, output_tokens=tokens, ttft_ms=round((first - start) * 1000.0, 3),
                   e2e_ms=round((end - start) * 1000.0, 3))
        if tokens > 1:
            out['tpot_ms'] = round((end - first) * 1000.0 / (tokens - 1), 3)
        return out


def _error_message(text):
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return text.strip()[:300]
    err = data.get('error') if isinstance(data, dict) else None
    if isinstance(err, dict):
        return str(err.get('message') or err)[:300]
    if err:
        return str(err)[:300]
    return text.strip()[:300]


def run_load(url, model, prompts, concurrency=25, max_tokens=10, temperature=0.0, ignore_eos=True, api='chat',
             api_key=None, timeout=600.0, extra_body=None):
    """Send every prompt once, at most ``concurrency`` at a time; returns ``(results, wall seconds)``.

    ``results[i]`` belongs to ``prompts[i]`` and always exists: failures carry ``ok: false`` and ``error``.
    """
    path = '/v1/chat/completions' if api == 'chat' else '/v1/completions'
    results = [None] * len(prompts)
    lock = threading.Lock()
    pending = list(range(len(prompts)))
    pending.reverse()
    t0 = time.perf_counter()

    def worker():
        stream = _Stream(url, timeout)
        try:
            while True:
                with lock:
                    if not pending:
                        return
                    index = pending.pop()
                body = request_body(api, model, prompts[index], max_tokens, temperature, ignore_eos, extra_body)
                try:
                    res = stream.send(path, body, api, api_key, t0)
                except Exception as exc:  # pylint: disable=broad-except
                    stream.close()
                    res = {'ok': False, 'status': None, 'error': 'client error: %r' % exc, 'ttft_ms': None,
                           'e2e_ms': None, 'tpot_ms': None, 'output_tokens': 0, 'prompt_tokens': None,
                           'chunks': 0, 'start_s': round(time.perf_counter() - t0, 4)}
                res['index'] = index
                res['end_s'] = round(time.perf_counter() - t0, 4)
                results[index] = res
        finally:
            stream.close()

    workers = [threading.Thread(target=worker, name='kvpool-load-%d' % n)
               for n in range(max(1, min(int(concurrency), len(prompts) or 1)))]
    for thread in workers:
        thread.daemon = True
        thread.start()
    for thread in workers:
        thread.join()
    wall = time.perf_counter() - t0
    for index, res in enumerate(results):
        if res is None:  # a worker died without recording: count it, never drop it
            results[index] = {'index': index, 'ok': False, 'status': None, 'error': 'not sent', 'ttft_ms': None,
                              'e2e_ms': None, 'tpot_ms': None, 'output_tokens': 0, 'prompt_tokens': None,
                              'chunks': 0, 'start_s': None}
    return results, wall


# --- statistics ----------------------------------------------------------------------------------------------
def percentile(values, pct):
    """Linear interpolation between closest ranks (numpy's default), ``pct`` in 0..100."""
    data = sorted(values)
    if not data:
        return None
    if len(data) == 1:
        return float(data[0])
    rank = (len(data) - 1) * float(pct) / 100.0
    low = int(math.floor(rank))
    high = min(low + 1, len(data) - 1)
    return float(data[low]) + (float(data[high]) - float(data[low])) * (rank - low)


def describe(values, digits=3):
    """count, mean, median, p90, p99, min, max of ``values`` (None entries ignored; empty gives Nones)."""
    data = [float(v) for v in values if v is not None]
    if not data:
        return {'count': 0, 'mean': None, 'median': None, 'p90': None, 'p99': None, 'min': None, 'max': None}

    def rnd(value):
        return round(value, digits)

    return {'count': len(data), 'mean': rnd(sum(data) / len(data)), 'median': rnd(percentile(data, 50)),
            'p90': rnd(percentile(data, 90)), 'p99': rnd(percentile(data, 99)), 'min': rnd(min(data)),
            'max': rnd(max(data))}


def mean_in_flight(durations_s, wall_s):
    """The concurrency a client really held over a step: the mean number of requests in flight, by Little's law
    the sum of every request's time in flight divided by the step's wall time. ``durations_s`` are seconds (None
    entries ignored); None when the wall time is not above 0."""
    if not wall_s or wall_s <= 0:
        return None
    busy = sum(float(d) for d in durations_s if d is not None and d >= 0)
    return round(busy / float(wall_s), 3)


def request_seconds(res):
    """How long one request was in flight (failed ones too, while they held a slot): ``end_s - start_s``, else
    its end-to-end latency, else None."""
    start, end = res.get('start_s'), res.get('end_s')
    if start is not None and end is not None:
        return max(0.0, float(end) - float(start))
    if res.get('e2e_ms') is not None:
        return float(res['e2e_ms']) / 1000.0
    return None


def summarize(results, wall_s, expected_tokens=None, concurrency=None):
    """Aggregate of one step: counts (failures included), TTFT / TPOT / E2E statistics in ms, throughput."""
    good = [r for r in results if r.get('ok')]
    bad = [r for r in results if not r.get('ok')]
    errors = {}
    for res in bad:
        errors[res.get('error') or 'unknown'] = errors.get(res.get('error') or 'unknown', 0) + 1
    out_tokens = sum(int(r.get('output_tokens') or 0) for r in good)
    short = [r['index'] for r in good if expected_tokens and int(r.get('output_tokens') or 0) < int(expected_tokens)]
    return {
        'requests': len(results), 'succeeded': len(good), 'failed': len(bad),
        'errors': [{'error': k, 'count': v} for k, v in sorted(errors.items(), key=lambda kv: -kv[1])],
        'failed_indexes': [r.get('index') for r in bad],
        'short_outputs': short,
        'ttft_ms': describe([r.get('ttft_ms') for r in good]),
        'tpot_ms': describe([r.get('tpot_ms') for r in good]),
        'e2e_ms': describe([r.get('e2e_ms') for r in good]),
        'output_tokens': describe([r.get('output_tokens') for r in good], 1),
        'duration_s': round(wall_s, 3),
        'request_throughput': round(len(good) / wall_s, 3) if wall_s > 0 else None,
        'output_token_throughput': round(out_tokens / wall_s, 3) if wall_s > 0 else None,
        'concurrency': {'requested': int(concurrency) if concurrency else None,
                        'achieved': mean_in_flight([request_seconds(r) for r in results], wall_s),
                        'source': 'builtin: mean requests in flight (sum of request durations / wall time)'},
    }


# --- Prometheus /metrics (parsed by _prometheus.parse) --------------------------------------------------------
def diff(before, after):
    """``after - before`` for every series of ``after`` (a series new in ``after`` counts from 0)."""
    out = {}
    for key, value in (after or {}).items():
        base = (before or {}).get(key, 0.0)
        delta = value - base
        if isinstance(delta, float) and (math.isnan(delta) or math.isinf(delta)):
            continue
        out[key] = round(delta, 6)
    return out


def _rate(hits, queries):
    if hits is None or not queries:
        return None
    return round(float(hits) / float(queries), 4)


def vllm_hits(delta):
    """Where the KV blocks of a step came from, from the ``/metrics`` counter deltas of one vLLM instance.

    ``prefix_*``: vLLM's own (device) prefix cache; ``external_*``: hits through the KV connector (the pool);
    ``pool_own_segment_tokens`` / ``pool_other_segment_tokens``: the vllm stand-in's replica-location counter
    (None on a real vLLM).
    """
    prefix_q = metric_sum(delta, 'vllm:prefix_cache_queries_total')
    prefix_h = metric_sum(delta, 'vllm:prefix_cache_hits_total')
    ext_q = metric_sum(delta, 'vllm:external_prefix_cache_queries_total')
    ext_h = metric_sum(delta, 'vllm:external_prefix_cache_hits_total')
    return {
        'prefix_queries': prefix_q, 'prefix_hits': prefix_h, 'prefix_hit_rate': _rate(prefix_h, prefix_q),
        'external_queries': ext_q, 'external_hits': ext_h, 'external_hit_rate': _rate(ext_h, ext_q),
        'pool_own_segment_tokens': metric_sum(delta, 'kvpool_sim_pool_load_tokens_total', source='own_segment'),
        'pool_other_segment_tokens': metric_sum(delta, 'kvpool_sim_pool_load_tokens_total', source='other_segment'),
        'prompt_tokens': metric_sum(delta, 'vllm:prompt_tokens_total'),
    }


def master_state(samples):
    """The Mooncake master's pool state from one ``/metrics`` scrape."""
    return {
        'key_count': metric_sum(samples, 'master_key_count'),
        'allocated_bytes': metric_sum(samples, 'master_allocated_bytes'),
        'capacity_bytes': metric_sum(samples, 'master_total_capacity_bytes'),
        'active_clients': metric_sum(samples, 'master_active_clients'),
    }


# --- server-side TTFT from the histogram -----------------------------------------------------------------------
SERVER_TTFT_METRIC = 'vllm:time_to_first_token_seconds'


def _bound(text):
    try:
        return number(text)
    except (TypeError, ValueError):
        return None


def histogram(samples, name, **labels):
    """The histogram ``name`` (Prometheus ``_bucket`` / ``_sum`` / ``_count`` series) summed over every series whose
    labels include ``labels`` (for example over vLLM's ``engine`` label).

    Returns ``{'count', 'sum', 'buckets': [(upper bound, cumulative count), ...]}`` with the buckets sorted by bound
    (``+Inf`` last), or None when ``samples`` hold no series of it. Works on a scrape and on ``diff`` of two.
    """
    count = total = None
    buckets = {}
    for key, value in (samples or {}).items():
        sname, slabels = split_series(key)
        if not sname.startswith(name) or sname[len(name):] not in ('_bucket', '_sum', '_count'):
            continue
        if any(slabels.get(k) != str(v) for k, v in labels.items()):
            continue
        suffix = sname[len(name):]
        if suffix == '_count':
            count = (count or 0.0) + value
        elif suffix == '_sum':
            total = (total or 0.0) + value
        else:
            bound = _bound(slabels.get('le'))
            if bound is None or math.isnan(bound):
                continue
            buckets[bound] = buckets.get(bound, 0.0) + value
    if count is None and total is None and not buckets:
        return None
    ordered = sorted(buckets.items())
    if count is None and ordered and math.isinf(ordered[-1][0]):
        count = ordered[-1][1]
    return {'count': count, 'sum': total, 'buckets': ordered}


def histogram_quantile(q, buckets):
    """Prometheus' ``histogram_quantile``: the ``q`` quantile (0..1) of cumulative ``buckets`` [(bound, count)].

    As Prometheus (promql/quantile.go): the first bucket whose count reaches the rank holds it, the value is
    interpolated linearly inside it (the lowest bucket starts at 0), a rank in the ``+Inf`` bucket gives the
    highest finite bound. Counts are made monotonic first (a scrape taken mid-update may not be). None without
    observations, without a ``+Inf`` bucket or for ``q`` outside 0..1.
    """
    if not buckets or not math.isinf(buckets[-1][0]) or q < 0 or q > 1:
        return None
    counts = []
    for _bound_value, count in buckets:
        counts.append(max(count, counts[-1]) if counts else count)
    total = counts[-1]
    if not total or total <= 0:
        return None
    rank = q * total
    index = 0
    while index < len(counts) - 1 and counts[index] < rank:
        index += 1
    if index == len(counts) - 1:
        return buckets[-2][0] if len(buckets) > 1 else None
    end = buckets[index][0]
    if index == 0 and end <= 0:
        return end
    start = buckets[index - 1][0] if index > 0 else 0.0
    below = counts[index - 1] if index > 0 else 0.0
    inside = counts[index] - below
    if inside <= 0:
        return start
    return start + (end - start) * (rank - below) / inside


def _num_ok(value):
    return value is not None and not (math.isnan(value) or math.isinf(value))


def server_ttft(delta, name=SERVER_TTFT_METRIC):
    """The server's own TTFT over a step, from the change of its TTFT histogram (``diff`` of two scrapes).

    ``count`` requests observed, ``mean_ms`` = change of ``_sum`` / change of ``_count``, ``p50_ms`` / ``p90_ms``
    interpolated in the changed buckets (so only as fine as vLLM's bucket bounds). None when the scrapes hold no
    such histogram; the figures are None when no request was observed during the step.
    """
    hist = histogram(delta, name)
    if hist is None:
        return None
    count = hist['count']
    if count is not None and (math.isnan(count) or math.isinf(count)):
        count = None
    mean = None
    if count and count > 0 and _num_ok(hist['sum']):
        mean = round(1000.0 * hist['sum'] / count, 3)

    def quantile_ms(q):
        value = histogram_quantile(q, hist['buckets'])
        return round(1000.0 * value, 3) if value is not None else None

    return {'count': int(count) if count else 0, 'mean_ms': mean, 'p50_ms': quantile_ms(0.5),
            'p90_ms': quantile_ms(0.9)}


# --- TTFT probe of a rolling change (module vllm_rollout) -------------------------------------------------------
def ttft_p50(results):
    """``(p50 seconds or None, succeeded, failed, first error)`` of ``run_load``'s results: the median TTFT of the
    requests that succeeded, in seconds (4 decimals)."""
    good = [r['ttft_ms'] for r in results if r.get('ok') and r.get('ttft_ms') is not None]
    bad = [r for r in results if not r.get('ok')]
    p50 = percentile(good, 50)
    return (round(p50 / 1000.0, 4) if p50 is not None else None, len(good), len(bad),
            (bad[0].get('error') or 'unknown') if bad else '')


def probe_ttft(url, model, samples=5, api_key=None, timeout=30.0, max_tokens=4, seed=None):
    """The TTFT p50 of ``url`` over ``samples`` short streaming chat requests sent one after another (the same timed
    client as the benchmark, ``run_load`` with concurrency 1): ``ttft_p50``'s tuple. The prompts are random words
    of a seed of their own per call (``seed`` None: a random one), so no call finds the previous call's prompts in a
    cache and the figure is a prefill's, not a hit's."""
    seed = random.SystemRandom().getrandbits(31) if seed is None else int(seed)
    prompts = make_dataset(seed, samples, 48)['prompts']
    results, _wall = run_load(url, model, prompts, concurrency=1, max_tokens=max_tokens, api_key=api_key,
                              timeout=timeout)
    return ttft_p50(results)
