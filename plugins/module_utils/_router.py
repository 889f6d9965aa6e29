# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Pure helpers for vllm-router (PyPI ``vllm-router``) in front of the vLLM instances: its command line, its
``/workers`` and ``/metrics`` answers (the latter through ``_prometheus``), the judgement of where requests landed,
its log. The choice of a routing policy runs on the controller: ``plugin_utils/router_policy.py``.

No I/O here: text and values in, data out, so everything is unit-tested without a node.

Facts used (vllm-router 0.1.17, seen on this project's machines; docs/router.md has the sources):
- ``vllm-router`` is a Python launcher (argparse, so any unambiguous prefix of a long flag is that flag) around a
  Rust core; its process title is ``vllm::router``.
- ``GET /health`` answers 200 ``All servers healthy`` only while EVERY worker is healthy, else 503 ``Unhealthy
  servers: [...]``; ``GET /workers`` lists ``{"workers": [{"url": ..., "is_healthy": ...}, ...]}``;
  ``GET /liveness`` is 200 while the router runs.
- The client's ``Authorization`` header is passed on to the worker: an instance's API key works through the
  router with no key given to the router (its own ``--api-key`` flag would put the key on its command line).
- ``cache_aware`` first asks every worker for ``POST /v1/chat/completions/render`` (the prompt's token ids). A
  worker that answers 404, 405 or 501 (no render: vLLM before 0.15, or 0.30-0.31 with the endpoint gated) is asked
  ``POST /tokenize`` instead (``src/backend/preprocess.rs`` of the 0.1.17 sdist), except for requests with tools or
  a response format. Any other error (403: vLLM 0.32+ with the endpoint gated behind ``--enable-scale-out``) makes
  the router log ``preparation_rejected`` and send every request to one worker, with no error (metric
  ``vllm_router_kv_routing_inputs_total{result="preparation_rejected"}``).
- Releases 0.1.12 to 0.1.16 do not call render but read no text from chat requests either (``input_chars=0``):
  their ``cache_aware`` is load balancing only. 0.1.9 and 0.1.10 are source packages only.
- ``kv_aware`` (KV events over ZMQ) received events but credited 0 tokens with vLLM 0.32: not usable as seen.
- A worker that stops answering is left out after ``--health-failure-threshold`` failed checks
  ``--health-check-interval-secs`` apart; requests to it meanwhile are retried on another worker.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import math
import re
from urllib.parse import quote

from ansible_collections.ascend.kvpool.plugins.module_utils import _prometheus

# --policy choices of vllm-router 0.1.17 (`vllm-router --help`).
POLICIES = ('random', 'round_robin', 'cache_aware', 'kv_aware', 'power_of_two', 'consistent_hash',
            'sticky_least_loaded')
# Policies under which requests with distinct prefixes (and distinct bodies) must not all land on one worker.
SPREADING = ('random', 'round_robin', 'power_of_two', 'cache_aware', 'consistent_hash')
# Flags the module writes itself; extra_args must not repeat them, nor abbreviate them (argparse takes prefixes).
MANAGED_FLAGS = ('--host', '--port', '--worker-urls', '--policy', '--prometheus-host', '--prometheus-port',
                 '--worker-startup-check-interval', '--worker-startup-timeout-secs', '--health-check-interval-secs',
                 '--health-failure-threshold', '--health-success-threshold', '--cb-timeout-duration-secs',
                 '--cache-threshold', '--balance-abs-threshold', '--balance-rel-threshold', '--api-key')
RENDER_PATH = '/v1/chat/completions/render'
TOKENIZE_PATH = '/tokenize'
# Answers to render after which vllm-router 0.1.17 asks /tokenize instead (render_unavailable).
RENDER_FALLBACK_CODES = (404, 405, 501)
_ANSI = re.compile(r'\x1b\[[0-9;]*[A-Za-z]')
_LOG_ERRORS = (
    re.compile(r'Address already in use'),
    re.compile(r'PanicException'),
    re.compile(r'error: (argument|unrecognized arguments|the following arguments)'),
    re.compile(r'\bERROR\b'),
)


def build_router_argv(binary, settings):
    """The router's command line from ``settings`` (keys as the module's options); the worker URLs are sorted so
    that the same inventory renders the same unit whatever the order of the hosts."""
    s = settings
    argv = [binary, '--host', s['host'], '--port', str(s['port']), '--policy', s['policy'],
            '--prometheus-host', s['prometheus_host'], '--prometheus-port', str(s['prometheus_port']),
            '--worker-startup-check-interval', str(s['worker_startup_check_interval']),
            '--worker-startup-timeout-secs', str(s['worker_startup_timeout']),
            '--health-check-interval-secs', str(s['health_check_interval']),
            '--health-failure-threshold', str(s['health_failure_threshold']),
            '--health-success-threshold', str(s['health_success_threshold']),
            '--cb-timeout-duration-secs', str(s['circuit_breaker_timeout'])]
    for key, flag in (('cache_threshold', '--cache-threshold'), ('balance_abs_threshold', '--balance-abs-threshold'),
                      ('balance_rel_threshold', '--balance-rel-threshold')):
        if s.get(key) is not None:
            argv += [flag, str(s[key])]
    argv += list(s.get('extra_args') or [])
    # Last: --worker-urls takes every following word that is not a flag.
    argv += ['--worker-urls'] + sorted(set(s['worker_urls']))
    return argv


def managed_flag_in(extra_args):
    """The first word of ``extra_args`` that sets (or abbreviates, as argparse allows) a flag the module writes,
    with that flag; None when there is none."""
    for word in extra_args or []:
        text = str(word)
        if not text.startswith('--') or text == '--':
            continue
        name = text.split('=', 1)[0].replace('_', '-')
        for flag in MANAGED_FLAGS:
            if flag.startswith(name) and len(name) > 2:
                return text, flag
    return None


def parse_workers(text):
    """``[{'url': str, 'healthy': bool}]`` from the body of ``GET /workers`` (objects with ``url`` and
    ``is_healthy``, or plain URL strings, which count as healthy). Raises ValueError on anything else."""
    if not isinstance(text, (str, bytes)):
        raise ValueError('no answer')
    try:
        doc = json.loads(text)
    except RecursionError as exc:
        raise ValueError('not JSON (nested too deep)') from exc
    items = doc.get('workers') if isinstance(doc, dict) else doc
    if not isinstance(items, list):
        raise ValueError('no "workers" list in the answer')
    out = []
    for item in items:
        if isinstance(item, str):
            out.append({'url': item.rstrip('/'), 'healthy': True})
        elif isinstance(item, dict) and isinstance(item.get('url'), str):
            out.append({'url': item['url'].rstrip('/'), 'healthy': item.get('is_healthy', True) is True})
        else:
            raise ValueError('a worker entry is neither a URL nor an object with "url": %r' % (item,))
    return out


def workers_problem(expected, workers):
    """What is wrong with the router's workers against the ``expected`` URLs, or '' (all listed and healthy)."""
    listed = dict((w['url'], w['healthy']) for w in workers)
    want = sorted(set(u.rstrip('/') for u in expected))
    missing = [u for u in want if u not in listed]
    unhealthy = [u for u in want if listed.get(u) is False]
    extra = sorted(u for u in listed if u not in want)
    parts = []
    if missing:
        parts.append('not listed: %s' % ', '.join(missing))
    if unhealthy:
        parts.append('unhealthy: %s' % ', '.join(unhealthy))
    if extra:
        parts.append('listed but not wanted: %s' % ', '.join(extra))
    return '; '.join(parts)


def log_error(text):
    """The last line of the router's log that says why it failed (colour codes removed), or ''."""
    found = ''
    for line in _ANSI.sub('', text or '').splitlines():
        if any(p.search(line) for p in _LOG_ERRORS):
            found = line.strip()
    return found[:400]


def spread_problem(policy, counts, rejected=0):
    """'' when the requests sent through the router landed as ``policy`` should, else why not. ``counts``: ``{worker
    URL: requests it received}`` for requests with distinct prefixes (at least two per worker, overlapping);
    ``rejected``: how many of them the router could not prepare (``preparation_rejected``: a worker without
    render)."""
    total = sum(counts.values())
    busy = sorted(u for u, n in counts.items() if n > 0)
    if policy not in SPREADING or len(counts) < 2 or total < 2:
        return ''
    if len(busy) <= 1:
        where = busy[0] if busy else 'no worker'
        cause = ''
        if policy == 'cache_aware' and rejected:
            cause = (' (%d request(s) were preparation_rejected: a worker gave no token ids, e.g. POST %s refused '
                     'with 403 by vLLM 0.32+ started without --enable-scale-out)' % (rejected, RENDER_PATH))
        elif policy == 'cache_aware':
            cause = (' (vllm-router 0.1.17 sends a request with no cached prefix to the worker with the fewest '
                     'requests in flight, the first one on a tie: overlapping requests should have spread)')
        return ('all %d requests with distinct prefixes went to %s under policy %s, none to the %d other worker(s)%s'
                % (total, where, policy, len(counts) - len(busy) if busy else len(counts), cause))
    return ''


def rejected(metrics_text):
    """Requests the router could not prepare for cache_aware so far (``vllm_router_kv_routing_inputs_total
    {result="preparation_rejected"}``)."""
    total = 0
    for name, labels, value, _ts in _prometheus.samples(metrics_text, ['vllm_router_kv_routing_inputs_total']):
        if name == 'vllm_router_kv_routing_inputs_total' and labels.get('result') == 'preparation_rejected' \
                and math.isfinite(value):
            total += int(value)
    return total


def decisions(metrics_text):
    """``{worker URL: requests routed}`` from the router's Prometheus text (``vllm_router_processed_requests_total
    {worker="..."}``)."""
    out = {}
    for name, labels, value, _ts in _prometheus.samples(metrics_text, ['vllm_router_processed_requests_total']):
        worker = labels.get('worker', '').rstrip('/')
        if name == 'vllm_router_processed_requests_total' and worker and math.isfinite(value):
            out[worker] = out.get(worker, 0) + int(value)
    return out


# --- rolling changes (module vllm_rollout): drain, restore, recovery -------------------------------------------
# vllm-router 0.1.17 (src/server.rs): POST /add_worker?url=<u> (waits for the worker's health), POST
# /remove_worker?url=<u>. Neither is persisted (a restarted router has its --worker-urls again), and there is no
# draining state: a drain is the removal, then the wait until the instance has nothing in flight.
IN_FLIGHT_METRICS = ('vllm:num_requests_running', 'vllm:num_requests_waiting')


def worker_path(verb, url):
    """The router's path that adds (``verb`` add) or removes (remove) the worker ``url``, the URL quoted whole."""
    if verb not in ('add', 'remove'):
        raise ValueError('verb is add or remove, not %r' % (verb,))
    return '/%s_worker?url=%s' % (verb, quote(url.rstrip('/'), safe=''))


def in_flight(metrics_text):
    """``(running, waiting)`` requests of one vLLM instance from its ``/metrics`` text (summed over engines and
    models; gauges ``vllm:num_requests_running`` / ``vllm:num_requests_waiting``, not the ``_by_reason`` ones), or
    None when the text holds neither gauge (not a vLLM, or not yet serving): then nothing says it is drained. A
    gauge that is NaN or infinite counts as unknown (None in its place)."""
    sums = {}
    seen = set()
    for name, _labels, value, _ts in _prometheus.samples(metrics_text, list(IN_FLIGHT_METRICS)):
        if name not in IN_FLIGHT_METRICS:
            continue
        seen.add(name)
        if not math.isfinite(value) or sums.get(name, 0) is None:
            sums[name] = None
            continue
        sums[name] = sums.get(name, 0) + value
    if not seen:
        return None

    def whole(name):
        value = sums.get(name, 0)
        return None if value is None else int(round(value))
    return whole(IN_FLIGHT_METRICS[0]), whole(IN_FLIGHT_METRICS[1])


def drained(counts):
    """Whether ``in_flight``'s answer says nothing is in flight (both gauges known and 0)."""
    return counts is not None and counts[0] == 0 and counts[1] == 0


def listed_healthy(workers, urls):
    """The URLs of ``urls`` that ``parse_workers``' list does not show healthy (missing or unhealthy), sorted."""
    healthy = set(w['url'] for w in workers if w['healthy'])
    return sorted(u.rstrip('/') for u in urls if u.rstrip('/') not in healthy)


def recovery_bound(baseline, factor, slack):
    """The TTFT (seconds) a peer must be back within after a batch: max(baseline x ``factor``, baseline +
    ``slack``). The factor scales with a slow model; the slack keeps a fast baseline (tens of ms, where a few ms of
    jitter are a large ratio) from failing on noise."""
    return max(float(baseline) * float(factor), float(baseline) + float(slack))


def recovery(baseline, after, factor, slack):
    """``{peer: {'baseline', 'after', 'bound', 'ok'}}`` for every peer of ``after`` (``{url: seconds or None}``):
    ``ok`` when its TTFT is within ``recovery_bound`` of its baseline. A peer without a baseline is reported with
    bound None and ok True (nothing to compare with); one that answered nothing (after None) is not ok."""
    out = {}
    for url in sorted(after):
        base = (baseline or {}).get(url)
        now = after[url]
        if base is None:
            out[url] = {'baseline': None, 'after': now, 'bound': None, 'ok': now is not None}
            continue
        bound = round(recovery_bound(base, factor, slack), 4)
        out[url] = {'baseline': base, 'after': now, 'bound': bound, 'ok': now is not None and now <= bound}
    return out


def recovery_problem(figures):
    """'' when every peer of ``recovery``'s answer is within its bound, else the first one named with its figures."""
    for url in sorted(figures):
        fig = figures[url]
        if fig['ok']:
            continue
        if fig['after'] is None:
            base = ('baseline %.3f s' % fig['baseline']) if fig['baseline'] is not None else 'no baseline'
            return '%s answered none of the timed requests (TTFT unmeasured; %s)' % (url, base)
        return ('%s: TTFT p50 %.3f s, above its bound %.3f s (baseline %.3f s)'
                % (url, fig['after'], fig['bound'], fig['baseline']))
    return ''
