#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: vllm_router_check
short_description: Ask the vLLM instances what a routing policy needs, and check where a router sends requests
version_added: 1.0.0
description:
  - Two read-only checks around M(ascend.kvpool.vllm_router), run from the router's host.
  - With O(render=true), before the router starts, it asks every worker at once for C(POST
    /v1/chat/completions/render) (one short message), and where that answers 404, 405 or 501 for C(POST
    /tokenize), and returns the status codes. vllm-router 0.1.17's C(cache_aware) gets every request's token ids
    from render, or from C(/tokenize) where render is absent; a worker that gives neither (vLLM 0.32+ answers
    render with 403 unless started with C(--enable-scale-out)) makes the router send every request to one worker,
    with no error. The role C(ascend.kvpool.kvpool_router) chooses the policy from these codes.
  - With O(spread_requests) above 0, after the router started, it sends that many short chat requests, each with a
    prefix of its own and of a length of its own, one per worker at a time (overlapping, as traffic does), through
    O(router_url), reads the router's per-worker counter
    C(vllm_router_processed_requests_total) from O(metrics_url) before and after, and fails when O(policy) should
    spread them and every one went to the same worker. The message names the policy, the worker and the likely
    cause.
  - The instances do real work for the spread requests (a prompt of a few dozen tokens and one output token each);
    nothing is changed otherwise.
author:
  - ascend.kvpool contributors (@ascend-kvpool)
extends_documentation_fragment:
  - ascend.kvpool.read_only
