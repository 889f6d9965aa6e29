#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: vllm_router
short_description: Run vllm-router in front of the vLLM instances as a health-checked systemd unit
version_added: 1.0.0
description:
  - Starts, stops or restarts C(vllm-router) (PyPI C(vllm-router)), one HTTP endpoint that spreads requests over
    the vLLM instances (its workers) by a routing policy, as the systemd unit C(kvpool-router.service) on the
    host. It needs no NPU, so it always runs as a host unit, also where the instances run in containers.
  - systemd keeps it running. A router that dies is restarted within a second, with a bounded restart rate
    (O(restart_limit_burst)); after a reboot the enabled unit starts it again.
  - Idempotent. A router whose unit file is the wanted one and that passes its health gate is left alone (C(ok)).
    Different settings (a worker more or less, another policy) rewrite the unit and restart it (C(changed), with a
    diff of the unit file, one word per line). The worker URLs are sorted, so the order of the hosts does not
    matter.
  - 'The health gate, polled every O(poll_interval) seconds for at most O(ready_timeout) seconds: C(GET /health)
    answers 200 (vllm-router answers 503 while any worker is unhealthy), C(GET /workers) lists every URL of
    O(worker_urls) as healthy and no other, and every worker answers C(GET /health) itself from the router host
    (vllm-router counts a worker that was down at its start as healthy until its first health check fails).'
  - A start that fails fails the task with the unit's name, the reason (the workers not listed or not healthy, the
    line of the log that says why) and the tail of its journal.
  - The policy is passed as given; choosing one that the instances can serve is the job of the role
    C(ascend.kvpool.kvpool_router) and of M(ascend.kvpool.vllm_router_check).
author:
  - ascend.kvpool contributors (@ascend-kvpool)
extends_documentation_fragment:
  - ascend.kvpool.service.unit
