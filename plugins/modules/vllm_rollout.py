#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: vllm_rollout
short_description: Drain vLLM instances out of vllm-router, put them back and wait until their peers recover
version_added: 2.0.0
description:
  - The three steps of a rolling change around the restart of a batch of instances (C(upgrade.yml)), run from a
    host that reaches the router and every instance.
  - O(action=baseline) measures the time to first token (TTFT) of every instance of O(peers) before anything
    changes, as the median of O(samples) short streaming chat requests sent one after another to the instance
    itself (the benchmark's timed client). An instance that answers none of them is listed in RV(errors), not
    failed.
  - O(action=drain) takes every instance of O(instances) out of the router (C(POST /remove_worker?url=...),
    vllm-router 0.1.17 has no draining state), then waits until each instance's own C(/metrics) shows nothing in
    flight (C(vllm:num_requests_running) plus C(vllm:num_requests_waiting) 0 on two polls in a row), within
    O(timeout). When that time runs out the instances are put back in the router (no half-applied change) and the
    task fails naming the instance and the requests still in flight. Without O(router_url) only the wait runs,
    and RV(warning) says that requests sent to these instances during their restart will fail.
  - O(action=restore) puts the instances back (C(POST /add_worker?url=...) for those not listed), waits until
    C(GET /workers) lists each as healthy, sends one request through the router, and then waits for the
    recovery of the peers - the instances of O(peers) - until O(timeout). A peer has recovered when its TTFT
    (measured as for the baseline) is within max(baseline x O(ttft_factor), baseline + O(ttft_slack)). The task
    fails naming the peer, its TTFT and its bound.
  - Removal and addition are not persisted by vllm-router; a router restarted meanwhile has every worker of its
    command line again.
author:
  - ascend.kvpool contributors (@ascend-kvpool)
options:
  action:
    description: Which step to run.
    type: str
    choices: [baseline, drain, restore]
    required: true
  router_url:
    description:
      - Base URL of vllm-router (C(http://HOST:PORT)), as its record's C(endpoint). Unset, O(action=drain) only
        waits for the instances to finish their requests, and O(action=restore) only waits for the recovery.
    type: str
  instances:
    description: Base URLs of the instances drained or put back (the router's worker URLs, C(http://HOST:PORT)).
    type: list
    elements: str
    default: []
  peers:
    description: Base URLs of the instances whose TTFT is measured (O(action=baseline)) or must recover
      (O(action=restore)); the instances of the other batches.
    type: list
    elements: str
    default: []
  baseline:
    description: TTFT p50 in seconds per peer URL, as O(action=baseline) returned it in RV(baseline). A peer
      without one is measured and reported, not judged.
    type: dict
    default: {}
  model:
    description: Served model name of the timed requests (and of the request through the router).
    type: str
  api_key:
    description: API key of the instances, sent as C(Authorization Bearer) with the chat requests; never returned.
    type: str
  samples:
    description: Timed requests per peer and measurement (their median is the figure). 1 to 100.
    type: int
    default: 5
  max_tokens:
    description: Output tokens of each timed request. 1 to 4096.
    type: int
    default: 4
  timeout:
    description:
      - Seconds the drain may wait for the requests in flight, or the restore for the router to list the
        instances healthy and the peers to recover. Above 0, at most 86400.
    type: float
    default: 300
  ttft_factor:
    description: The peers' TTFT bound is at least their baseline times this factor. At least 1, at most 100.
    type: float
    default: 2.0
  ttft_slack:
    description: The peers' TTFT bound is at least their baseline plus these seconds. At least 0, at most 3600.
    type: float
    default: 0.5
  poll_interval:
    description: Seconds between two polls of the instances' C(/metrics), of C(/workers) and between two
      measurements of the recovery. Above 0, at most 60.
    type: float
    default: 0.5
  allow_no_worker:
    description:
      - With O(action=drain) and a router, drain even when no other healthy worker would be left in the router
        (every request then fails until the batch is back). Without it such a drain is refused before anything
        changes, naming the workers the router lists. A single-node deployment needs it.
    type: bool
    default: false
  request_timeout:
    description: Seconds each HTTP request may take as a whole (connect to last byte). Above 0, at most 3600.
    type: float
    default: 30
attributes:
  check_mode:
    support: full
    description: Nothing is removed from or added to the router and no timed request is sent; RV(plan) says what would
      be done, and the drain reads what each instance has in flight now.
  diff_mode:
    support: none
    description: Nothing is written on a node, so there is nothing to diff.
  idempotent:
    support: partial
    description: A drain of instances the router no longer lists removes nothing; a restore of listed instances adds
      nothing. The timed requests make the instances compute.
notes:
  - vllm-router 0.1.17 endpoints (C(src/server.rs)) C(POST /add_worker?url=), C(POST /remove_worker?url=),
    C(GET /workers). docs/upgrades.md has the order of operations of C(upgrade.yml).
  - Every request has one deadline for the whole request (O(request_timeout)); redirects are never followed.
seealso:
  - module: ascend.kvpool.vllm_router
  - module: ascend.kvpool.vllm_server
"""

EXAMPLES = r"""
- name: TTFT of every instance before the change
  ascend.kvpool.vllm_rollout:
    action: baseline
    peers: [http://172.31.250.11:8002, http://172.31.250.12:8002]
    model: qwen
  register: before

- name: Take node2's instance out of the router and let its requests finish
  ascend.kvpool.vllm_rollout:
    action: drain
    router_url: http://172.31.250.11:30000
    instances: [http://172.31.250.12:8002]
    timeout: 120

- name: Put it back and wait until node1's instance is within its TTFT bound again
  ascend.kvpool.vllm_rollout:
    action: restore
    router_url: http://172.31.250.11:30000
    instances: [http://172.31.250.12:8002]
    peers: [http://172.31.250.11:8002]
    baseline: "{{ before.baseline }}"
    model: qwen
"""

RETURN = r"""
plan:
  description: What the task does (or would do in check mode), one line per step.
  returned: always
  type: list
  elements: str
  sample: ["remove http://172.31.250.12:8002 from http://172.31.250.11:30000", "wait until it has nothing in flight"]
baseline:
  description: TTFT p50 in seconds of every peer that answered (O(action=baseline)).
  returned: when O(action=baseline) and not in check mode
  type: dict
  sample: {"http://172.31.250.11:8002": 0.043}
errors:
  description: Why a peer has no figure (the first failed request's error), per peer URL.
  returned: when O(action=baseline) or O(action=restore)
  type: dict
removed:
  description: Instances the drain removed from the router (in check mode, those it would remove).
  returned: when O(action=drain)
  type: list
  elements: str
in_flight:
  description: Requests running and waiting per instance at the drain's last poll (null where C(/metrics) did not
    answer).
  returned: when O(action=drain)
  type: dict
  sample: {"http://172.31.250.12:8002": {"running": 0, "waiting": 0}}
drain_seconds:
  description: Seconds from the removal until every instance had nothing in flight.
  returned: when O(action=drain) and not in check mode
  type: float
warning:
  description: Said when there is no router, so requests sent to the instances during their restart fail.
  returned: when O(router_url) is unset
  type: str
added:
  description: Instances the restore added to the router (in check mode, those it would add).
  returned: when O(action=restore)
  type: list
  elements: str
router_request:
  description: Status code of the one request sent through the router after the instances were listed healthy.
  returned: when O(action=restore) with O(router_url), not in check mode
  type: int
recovery:
  description: Per peer the TTFT p50 baseline, after the restore and bound, in seconds, and whether it is within.
  returned: when O(action=restore) and not in check mode
  type: dict
  sample: {"http://172.31.250.11:8002": {"baseline": 0.043, "after": 0.051, "bound": 0.543, "ok": true}}
recovery_seconds:
  description: Seconds from the restore's start until every peer was within its bound.
  returned: when O(action=restore) and not in check mode
  type: float
"""

import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.ascend.kvpool.plugins.module_utils import _errors, _loadgen, _router, _validate
from ansible_collections.ascend.kvpool.plugins.module_utils._errors import KvpoolError
from ansible_collections.ascend.kvpool.plugins.module_utils._proc import http_status

NO_ROUTER = ('no router (router_url unset): the instances stay in every client\'s rotation, so requests sent to '
             'them during their restart will fail')


def main():
    module = AnsibleModule(
        argument_spec=dict(
            action=dict(type='str', required=True, choices=['baseline', 'drain', 'restore']),
            router_url=dict(type='str'),
            instances=dict(type='list', elements='str', default=[]),
            peers=dict(type='list', elements='str', default=[]),
            baseline=dict(type='dict', default={}),
            model=dict(type='str'),
            api_key=dict(type='str', no_log=True),
            samples=dict(type='int', default=5),
            max_tokens=dict(type='int', default=4, no_log=False),
            timeout=dict(type='float', default=300),
            ttft_factor=dict(type='float', default=2.0),
            ttft_slack=dict(type='float', default=0.5),
            poll_interval=dict(type='float', default=0.5),
            allow_no_worker=dict(type='bool', default=False),
            request_timeout=dict(type='float', default=30),
        ),
        supports_check_mode=True,
    )
    failed, result = _errors.outcome(module, _run, module.params, module.check_mode)
    if failed:
        module.fail_json(**result)
    module.exit_json(**result)


class Rollout(object):
    """One step of a rolling change; ``clock`` and ``sleep`` are the test's to replace."""

    def __init__(self, params, check_mode, clock=time.monotonic, sleep=time.sleep, probe=None):
        p = params
        _validate.int_range(p['samples'], 'samples', 1, 100)
        _validate.int_range(p['max_tokens'], 'max_tokens', 1, 4096)
        _validate.number_range(p['timeout'], 'timeout', above=0, high=86400, why='seconds')
        _validate.number_range(p['ttft_factor'], 'ttft_factor', low=1, high=100)
        _validate.number_range(p['ttft_slack'], 'ttft_slack', low=0, high=3600, why='seconds')
        _validate.number_range(p['poll_interval'], 'poll_interval', above=0, high=60, why='seconds')
        _validate.number_range(p['request_timeout'], 'request_timeout', above=0, high=3600, why='seconds')
        self.p = p
        self.check = check_mode
        self.router = _validate.http_url(p['router_url'], 'router_url') if p['router_url'] else ''
        self.instances = [_validate.http_url(u, 'instances[%d]' % i) for i, u in enumerate(p['instances'])]
        self.peers = [_validate.http_url(u, 'peers[%d]' % i) for i, u in enumerate(p['peers'])]
        self.baseline = {}
        for url, value in (p['baseline'] or {}).items():
            key = _validate.http_url(url, 'baseline key')
            if value is not None:
                self.baseline[key] = _validate.number_range(_number(value, 'baseline[%s]' % url),
                                                            'baseline[%s]' % url, low=0, why='seconds')
        self.clock = clock
        self.sleep = sleep
        self.probe = probe or _loadgen.probe_ttft
        self.result = dict(changed=False, plan=[])

    # --- HTTP ---------------------------------------------------------------------------------------------------
    def _headers(self):
        return {'Authorization': 'Bearer %s' % self.p['api_key']} if self.p['api_key'] else {}

    def _workers(self):
        status, body = http_status(self.router + '/workers', timeout=self.p['request_timeout'], limit=8 << 20)
        if status != 200:
            raise KvpoolError('vllm-router at %s answered GET /workers with %s: is it running (systemctl status '
                              'kvpool-router on its host)?' % (self.router, status or 'nothing'), result=self.result)
        try:
            return _router.parse_workers(body)
        except ValueError as exc:
            raise KvpoolError('vllm-router at %s: GET /workers is not its list of workers (%s)'
                              % (self.router, exc), result=self.result) from exc

    def _worker(self, verb, url, timeout=None):
        path = _router.worker_path(verb, url)
        status, body = http_status(self.router + path, timeout=timeout or self.p['request_timeout'], data={})
        if status is None or not 200 <= status < 300:
            return '%s %s answered %s %s' % ('POST', path, status or 'nothing', body[:200].strip())
        return ''

    def _in_flight(self, url):
        status, body = http_status(url + '/metrics', timeout=self.p['request_timeout'], limit=16 << 20)
        if status != 200:
            return 'no answer'
        return _router.in_flight(body)

    def _measure(self, urls):
        figures, errors = {}, {}
        for url in urls:
            p50, good, bad, error = self.probe(url, self.p['model'], samples=self.p['samples'],
                                               api_key=self.p['api_key'], timeout=self.p['request_timeout'],
                                               max_tokens=self.p['max_tokens'])
            figures[url] = p50
            if p50 is None or bad:
                errors[url] = '%d of %d requests failed; first: %s' % (bad, good + bad, error)
        return figures, errors

    # --- steps --------------------------------------------------------------------------------------------------
    def baseline_step(self):
        if not self.p['model']:
            raise KvpoolError('action=baseline needs model (the served model name of the instances)')
        self.result['plan'] = ['measure the TTFT p50 of %s over %d requests' % (u, self.p['samples'])
                               for u in self.peers]
        if self.check:
            return self.result
        figures, errors = self._measure(self.peers)
        self.result.update(baseline=dict((u, v) for u, v in figures.items() if v is not None), errors=errors)
        return self.result

    def drain_step(self):
        r = self.result
        r.update(removed=[], in_flight={})
        listed = set()
        if self.router:
            workers = self._workers()
            listed = set(w['url'] for w in workers)
            r['removed'] = [u for u in self.instances if u in listed]
            left = sorted(w['url'] for w in workers if w['healthy'] and w['url'] not in self.instances)
            if not left and not self.p['allow_no_worker']:
                raise KvpoolError(
                    'draining %s would leave vllm-router at %s with no healthy worker (it lists %s): every request '
                    'would fail until the batch is back. Nothing was changed. Fix: bring the other instances back '
                    'first (a batch that failed earlier is put back by the next upgrade.yml run that applies its '
                    'values, or by site.yml --tags instances,router), or accept the outage with allow_no_worker '
                    '(kvpool_upgrade_allow_outage=true; a single-node deployment needs it)'
                    % (', '.join(self.instances), self.router,
                       ', '.join('%s (%s)' % (w['url'], 'healthy' if w['healthy'] else 'unhealthy')
                                 for w in workers) or 'no worker'), result=r)
            r['plan'] += ['remove %s from the router %s' % (u, self.router) for u in r['removed']]
            r['plan'] += ['%s: not listed by the router, nothing to remove' % u for u in self.instances
                          if u not in listed]
        else:
            r['warning'] = NO_ROUTER
        r['plan'] += ['wait until %s has nothing in flight (at most %g s)' % (u, self.p['timeout'])
                      for u in self.instances]
        if self.check:
            r['changed'] = bool(r['removed'])
            for url in self.instances:
                r['in_flight'][url] = _counts(self._in_flight(url))
            return r
        started = self.clock()
        for url in r['removed']:
            problem = self._worker('remove', url)
            if problem:
                self._put_back(r['removed'])
                raise KvpoolError('vllm-router at %s did not remove %s: %s; every instance of the batch is back '
                                  'in the router and nothing was changed' % (self.router, url, problem), result=r)
            r['changed'] = True
        pending = list(self.instances)
        zero_once = set()
        deadline = started + self.p['timeout']
        while True:
            still = []
            for url in pending:
                counts = self._in_flight(url)
                r['in_flight'][url] = _counts(counts)
                if counts == 'no answer':
                    continue  # nothing answers: nothing in flight can finish there
                if counts is None:
                    still.append(url)
                    continue
                if _router.drained(counts):
                    if url in zero_once:
                        continue
                    zero_once.add(url)  # a request the router forwarded just before the removal may still arrive
                else:
                    zero_once.discard(url)
                still.append(url)
            pending = still
            if not pending or self.clock() >= deadline:
                break
            self.sleep(min(self.p['poll_interval'], max(0.0, deadline - self.clock())))
        stuck = [u for u in pending if u not in zero_once]
        if stuck:
            url = stuck[0]
            fig = r['in_flight'].get(url)
            what = ('%s running, %s waiting' % (fig['running'], fig['waiting'])) if fig else \
                'its /metrics has no vllm:num_requests_running nor vllm:num_requests_waiting'
            back = self._put_back(r['removed'])
            raise KvpoolError('%s did not drain within %g s (kvpool_upgrade_drain_timeout): %s. %s nothing was '
                              'changed. Fix: wait for the long requests, or give a longer drain timeout.'
                              % (url, self.p['timeout'], what, back), result=r)
        r['drain_seconds'] = round(self.clock() - started, 3)
        return r

    def _put_back(self, urls):
        if not urls:
            return 'No instance had been removed from the router;'
        failed = [u for u in urls if self._worker('add', u, timeout=self.p['timeout'])]
        if failed:
            return ('Putting %s back into the router failed (add it by hand: curl -X POST \'%s%s\');'
                    % (', '.join(failed), self.router, _router.worker_path('add', failed[0])))
        return 'The batch\'s instances are back in the router and'

    def restore_step(self):
        r = self.result
        r['added'] = []
        if self.router:
            listed = set(w['url'] for w in self._workers())
            r['added'] = [u for u in self.instances if u not in listed]
            r['plan'] += ['add %s to the router %s' % (u, self.router) for u in r['added']]
            r['plan'] += ['wait until the router lists %s healthy, then send one request through it'
                          % ', '.join(self.instances)] if self.instances else []
        else:
            r['warning'] = NO_ROUTER
        if self.peers:
            if not self.p['model']:
                raise KvpoolError('action=restore with peers needs model (the served model name of the instances)')
            r['plan'].append('wait until the TTFT p50 of %s is within max(baseline x %g, baseline + %g s), at most '
                             '%g s' % (', '.join(self.peers), self.p['ttft_factor'], self.p['ttft_slack'],
                                       self.p['timeout']))
        if self.check:
            r['changed'] = bool(r['added'])
            return r
        started = self.clock()
        deadline = started + self.p['timeout']
        for url in r['added']:
            problem = self._worker('add', url, timeout=self.p['timeout'])
            if problem:
                raise KvpoolError('vllm-router at %s did not take %s back: %s' % (self.router, url, problem),
                                  result=r)
            r['changed'] = True
        if self.router and self.instances:
            while True:
                missing = _router.listed_healthy(self._workers(), self.instances)
                if not missing or self.clock() >= deadline:
                    break
                self.sleep(min(self.p['poll_interval'], max(0.0, deadline - self.clock())))
            if missing:
                raise KvpoolError('vllm-router at %s does not list %s as healthy %g s after it was put back: the '
                                  'batch does not serve through the router' % (self.router, ', '.join(missing),
                                                                               self.p['timeout']), result=r)
            self._through_router()
        if self.peers:
            self._recover(started, deadline)
        return r

    def _through_router(self):
        doc = {'messages': [{'role': 'user', 'content': 'rollout check'}], 'max_tokens': 1}
        if self.p['model']:
            doc['model'] = self.p['model']
        status, body = http_status(self.router + '/v1/chat/completions', timeout=self.p['request_timeout'],
                                   headers=self._headers(), data=doc)
        self.result['router_request'] = status
        if status != 200:
            raise KvpoolError('a request through vllm-router at %s answered %s after the batch was put back: %s'
                              % (self.router, status or 'nothing', body[:200].strip()), result=self.result)

    def _recover(self, started, deadline):
        r = self.result
        while True:
            figures, errors = self._measure(self.peers)
            r['recovery'] = _router.recovery(self.baseline, figures, self.p['ttft_factor'], self.p['ttft_slack'])
            r['errors'] = errors
            problem = _router.recovery_problem(r['recovery'])
            if not problem:
                r['recovery_seconds'] = round(self.clock() - started, 3)
                return
            if self.clock() >= deadline:
                raise KvpoolError('the peers did not recover within %g s of the batch\'s restore (kvpool_upgrade_'
                                  'recovery_timeout): %s. The rollout stops here; the batch serves, the next batches '
                                  'are unchanged.' % (self.p['timeout'], problem), result=r)
            self.sleep(min(self.p['poll_interval'], max(0.0, deadline - self.clock())))


def _number(value, option):
    if isinstance(value, bool):
        raise KvpoolError('%s=%r is not a number of seconds' % (option, value))
    try:
        return float(value)
    except (TypeError, ValueError) as exc:
        raise KvpoolError('%s=%r is not a number of seconds' % (option, value)) from exc


def _counts(counts):
    if counts is None or counts == 'no answer':
        return None
    return {'running': counts[0], 'waiting': counts[1]}


def _run(params, check_mode):
    step = Rollout(params, check_mode)
    return getattr(step, '%s_step' % params['action'])()


if __name__ == '__main__':
    main()