options:
  workers:
    description: Base URLs of the vLLM instances (C(http://HOST:PORT)).
    type: list
    elements: str
    default: []
  render:
    description: Ask every worker for C(POST /v1/chat/completions/render).
    type: bool
    default: false
  model:
    description: Served model name sent in the requests (C(model)); unset sends none (vLLM then takes its only model).
    type: str
  api_key:
    description: API key of the instances, sent as C(Authorization Bearer); never returned.
    type: str
  router_url:
    description: Base URL of the router for the spread check.
    type: str
  metrics_url:
    description: The router's Prometheus metrics URL for the spread check.
    type: str
  policy:
    description: The router's policy, which decides whether requests with distinct prefixes must spread.
    type: str
    choices: [random, round_robin, cache_aware, kv_aware, power_of_two, consistent_hash, sticky_least_loaded]
    default: round_robin
  spread_requests:
    description: Requests sent through the router for the spread check (0 skips it); at least two per worker help.
    type: int
    default: 0
  timeout:
    description:
      - Seconds each request may take, as a whole (from the connection to the last byte of the answer), so a worker
        or router that answers one byte at a time is cut there (no answer). Above 0, at most 3600.
      - A redirect (3xx) is never followed; its code is the worker's answer (a worker that redirects render gives
        the router no token ids), and the API key is sent nowhere else.
    type: float
    default: 30
  max_tokens:
    description: Output tokens of each spread request (enough for the requests to overlap).
    type: int
    default: 16
attributes:
  check_mode:
    support: full
    details: The render probe runs in check mode too (it only reads); the spread check is skipped (it makes the
      instances compute) and says so in RV(skipped_spread).
notes:
  - Where vLLM serves render only when asked to (C(--enable-scale-out) in newer releases) a worker answers 403 or
    404; docs/router.md has the table by release.
seealso:
  - module: ascend.kvpool.vllm_router
"""

EXAMPLES = r"""
- name: Which instances serve the render endpoint cache_aware needs
  ascend.kvpool.vllm_router_check:
    workers: [http://172.31.250.11:8002, http://172.31.250.12:8002]
    render: true
  register: probe

- name: Send 8 requests with distinct prefixes through the router and check that they spread
  ascend.kvpool.vllm_router_check:
    workers: [http://172.31.250.11:8002, http://172.31.250.12:8002]
    router_url: http://172.31.250.11:30000
    metrics_url: http://127.0.0.1:29000/metrics
    policy: round_robin
    spread_requests: 8
"""

RETURN = r"""
render:
  description: Status code of C(POST /v1/chat/completions/render) per worker URL (null when nothing answered).
  returned: when O(render=true)
  type: dict
  sample: {"http://172.31.250.11:8002": 200, "http://172.31.250.12:8002": 404}
tokenize:
  description: Status code of C(POST /tokenize) per worker whose render answered 404, 405 or 501.
  returned: when O(render=true)
  type: dict
  sample: {"http://172.31.250.12:8002": 200}
counts:
  description: Requests of the spread check that the router sent to each worker.
  returned: when the spread check ran
  type: dict
  sample: {"http://172.31.250.11:8002": 4, "http://172.31.250.12:8002": 4}
failed_requests:
  description: Requests of the spread check that did not answer 200.
  returned: when the spread check ran
  type: int
  sample: 0
skipped_spread:
  description: Why the spread check did not run (check mode), or empty.
  returned: always
  type: str
"""

import random
from concurrent.futures import ThreadPoolExecutor

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.ascend.kvpool.plugins.module_utils import _errors, _router, _validate
from ansible_collections.ascend.kvpool.plugins.module_utils._errors import KvpoolError
from ansible_collections.ascend.kvpool.plugins.module_utils._proc import http_status

WORDS = ('pool', 'ascend', 'mooncake', 'prefix', 'router', 'cache', 'block', 'token', 'node', 'master', 'segment',
         'replica', 'lease', 'store', 'query', 'answer')


def spread_prompts(count, rng):
    """``count`` prompts that share no first word and differ in length (vllm-router has keyed requests by their
    token count: prompts of one length would land together whatever the policy)."""
    out = []
    for i in range(count):
        words = ['check-%d-%08x' % (i, rng.getrandbits(32))] + [rng.choice(WORDS) for _word in range(12 + 3 * i)]
        out.append(' '.join(words))
    return out


def _body(model, prompt, max_tokens):
    doc = {'messages': [{'role': 'user', 'content': prompt}], 'max_tokens': max_tokens}
    if model:
        doc['model'] = model
    return doc


def main():
    module = AnsibleModule(
        argument_spec=dict(
            workers=dict(type='list', elements='str', default=[]),
            render=dict(type='bool', default=False),
            model=dict(type='str'),
            api_key=dict(type='str', no_log=True),
            router_url=dict(type='str'),
            metrics_url=dict(type='str'),
            policy=dict(type='str', choices=list(_router.POLICIES), default='round_robin'),
            spread_requests=dict(type='int', default=0),
            timeout=dict(type='float', default=30),
            max_tokens=dict(type='int', default=16, no_log=False),
        ),
        supports_check_mode=True,
    )
    failed, result = _errors.outcome(module, _run, module)
    if failed:
        module.fail_json(**result)
    module.exit_json(**result)


def _run(module):
    p = module.params
    _validate.int_range(p['spread_requests'], 'spread_requests', 0, 1000)
    _validate.int_range(p['max_tokens'], 'max_tokens', 1, 4096)
    _validate.number_range(p['timeout'], 'timeout', above=0, high=3600, why='seconds')
    workers = [_validate.http_url(u, 'workers[%d]' % i) for i, u in enumerate(p['workers'])]
    headers = {'Authorization': 'Bearer %s' % p['api_key']} if p['api_key'] else {}
    if p['render'] and not workers:
        raise KvpoolError('render=true needs the worker URLs in workers (http://HOST:PORT of every instance)')
    result = dict(changed=False, skipped_spread='')
    if p['render']:
        def probe(url):
            code = http_status(url + _router.RENDER_PATH, timeout=p['timeout'], headers=headers,
                               data=_body(p['model'], 'ping', 1))[0]
            fallback = None
            if code in _router.RENDER_FALLBACK_CODES:
                # Where render is absent vllm-router 0.1.17 asks /tokenize with the same messages.
                doc = {'messages': [{'role': 'user', 'content': 'ping'}]}
                if p['model']:
                    doc['model'] = p['model']
                fallback = http_status(url + _router.TOKENIZE_PATH, timeout=p['timeout'], headers=headers,
                                       data=doc)[0]
            return url, code, fallback
        with ThreadPoolExecutor(max_workers=min(32, len(workers)) or 1) as pool:
            answers = list(pool.map(probe, workers))
        result['render'] = dict((url, code) for url, code, _fallback in answers)
        result['tokenize'] = dict((url, fallback) for url, code, fallback in answers
                                  if code in _router.RENDER_FALLBACK_CODES)
    if p['spread_requests'] > 0:
        if module.check_mode:
            result['skipped_spread'] = 'check mode: no requests sent through the router'
            return result
        if not p['router_url'] or not p['metrics_url']:
            raise KvpoolError('spread_requests needs router_url and metrics_url (the router\'s /metrics)')
        router = _validate.http_url(p['router_url'], 'router_url')
        metrics = _validate.http_url(p['metrics_url'], 'metrics_url')
        before, rejected_before = _decisions(metrics)

        def send(prompt):
            status, body = http_status(router + '/v1/chat/completions', timeout=p['timeout'], headers=headers,
                                       data=_body(p['model'], prompt, p['max_tokens']))
            return '' if status == 200 else '%s: %s' % (status or 'no answer', body[:200])
        # As traffic does: several requests in flight at once (one per worker), so that a load-aware policy sees
        # load; one request at a time finds every worker idle, and vllm-router takes the first one on a tie.
        with ThreadPoolExecutor(max_workers=max(2, min(32, len(workers)))) as pool:
            failed = [f for f in pool.map(send, spread_prompts(p['spread_requests'], random.Random())) if f]
        after, rejected_after = _decisions(metrics)
        counts = dict((u, after.get(u, 0) - before.get(u, 0)) for u in sorted(set(workers) | set(after)))
        if not failed and sum(counts.values()) == 0:
            raise KvpoolError('vllm-router at %s answered %d requests, but its metrics %s count none of them '
                              '(no vllm_router_processed_requests_total): is that the router\'s --prometheus-port?'
                              % (router, p['spread_requests'], metrics), result=result)
        result.update(counts=counts, failed_requests=len(failed))
        if failed:
            raise KvpoolError('%d of %d requests through the router %s failed; first: %s'
                              % (len(failed), p['spread_requests'], router, failed[0]), result=result)
        problem = _router.spread_problem(p['policy'], counts, rejected_after - rejected_before)
        if problem:
            raise KvpoolError('vllm-router at %s: %s' % (router, problem), result=result)
    return result


def _decisions(metrics_url):
    status, body = http_status(metrics_url, timeout=5.0, limit=8 << 20)
    if status != 200:
        raise KvpoolError('the router\'s metrics %s answered %s: is --prometheus-port set and the router running?'
                          % (metrics_url, status or 'nothing'))
    return _router.decisions(body), _router.rejected(body)


if __name__ == '__main__':
    main()