options:
  state:
    description:
      - C(started) makes sure the router runs with these settings and passes its health gate.
      - C(stopped) stops the router's unit, disables it and removes its unit file.
      - C(restarted) always restarts it.
    type: str
    choices: [started, stopped, restarted]
    default: started
  name:
    description:
      - Name of the router; its unit is C(kvpool-<name>.service). A second router beside the deployed one (the
        benchmark's round-robin router, C(router-rr)) takes another name and other ports.
      - Lowercase letters, digits and C(-); not starting with C(vllm-), the prefix of the instances' units.
    type: str
    default: router
  binary:
    description: The C(vllm-router) executable, normally in its own virtualenv.
    type: path
    default: /opt/ascend-kvpool/vllm-router/bin/vllm-router
  host:
    description: Address the router listens on (C(--host)); the node's own address in the role. One address, no
      port (the port is O(port)).
    type: str
    default: 127.0.0.1
  port:
    description: Port of the router's OpenAI API (C(--port)).
    type: int
    default: 30000
  prometheus_host:
    description: Address of the router's Prometheus metrics (C(--prometheus-host)); one address, no port.
    type: str
    default: 127.0.0.1
  prometheus_port:
    description: Port of the router's Prometheus metrics (C(--prometheus-port)); must differ from O(port).
    type: int
    default: 29000
  policy:
    description: Routing policy (C(--policy)), as vllm-router 0.1.17 names them.
    type: str
    choices: [random, round_robin, cache_aware, kv_aware, power_of_two, consistent_hash, sticky_least_loaded]
    default: round_robin
  worker_urls:
    description:
      - Base URLs of the vLLM instances (C(http://HOST:PORT)), one per instance; required unless O(state=stopped).
      - Sorted and without duplicates on the command line (C(--worker-urls)).
    type: list
    elements: str
    default: []
  worker_startup_check_interval:
    description: Seconds between the router's checks of its workers while it starts
      (C(--worker-startup-check-interval)).
    type: int
    default: 1
  worker_startup_timeout:
    description:
      - Seconds the router waits at its start for every worker to be healthy before it serves anyway
        (C(--worker-startup-timeout-secs); vllm-router's default is 600).
    type: int
    default: 10
  health_check_interval:
    description:
      - Seconds between the router's health checks of each worker (C(--health-check-interval-secs)).
      - With O(health_failure_threshold) it decides how long a dead worker stays in rotation (vllm-router's
        defaults, 60 s and 3, keep it for up to three minutes). A request sent to it meanwhile is retried on the same
        worker and fails (seen with 0.1.17 - five attempts, then 500).
    type: int
    default: 2
  health_failure_threshold:
    description: Failed health checks in a row before a worker is left out (C(--health-failure-threshold)).
    type: int
    default: 2
  health_success_threshold:
    description: Passed health checks in a row before a worker is taken back (C(--health-success-threshold)).
    type: int
    default: 1
  circuit_breaker_timeout:
    description:
      - Seconds a worker's circuit breaker stays open before a request may try it again
        (C(--cb-timeout-duration-secs)).
      - Failed attempts open it (seen with 0.1.17 - two failed requests, ten failed attempts); while it is open the
        policy passes the worker over even after its health checks pass again. vllm-router's default kept a
        restarted instance out for about 60 s; the health checks already leave a dead worker out.
    type: int
    default: 5
  cache_threshold:
    description: C(cache_aware) only (C(--cache-threshold), 0 to 1); unset keeps the router's default (0.3).
    type: float
  balance_abs_threshold:
    description: C(cache_aware) only (C(--balance-abs-threshold)); unset keeps the router's default (64).
    type: int
  balance_rel_threshold:
    description: C(cache_aware) only (C(--balance-rel-threshold)); unset keeps the router's default (1.5).
    type: float
  extra_args:
    description:
      - More C(vllm-router) arguments, appended as given (one word per item).
      - Flags this module writes are refused, also abbreviated (the launcher is argparse, which takes any
        unambiguous prefix of a flag), and so is C(--api-key), which would put a key on the command line.
    type: list
    elements: str
    default: []
  env:
    description:
      - Extra environment of the router (for example C(RUST_LOG)). Names are letters, digits and C(_).
      - A variable whose name says it holds a secret (C(HF_TOKEN), C(*_API_KEY), C(*PASSWORD*), C(*SECRET*),
        C(*AUTH*), ...) and has a value is written into the unit's mode 0600 C(EnvironmentFile=) (in container mode
        it is filled into the container's environment by the action plugin), never into the world-readable unit file;
        its value is masked in the result, the diff and every message.
    type: dict
    default: {}
  ready_timeout:
    description: Seconds to wait for the health gate after a start (and for a running router to pass it).
    type: float
    default: 60
  poll_interval:
    description: Seconds between health polls.
    type: float
    default: 0.2
  stop_timeout:
    description: Seconds after SIGTERM before SIGKILL (C(TimeoutStopSec=)).
    type: float
    default: 10
notes:
  - The client's C(Authorization) header is passed on to the workers, so instances started with an API key work
    through the router with the same key and the router is given none (its C(--api-key) flag would show the key in
    the process list). The router's own endpoints (C(/health), C(/workers), C(/metrics)) need no key.
  - Requests the router retries on another worker (a worker that died, until its health checks leave it out) still
    succeed; docs/router.md has the measured failover.
seealso:
  - module: ascend.kvpool.vllm_router_check
  - name: vllm-router
    description: The router's source, policies and flags.
    link: https://github.com/vllm-project/router
"""

EXAMPLES = r"""
- name: One endpoint in front of two instances, round robin
  ascend.kvpool.vllm_router:
    host: "{{ ansible_host }}"
    policy: round_robin
    worker_urls:
      - http://172.31.250.11:8002
      - http://172.31.250.12:8002
  register: router

- name: Show where it answers
  ansible.builtin.debug:
    msg: "{{ router.endpoint }}: {{ router.workers | length }} workers, ready in {{ router.ready_seconds }} s"

- name: Stop it
  ascend.kvpool.vllm_router:
    state: stopped
"""

RETURN = r"""
state:
  description: State of the router after the task (C(running) or C(stopped)).
  returned: always
  type: str
  sample: running
action:
  description: What the task did (or would do in check mode).
  returned: always
  type: str
  sample: started
  choices: [none, started, restarted, stopped]
reason:
  description: Why it did it.
  returned: always
  type: str
  sample: settings changed
pid:
  description: Main pid of the router's unit; null when stopped.
  returned: always
  type: int
  sample: 5120
unit:
  description: The systemd unit of the router.
  returned: always
  type: str
  sample: kvpool-router.service
logs:
  description: How to read the router's log.
  returned: always
  type: str
  sample: journalctl -u kvpool-router
health:
  description: C(healthy) when the health gate passed; C(unknown) in check mode when a change is pending.
  returned: when polled
  type: str
  sample: healthy
argv:
  description: The effective command line.
  returned: always
  type: list
  elements: str
fingerprint:
  description: sha256 of the unit file; a change restarts the router.
  returned: always
  type: str
endpoint:
  description: Base URL of the router's OpenAI API.
  returned: always
  type: str
  sample: http://172.31.250.11:30000
metrics_url:
  description: URL of the router's Prometheus metrics.
  returned: always
  type: str
  sample: http://127.0.0.1:29000/metrics
workers:
  description: The worker URLs the router was given (sorted).
  returned: always
  type: list
  elements: str
workers_seen:
  description: The router's C(/workers) answer at the last poll, as C(url) and C(healthy).
  returned: when polled
  type: list
  elements: dict
ready_seconds:
  description: Seconds the router took to pass its health gate after its start (or to pass it when running).
  returned: always
  type: float
  sample: 1.2
"""

import os
import re
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.ascend.kvpool.plugins.module_utils import _errors, _router, _secrets, _validate
from ansible_collections.ascend.kvpool.plugins.module_utils._errors import KvpoolError
from ansible_collections.ascend.kvpool.plugins.module_utils._shared import (
    ROUTER_PORT, ROUTER_PROMETHEUS_PORT, format_host_port, probe_host,
)
from ansible_collections.ascend.kvpool.plugins.module_utils._proc import http_status, tcp_open
from ansible_collections.ascend.kvpool.plugins.module_utils._service import (
    ServiceError,
    backend_for,
    check_service_params,
    lifecycle_for,
    spec_for,
    unit_argument_spec,
)

# Units are kvpool-<name>, never kvpool-vllm-*: that prefix is the instances' (vllm_server stops every unlisted
# kvpool-vllm-* unit).
NAME_RE = re.compile(r'^[a-z0-9][a-z0-9-]{0,40}$')


def check_params(p):
    """Everything the argument spec cannot say; returns (worker URLs, environment). Raises KvpoolError naming the
    option, the value and the fix."""
    if not NAME_RE.match(p['name'] or '') or p['name'].startswith('vllm-'):
        raise KvpoolError('name=%r: use lowercase letters, digits and -, not starting with vllm- (the unit is '
                          'kvpool-<name>; kvpool-vllm-* are the instances\' units)' % p['name'])
    for name in ('port', 'prometheus_port'):
        _validate.port(p[name], name)
    if p['state'] != 'stopped':  # a stop uses no address: a typo there must not keep a router from stopping
        # A port in an address would be written into --host and the unit would die at its start (left enabled).
        _validate.host_address(p['host'], 'host', 'port', example='127.0.0.1', empty=False)
        _validate.host_address(p['prometheus_host'], 'prometheus_host', 'prometheus_port', example='127.0.0.1',
                               empty=False)
    if p['port'] == p['prometheus_port']:
        raise KvpoolError('port and prometheus_port are both %d; give them different ports' % p['port'])
    for name in ('worker_startup_check_interval', 'worker_startup_timeout', 'health_check_interval',
                 'health_failure_threshold', 'health_success_threshold', 'circuit_breaker_timeout'):
        _validate.int_range(p[name], name, 1, 86400)
    if p['cache_threshold'] is not None:
        _validate.number_range(p['cache_threshold'], 'cache_threshold', low=0, high=1, why='a ratio')
    if p['balance_abs_threshold'] is not None:
        _validate.int_range(p['balance_abs_threshold'], 'balance_abs_threshold', 0, None)
    if p['balance_rel_threshold'] is not None:
        _validate.number_range(p['balance_rel_threshold'], 'balance_rel_threshold', low=1, why='a ratio of loads')
    managed = _router.managed_flag_in(p['extra_args'])
    if managed:
        # The flag, never its value: a key given there is not echoed (_run masks it in the task's input too).
        raise KvpoolError('extra_args: %s sets %s, which this module writes itself (or, for --api-key, which would '
                          'show a key in the process list); use the module option instead'
                          % (str(managed[0]).split('=', 1)[0], managed[1]))
    urls = []
    for i, url in enumerate(p['worker_urls']):
        urls.append(_validate.http_url(url, 'worker_urls[%d]' % i))
    if p['state'] != 'stopped' and not urls:
        raise KvpoolError('worker_urls is empty: give the base URL of every vLLM instance (http://HOST:PORT)')
    check_service_params(p)
    return sorted(set(urls)), _validate.environment(p['env'], 'env')


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type='str', choices=['started', 'stopped', 'restarted'], default='started'),
            name=dict(type='str', default='router'),
            binary=dict(type='path', default='/opt/ascend-kvpool/vllm-router/bin/vllm-router'),
            host=dict(type='str', default='127.0.0.1'),
            port=dict(type='int', default=ROUTER_PORT),
            prometheus_host=dict(type='str', default='127.0.0.1'),
            prometheus_port=dict(type='int', default=ROUTER_PROMETHEUS_PORT),
            policy=dict(type='str', choices=list(_router.POLICIES), default='round_robin'),
            worker_urls=dict(type='list', elements='str', default=[]),
            worker_startup_check_interval=dict(type='int', default=1),
            worker_startup_timeout=dict(type='int', default=10),
            health_check_interval=dict(type='int', default=2),
            health_failure_threshold=dict(type='int', default=2),
            health_success_threshold=dict(type='int', default=1),
            circuit_breaker_timeout=dict(type='int', default=5),
            cache_threshold=dict(type='float'),
            balance_abs_threshold=dict(type='int'),
            balance_rel_threshold=dict(type='float'),
            extra_args=dict(type='list', elements='str', default=[]),
            env=dict(type='dict', default={}),
            ready_timeout=dict(type='float', default=60),
            poll_interval=dict(type='float', default=0.2),
            stop_timeout=dict(type='float', default=10),
            **unit_argument_spec()
        ),
        supports_check_mode=True,
    )
    failed, result = _errors.outcome(module, _run, module)
    if failed:
        module.fail_json(**result)
    module.exit_json(**result)


def _run(module):
    p = module.params
    # Secret-named variables of env (HF_TOKEN, *_API_KEY) and the values of secret-named flags of extra_args
    # (--hf-token T): masked wherever the result or a message echoes them (argv, the task's input).
    module.no_log_values.update(_secrets.env_secret_values(module.params['env'])
                                + _secrets.secret_values(module.params.get('extra_args')))
    try:
        urls, env = check_params(p)
    except KvpoolError:
        # Mask secret values of extra_args wherever fail_json would echo them (the task's invocation holds them).
        module.no_log_values.update(_secrets.secret_values(p['extra_args'])
                                    + _secrets.flag_values(p['extra_args'], '--api-key'))
        raise
    host = probe_host(p['host'])
    base = 'http://%s' % format_host_port(host, p['port'])
    metrics = 'http://%s/metrics' % format_host_port(probe_host(p['prometheus_host']), p['prometheus_port'])
    result = dict(changed=False, endpoint=base, workers=urls, ready_seconds=None, argv=[], metrics_url=metrics)
    argv = []
    if p['state'] != 'stopped':
        argv = _router.build_router_argv(p['binary'], dict(p, worker_urls=urls))
        if not module.check_mode and not _is_executable(p['binary']):
            raise ServiceError('vllm-router not found at %s (binary). Install it (role ascend.kvpool.kvpool_router '
                               'does: pip install vllm-router into its own virtualenv) or set binary to its path.'
                               % p['binary'], result=result)
    result['argv'] = argv
    spec = spec_for(p, result, 'kvpool-' + p['name'], 'vllm-router %s in front of the vLLM instances (ascend.kvpool)'
                    % p['name'], argv or ['/bin/true'], env=env, owner='ascend.kvpool.vllm_router', devices=[],
                    port=p['port'])
    seen = {'problem': '', 'deadline': time.monotonic() + p['ready_timeout']}

    def request_timeout(cap=1.0):
        # Each request is bounded as a whole (_proc.http_request) and never runs much past the gate's deadline: a
        # router or worker that answers one byte at a time cannot hold the task past ready_timeout.
        return max(0.2, min(cap, seen['deadline'] - time.monotonic()))

    def router_health():
        status, _body = http_status(base + '/health', timeout=request_timeout())
        return status == 200

    def workers_listed():
        status, body = http_status(base + '/workers', timeout=request_timeout())
        if status != 200:
            seen['problem'] = 'GET /workers answered %s' % (status or 'nothing')
            return False
        try:
            workers = _router.parse_workers(body)
        except ValueError as exc:
            seen['problem'] = 'GET /workers: %s' % exc
            return False
        result['workers_seen'] = workers
        seen['problem'] = _router.workers_problem(urls, workers)
        return not seen['problem']

    def workers_answer():
        dead = [u for u in urls if http_status(u + '/health', timeout=request_timeout())[0] != 200]
        if dead:
            seen['problem'] = 'no 200 from GET /health of %s (from the router host)' % ', '.join(dead)
        return not dead

    def gate():
        seen['deadline'] = time.monotonic() + p['ready_timeout']
        return [('GET %s/health -> 200' % base, router_health),
                ('GET %s/workers lists every worker healthy' % base, workers_listed),
                ('every worker answers GET /health', workers_answer)]

    def explain(log):
        parts = [x for x in (seen['problem'], _router.log_error(log)) if x]
        return '; '.join(parts)

    return lifecycle_for(module, backend_for(module, None), 'vllm-router').ensure(
        spec, p['state'], result, gate, explain=explain, port_taken=lambda: tcp_open(host, p['port'], timeout=0.5))


def _is_executable(path):
    return os.path.isfile(path) and os.access(path, os.X_OK)


if __name__ == '__main__':
    main()
