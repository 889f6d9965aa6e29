#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: mooncake_master
short_description: Run the Mooncake master of a KV cache pool as a detached, health-checked process
version_added: 0.1.0
description:
  - Starts, stops or restarts C(mooncake_master), the metadata service of a Mooncake KV cache pool, either on the
    host or inside a running container (the vLLM-Ascend guide runs it in the C(vllm-ascend) container).
  - The master runs detached in its own session with a pid file and a log file under O(state_dir). A settings
    file there records the effective command line and its fingerprint.
  - Idempotent. A master that runs with the same effective command line and answers its health check is left
    alone (C(ok)). Different settings restart it (C(changed), with a diff of the flags). A dead or unhealthy
    master is started again.
  - Readiness is the RPC port accepting TCP and C(GET /health) on the metrics port answering 200, polled every
    O(poll_interval) seconds for at most O(ready_timeout) seconds. The master logs C(Master service started)
    before it binds the RPC port, so the log line is not used.
  - A start that fails (the process exits, or is not ready in time) fails the task with the tail of the master's
    log in the message.
  - The flags are written C(--name=value) in the spelling of O(mooncake_version). Unset, or before 0.3.12, gives
    the names every Mooncake 0.3.x release knows (C(--port), C(--max_threads), HA with C(--etcd_endpoints)).
    From 0.3.12 it gives the preferred names (C(--rpc_port), C(--rpc_thread_num), HA with
    C(--ha_backend_type=etcd) and C(--ha_backend_connstring)).
author:
  - ascend.kvpool contributors (@ascend-kvpool)
attributes:
  check_mode:
    support: full
    description: Reports whether the master would be started, restarted or stopped (with the diff), and changes
      nothing.
  diff_mode:
    support: full
    description: The effective command line before and after, one flag per line.
  idempotent:
    support: full
    description: O(state=restarted) always restarts; the other states change nothing when nothing differs.
options:
  state:
    description:
      - C(started) makes sure the master runs with these settings and is healthy.
      - C(stopped) stops the master started by this module (SIGTERM, then SIGKILL after O(stop_timeout)).
      - C(restarted) always restarts it.
    type: str
    choices: [started, stopped, restarted]
    default: started
  port:
    description: RPC port of the master (C(--port); the guide uses 50088; Mooncake's own default is 50051).
    type: int
    default: 50088
    aliases: [rpc_port]
  mooncake_version:
    description:
      - Mooncake version of the master binary (C(0.3.9), C(0.3.13.post1), ...); picks the flag spellings.
      - Empty writes the legacy spellings, which every 0.3.x release accepts (the guide's v0.3.9 knows only those).
      - Defaults that changed in 0.3.12 (C(--eviction_high_watermark_ratio) 0.95 -> 0.90,
        C(--default_kv_lease_ttl) 5000 -> 10000 ms) do not matter for the flags this module always writes
        (O(eviction_high_watermark_ratio) has its own default); unset O(default_kv_lease_ttl) takes the binary's.
    type: str
    default: ''
  rpc_address:
    description:
      - Address the RPC server binds to (C(--rpc_address)); required by Mooncake in HA mode.
      - Unset keeps Mooncake's default C(0.0.0.0).
    type: str
  metrics_port:
    description: Port of the HTTP metrics and health server (C(--metrics_port)).
    type: int
    default: 9003
  metrics_address:
    description:
      - Address the HTTP metrics and health server binds to (C(--metrics_host)).
      - Unset keeps Mooncake's default C(0.0.0.0). The PyPI 0.3.13 build has the flag; a release without it (older
        builds may lack it) exits at start with C(unknown command line flag 'metrics_host'), and the failed task
        says to leave this unset.
    type: str
  eviction_high_watermark_ratio:
    description: Pool usage ratio that triggers eviction (C(--eviction_high_watermark_ratio); guide 0.95).
    type: float
    default: 0.95
  eviction_ratio:
    description: Ratio of objects evicted when the watermark is reached (C(--eviction_ratio); guide 0.05).
    type: float
    default: 0.05
  max_threads:
    description: RPC worker threads (C(--max_threads)); raise it for many clients. Unset keeps Mooncake's default.
    type: int
  client_ttl:
    description:
      - Seconds a client stays alive without a heartbeat (C(--client_ttl); Mooncake default 10, recent docs 120).
      - Too short shows as C(SEGMENT_NOT_FOUND) after idle periods.
    type: int
  default_kv_lease_ttl:
    description:
      - Lease of a KV object in milliseconds (C(--default_kv_lease_ttl)).
      - Keep it above C(ASCEND_TRANSFER_TIMEOUT), or reads fail with C(LEASE_EXPIRED) (-707) under load.
    type: int
  enable_ha:
    description: Run the master in HA mode with etcd (C(--enable_ha)); needs O(etcd_endpoints) and O(rpc_address).
    type: bool
    default: false
  etcd_endpoints:
    description: etcd endpoints (C(host:port)) for HA mode, joined with C(;) into C(--etcd_endpoints).
    type: list
    elements: str
    default: []
  enable_http_metadata_server:
    description: Also serve transfer-engine metadata over HTTP (C(--enable_http_metadata_server)).
    type: bool
    default: false
  extra_args:
    description: More C(mooncake_master) arguments, appended as given (one argument per item).
    type: list
    elements: str
    default: []
  env:
    description:
      - Extra environment of the master process (for example C(LD_LIBRARY_PATH) for a source build).
      - Part of the effective settings, so a change restarts the master.
    type: dict
    default: {}
  binary:
    description:
      - The C(mooncake_master) executable. A bare name is searched on C(PATH) of the host or container, then in
        C(/usr/local/bin), C(/usr/local/python3*/bin) and C(/opt/*/bin).
    type: str
    default: mooncake_master
  container:
    description:
      - Name of a running docker container to run the master in (C(docker exec)). Unset runs it on the host.
      - The readiness polls run from the host, so the container must share the host network (C(--net=host),
        as in the guide).
    type: str
  state_dir:
    description: Directory (on the host, or in the container) for the pid, log and settings files.
    type: path
    default: /var/lib/ascend-kvpool/mooncake_master
  ready_timeout:
    description: Seconds to wait for the master to become ready (and for a running one to answer its health check).
    type: float
    default: 60
  poll_interval:
    description: Seconds between readiness polls.
    type: float
    default: 0.1
  stop_timeout:
    description: Seconds to wait after SIGTERM before SIGKILL.
    type: float
    default: 10
  health_host:
    description:
      - Address the readiness polls connect to. Unset polls the RPC port at O(rpc_address) and the health endpoint
        at O(metrics_address) (else O(rpc_address)), or C(127.0.0.1) where the master binds all addresses.
    type: str
  health_path:
    description: Path of the health endpoint on the metrics port.
    type: str
    default: /health
  log_lines:
    description: Lines of the master's log put into the message of a failed start.
    type: int
    default: 40
notes:
  - Only a master started by this module (its pid file) is managed. A port already taken by another process makes
    the start fail with a message saying so.
  - In HA mode a standby master does not serve RPC until it is elected, so readiness only needs the health
    endpoint to answer (200 or 503).
seealso:
  - module: ascend.kvpool.mooncake_store_probe
  - name: Mooncake store deployment and operations guide
    description: The master's flags and HTTP endpoints.
    link: https://kvcache-ai.github.io/Mooncake/
"""

EXAMPLES = r"""
- name: Start the master as in the vLLM-Ascend guide, inside the vllm-ascend container
  ascend.kvpool.mooncake_master:
    port: 50088
    eviction_high_watermark_ratio: 0.95
    eviction_ratio: 0.05
    container: vllm-ascend

- name: Start it on the host, tuned for many clients
  ascend.kvpool.mooncake_master:
    max_threads: 32
    client_ttl: 120
    default_kv_lease_ttl: 30000
  register: master

- name: Show where it listens
  ansible.builtin.debug:
    msg: "master {{ master.endpoints.rpc }} (pid {{ master.pid }}), ready in {{ master.ready_seconds }} s"

- name: Listen on the node's own address only (RPC and metrics), not on every interface
  ascend.kvpool.mooncake_master:
    rpc_address: "{{ ansible_host }}"
    metrics_address: "{{ ansible_host }}"

- name: HA masters behind etcd
  ascend.kvpool.mooncake_master:
    enable_ha: true
    rpc_address: "{{ ansible_host }}"
    etcd_endpoints: [10.0.0.1:2379, 10.0.0.2:2379, 10.0.0.3:2379]

- name: Stop it
  ascend.kvpool.mooncake_master:
    state: stopped
"""

RETURN = r"""
state:
  description: State of the master after the task (C(running) or C(stopped)).
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
  description: Pid of the master (in the container's pid namespace when O(container) is set); null when stopped.
  returned: always
  type: int
  sample: 4682
argv:
  description: The effective command line.
  returned: always
  type: list
  elements: str
  sample: [/usr/local/bin/mooncake_master, --port=50088, --metrics_port=9003,
           --eviction_high_watermark_ratio=0.95, --eviction_ratio=0.05]
fingerprint:
  description: sha256 of the effective command line and environment; a change restarts the master.
  returned: always
  type: str
endpoints:
  description: Where the master answers, as seen from its host.
  returned: always
  type: dict
  contains:
    rpc:
      description: C(host:port) of the RPC service.
      type: str
      sample: 127.0.0.1:50088
    metrics:
      description: URL of the Prometheus metrics.
      type: str
      sample: http://127.0.0.1:9003/metrics
    health:
      description: URL of the health endpoint.
      type: str
      sample: http://127.0.0.1:9003/health
log_path:
  description: The master's log file (the previous run's log is kept as C(<log_path>.1)).
  returned: always
  type: str
  sample: /var/lib/ascend-kvpool/mooncake_master/mooncake_master.log
pid_path:
  description: The pid file.
  returned: always
  type: str
ready_seconds:
  description: Seconds the master took to become ready after its start (or to answer the health check); null
    when nothing was polled.
  returned: always
  type: float
  sample: 0.21
health:
  description: Body of the last health answer.
  returned: when polled
  type: str
  sample: '{"status":"ok","role":"leader","ha_state":"serving","service_ready":true}'
"""

import json
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.ascend.kvpool.plugins.module_utils import _mooncake
from ansible_collections.ascend.kvpool.plugins.module_utils._proc import (
    ProcError,
    ProcessTarget,
    http_status,
    tcp_open,
    wait_until,
)

BINARY_DIRS = ['/usr/local/bin', '/usr/local/python3*/bin', '/opt/*/bin']
PID_NAME = 'mooncake_master.pid'
LOG_NAME = 'mooncake_master.log'
SETTINGS_NAME = 'settings.json'


def effective(module, target):
    """(argv, env, fingerprint) wanted by the task."""
    p = module.params
    binary = target.which(p['binary'], BINARY_DIRS)
    if not binary:
        module.fail_json(msg='%s not found in %s (looked on PATH and in %s). Install Mooncake (role '
                             'ascend.kvpool.mooncake_install) or set binary to its path.'
                             % (p['binary'], target.describe(), ', '.join(BINARY_DIRS)))
    settings = _mooncake.master_settings(p)
    argv = _mooncake.build_master_argv(binary, settings, p['extra_args'], p['mooncake_version'])
    env = dict((str(k), str(v)) for k, v in (p['env'] or {}).items())
    fp = _mooncake.fingerprint(argv + ['%s=%s' % kv for kv in sorted(env.items())])
    return argv, env, fp


def read_settings(target, path):
    raw = target.read_file(path)
    if not raw:
        return None
    try:
        data = json.loads(raw.decode('utf-8', 'replace') if isinstance(raw, bytes) else raw)
    except ValueError:
        return None
    return data if isinstance(data, dict) and data.get('argv') else None


def diff_text(argv, env):
    text = _mooncake.settings_text(argv)
    if argv and env:
        text += ''.join('  env %s=%s\n' % kv for kv in sorted(env.items()))
    return text


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type='str', choices=['started', 'stopped', 'restarted'], default='started'),
            port=dict(type='int', default=50088, aliases=['rpc_port']),
            mooncake_version=dict(type='str', default=''),
            rpc_address=dict(type='str'),
            metrics_port=dict(type='int', default=9003),
            metrics_address=dict(type='str'),
            eviction_high_watermark_ratio=dict(type='float', default=0.95),
            eviction_ratio=dict(type='float', default=0.05),
            max_threads=dict(type='int'),
            client_ttl=dict(type='int'),
            default_kv_lease_ttl=dict(type='int'),
            enable_ha=dict(type='bool', default=False),
            etcd_endpoints=dict(type='list', elements='str', default=[]),
            enable_http_metadata_server=dict(type='bool', default=False),
            extra_args=dict(type='list', elements='str', default=[]),
            env=dict(type='dict', default={}),
            binary=dict(type='str', default='mooncake_master'),
            container=dict(type='str'),
            state_dir=dict(type='path', default='/var/lib/ascend-kvpool/mooncake_master'),
            ready_timeout=dict(type='float', default=60),
            poll_interval=dict(type='float', default=0.1),
            stop_timeout=dict(type='float', default=10),
            health_host=dict(type='str'),
            health_path=dict(type='str', default='/health'),
            log_lines=dict(type='int', default=40),
        ),
        required_if=[('enable_ha', True, ('etcd_endpoints', 'rpc_address'))],
        supports_check_mode=True,
    )
    p = module.params
    for name in ('port', 'metrics_port'):
        if not 1 <= p[name] <= 65535:
            module.fail_json(msg='%s must be a TCP port 1-65535, got %d' % (name, p[name]))
    if p['port'] == p['metrics_port']:
        module.fail_json(msg='port and metrics_port are both %d; give them different ports' % p['port'])
    for name in ('eviction_high_watermark_ratio', 'eviction_ratio'):
        if not 0.0 <= p[name] <= 1.0:
            module.fail_json(msg='%s must be between 0 and 1, got %s' % (name, p[name]))
    for name in ('max_threads', 'client_ttl', 'default_kv_lease_ttl'):
        if p[name] is not None and p[name] < 1:
            module.fail_json(msg='%s must be at least 1 when set, got %d' % (name, p[name]))
    try:
        _mooncake.parse_mooncake_version(p['mooncake_version'])
    except ValueError as exc:
        module.fail_json(msg='mooncake_version: %s' % exc)
    if p['enable_ha'] and not _mooncake.split_endpoints(p['etcd_endpoints']):
        module.fail_json(msg='enable_ha needs at least one etcd endpoint in etcd_endpoints')
    if p['poll_interval'] <= 0 or p['ready_timeout'] <= 0:
        module.fail_json(msg='poll_interval and ready_timeout must be positive')

    target = ProcessTarget(module, p['container'], docker=module.get_bin_path('docker') or 'docker')
    try:
        target.check_container()
    except ProcError as exc:
        module.fail_json(msg=str(exc))

    state_dir = p['state_dir'].rstrip('/') or '/'
    pid_path = '%s/%s' % (state_dir, PID_NAME)
    log_path = '%s/%s' % (state_dir, LOG_NAME)
    settings_path = '%s/%s' % (state_dir, SETTINGS_NAME)
    # Each server is polled where it listens: its bind address, or loopback when it binds all addresses.
    host = p['health_host'] or _mooncake.probe_host(p['rpc_address'])
    metrics_host = p['health_host'] or _mooncake.probe_host(p['metrics_address'] or p['rpc_address'])
    endpoints = {
        'rpc': _mooncake.format_host_port(host, p['port']),
        'metrics': 'http://%s/metrics' % _mooncake.format_host_port(metrics_host, p['metrics_port']),
        'health': 'http://%s%s' % (_mooncake.format_host_port(metrics_host, p['metrics_port']),
                                   p['health_path'] if p['health_path'].startswith('/') else '/' + p['health_path']),
    }
    result = dict(changed=False, endpoints=endpoints, log_path=log_path, pid_path=pid_path, ready_seconds=None)

    recorded = read_settings(target, settings_path)
    recorded_argv = recorded['argv'] if recorded else None
    running = target.running_pid(pid_path, recorded_argv) if recorded_argv else None
    before_text = diff_text(recorded_argv, recorded.get('env') or {}) if running else diff_text(None, None)

    last_health = {'body': None}

    def healthy_checks():
        checks = []
        if not p['enable_ha']:
            checks.append(('rpc port %s' % endpoints['rpc'], lambda: tcp_open(host, p['port'], timeout=0.5)))

        def health():
            status, body = http_status(endpoints['health'], timeout=1.0)
            last_health['body'] = body
            return status == 200 or (p['enable_ha'] and status == 503)
        checks.append(('GET %s -> 200' % endpoints['health'], health))
        return checks

    # --- stopped ---------------------------------------------------------------------------------------------
    if p['state'] == 'stopped':
        result.update(state='stopped', pid=None, argv=recorded_argv or [],
                      fingerprint=(recorded or {}).get('fingerprint') or '', action='none',
                      reason='not running')
        if running:
            result.update(changed=True, action='stopped', reason='running (pid %s)' % running)
            result['diff'] = dict(before=before_text, after=diff_text(None, None))
            if not module.check_mode:
                try:
                    target.stop(running, timeout=p['stop_timeout'], interval=p['poll_interval'], pid_file=pid_path)
                except ProcError as exc:
                    module.fail_json(msg='could not stop mooncake_master: %s' % exc, **result)
        module.exit_json(**result)

    # --- started / restarted -----------------------------------------------------------------------------------
    argv, env, fp = effective(module, target)
    result.update(argv=argv, fingerprint=fp, pid=running, state='running' if running else 'stopped',
                  action='none', reason='running with the same settings')

    action, reason = 'none', 'running with the same settings'
    if p['state'] == 'restarted':
        action, reason = ('restarted', 'state=restarted') if running else ('started', 'not running')
    elif not running:
        action, reason = 'started', ('not running (pid file %s)' % pid_path if recorded else 'never started here')
    elif recorded.get('fingerprint') != fp:
        action, reason = 'restarted', 'settings changed'
    else:
        res = wait_until(healthy_checks(), p['ready_timeout'], p['poll_interval'],
                         alive=lambda: target.pid_alive(running, recorded_argv))
        result['ready_seconds'] = res['elapsed']
        result['health'] = last_health['body']
        if not res['ready']:
            action, reason = 'restarted', 'running but not healthy (%s)' % ', '.join(res['pending'])

    if action == 'none':
        module.exit_json(**result)

    result.update(changed=True, action=action, reason=reason)
    result['diff'] = dict(before=before_text, after=diff_text(argv, env))
    if module.check_mode:
        module.exit_json(**result)

    # From here `changed` tells what really happened: a master stopped, or a new one running.
    result['changed'] = False
    try:
        if running:
            target.stop(running, timeout=p['stop_timeout'], interval=p['poll_interval'], pid_file=pid_path)
            result.update(pid=None, state='stopped', changed=True)
        if not p['enable_ha'] and tcp_open(host, p['port'], timeout=0.5):
            module.fail_json(msg='port %d on %s already accepts connections, but no mooncake_master started by this '
                                 'module runs (pid file %s). Stop the other process (a master started by hand?) or '
                                 'choose another port.' % (p['port'], host, pid_path), **result)
        target.makedirs(state_dir)
        started_at = time.time()
        pid = target.start(argv, pid_path, log_path, env=env)
    except ProcError as exc:
        module.fail_json(msg='could not start mooncake_master: %s' % exc, **result)
    result.update(pid=pid, state='running', changed=True)
    # Recorded at once, so a run interrupted during the wait still finds (and manages) this process.
    try:
        target.write_file(settings_path, json.dumps({
            'argv': argv, 'env': env, 'fingerprint': fp, 'pid': pid, 'started_at': started_at,
        }, indent=2, sort_keys=True) + '\n')
    except (ProcError, IOError, OSError) as exc:
        target.stop(pid, timeout=p['stop_timeout'], interval=p['poll_interval'], pid_file=pid_path)
        module.fail_json(msg='mooncake_master was stopped again: %s could not be written: %s'
                             % (settings_path, exc), **result)

    def alive():
        return target.pid_alive(pid)

    res = wait_until(healthy_checks(), p['ready_timeout'], p['poll_interval'], alive=alive)
    result['ready_seconds'] = res['elapsed']
    result['health'] = last_health['body']
    if not res['ready']:
        log = target.read_file(log_path)
        tail = _mooncake.tail_lines(log, p['log_lines'])
        errors = _mooncake.log_errors(log)
        if res['died'] or not alive():
            why = 'exited right after the start'
        else:
            why = 'was not ready after %.1f s (waiting for: %s)' % (p['ready_timeout'], ', '.join(res['pending']))
        try:
            target.stop(pid, timeout=p['stop_timeout'], interval=p['poll_interval'], pid_file=pid_path)
            result.update(state='stopped', pid=None, changed=bool(running))
        except ProcError:
            pass
        hint = _mooncake.unknown_flag_hint(log)
        module.fail_json(msg='mooncake_master %s%s%s. Last lines of %s:\n%s'
                             % (why, (' (error: %s)' % errors[-1]) if errors else '', ('. ' + hint) if hint else '',
                                log_path, tail),
                         log_tail=tail, **result)

    module.exit_json(**result)


if __name__ == '__main__':
    main()
