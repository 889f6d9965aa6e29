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
short_description: Run the Mooncake master of a KV cache pool as a health-checked systemd unit (or container)
version_added: 1.0.0
description:
  - Starts, stops or restarts C(mooncake_master), the metadata service of a Mooncake KV cache pool, as the systemd
    unit C(kvpool-mooncake-master.service) on the host, or as the container C(kvpool-mooncake-master) made from
    the node's vllm-ascend container (O(container)).
  - In a container, the container (its image, mounts, devices, restart policy) is made and kept by
    M(community.docker.docker_container), which the module's action plugin runs with the definition this module
    renders; docker's restart policy keeps the master running there.
  - systemd keeps it running. A master that dies (killed, OOM) is restarted by systemd within a second, with a
    bounded restart rate (O(restart_limit_burst)); after a reboot the enabled unit starts it again.
  - Idempotent. A master whose unit file is the wanted one and that answers its health check is left alone
    (C(ok)). Different settings rewrite the unit and restart it (C(changed), with a diff of the unit file, one flag
    per line). A failed unit is started again; a running but unhealthy master is restarted.
  - Readiness is the RPC port accepting TCP and C(GET /health) on the metrics port answering 200, polled every
    O(poll_interval) seconds for at most O(ready_timeout) seconds. The master logs C(Master service started)
    before it binds the RPC port, so the log line is not used.
  - A start that fails (the process exits and systemd gives up restarting it, or it is not ready in time) fails
    the task with the unit's name and the tail of its journal (C(journalctl -u kvpool-mooncake-master -n
    <log_lines>)) in the message.
  - The flags are written C(--name=value) in the spelling of O(mooncake_version), checked against the real
    C(mooncake_master) of PyPI's 0.3.9, 0.3.11.post1, 0.3.12.post1 and 0.3.13.post1. Before 0.3.12 (and unset)
    C(--port), HA with C(--etcd_endpoints); from 0.3.12 C(--rpc_port), HA with C(--ha_backend_type=etcd) and
    C(--ha_backend_connstring). The thread count is C(--rpc_thread_num) on every release (C(--max_threads) is
    capped at the host's CPU count). O(metrics_address) (C(--metrics_host)) is written from 0.3.13 only; a declared
    older release leaves it out with a warning.
  - Up to 0.3.12.post1 the wheel's C(mooncake_master) is a Python wrapper that runs the real master as its child.
    RV(pid) is then the real master's, RV(wrapper_pid) the wrapper's (the unit's main process).
author:
  - ascend.kvpool contributors (@ascend-kvpool)
extends_documentation_fragment:
  - ascend.kvpool.service
  - ascend.kvpool.service.unit
options:
  state:
    description:
      - C(started) makes sure the master runs with these settings and is healthy.
      - C(stopped) stops the master's unit (SIGTERM to its whole cgroup, SIGKILL after O(stop_timeout)), disables it
        and removes its unit file.
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
      - Empty writes the spellings every 0.3.x release from 0.3.9 accepts (C(--port), C(--rpc_thread_num),
        C(--etcd_endpoints)), and O(metrics_address) as given.
      - Defaults that changed in 0.3.12 (C(--eviction_high_watermark_ratio) 0.95 -> 0.90,
        C(--default_kv_lease_ttl) 5000 -> 10000 ms) do not matter for the flags this module always writes
        (O(eviction_high_watermark_ratio) has its own default); unset O(default_kv_lease_ttl) takes the binary's.
    type: str
    default: ''
  rpc_address:
    description:
      - Address the RPC server binds to (C(--rpc_address)); required by Mooncake in HA mode.
      - Unset keeps Mooncake's default C(0.0.0.0). One address, no port (the port is O(port)).
    type: str
  metrics_port:
    description: Port of the HTTP metrics and health server (C(--metrics_port)).
    type: int
    default: 9003
  metrics_address:
    description:
      - Address the HTTP metrics and health server binds to (C(--metrics_host)).
      - Unset keeps Mooncake's default C(0.0.0.0). Mooncake has the flag from 0.3.13. With an older
        O(mooncake_version) declared it is left out, and the task warns that the server listens on every address.
        An undeclared version that lacks it exits at start with C(unknown command line flag 'metrics_host'), and the
        failed task says to declare the version.
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
    description:
      - RPC worker threads (C(--rpc_thread_num) on every release); raise it for many clients. Unset keeps Mooncake's
        default (the host's CPU count, capped at the release's own default, 4 up to 0.3.11.post1 and 16 from
        0.3.12.post1).
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
  cluster_id:
    description:
      - In HA mode, the pool's id in etcd (C(--cluster_id)), for the masters' leader key
        C(mooncake-store/<id>/master_view) and their OpLog under C(/oplog/<id>/). Every store client of the pool
        needs the same id in its environment (C(MC_STORE_CLUSTER_ID)); the roles give both the pool's id
        (C(kvpool_cluster_id)).
      - Unset or empty leaves Mooncake's default, C(mooncake_cluster). Every release from 0.3.9 has the flag.
      - The master also gets it as C(MC_STORE_CLUSTER_ID) in its environment, as the master of Mooncake 0.3.9 builds its
        leader key from that variable only (default C(mooncake)), 0.3.11 and later from C(--cluster_id).
    type: str
  enable_oplog:
    description:
      - In HA mode, replicate the master's metadata through etcd (C(--enable_oplog), Mooncake 0.3.13 and later), so a
        standby replays the log, so the objects of the pool are still found after a failover (docs/ha.md has the
        figures). Left out where the declared O(mooncake_version) has no such flag (RV(oplog) false); a failover then
        empties the pool's metadata.
      - Before the master starts, the log's namespace in etcd is read (RV(oplog_namespace)). One of the older
        per-entry format, which the master refuses (it aborts), fails the task naming the key, the etcd endpoint and
        the fix, unless O(oplog_reset_legacy). The leader key naming a master that is not this one nor one of
        O(ha_peers) (another pool with the same O(cluster_id), or a master left out of the group) fails it too.
    type: bool
    default: false
  oplog_reset_legacy:
    description:
      - Delete an OpLog namespace of the older format (C(/oplog/<cluster_id>/)) before the master starts, as upstream's
        "Resetting a Legacy OpLog Namespace" does. Its metadata is lost. Nothing else is ever deleted, and only while
        no master of the cluster leads and the namespace holds no log of the new format (one etcd transaction). Check
        mode reports what would be deleted.
    type: bool
    default: false
  ha_name:
    description: This master's name in the HA messages and in RV(ha) (the role gives its inventory name).
    type: str
    default: this host
  ha_peers:
    description:
      - In HA mode, the other masters of the group, for the gate's election check (exactly one leader serving RPC, the
        others standby naming it). The role C(ascend.kvpool.mooncake_master) fills it from the master group.
    type: list
    elements: dict
    default: []
    suboptions:
      name:
        description: The peer's name in messages (its inventory name).
        type: str
      rpc:
        description: C(host:port) of its RPC server.
        type: str
        required: true
      health:
        description: URL of its health endpoint.
        type: str
        required: true
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
      - A variable whose name says it holds a secret (C(HF_TOKEN), C(*_API_KEY), C(*PASSWORD*), C(*SECRET*),
        C(*AUTH*), ...) and has a value is written into the unit's mode 0600 C(EnvironmentFile=) (in container mode
        it is filled into the container's environment by the action plugin), never into the world-readable unit file;
        its value is masked in the result, the diff and every message.
      - Part of the effective settings, so a change restarts the master.
      - Names are letters, digits and C(_), not starting with a digit (no C(=), not empty); a null value is the
        empty string.
    type: dict
    default: {}
  binary:
    description:
      - The C(mooncake_master) executable. A bare name is searched on C(PATH) of the host or container, then in
        C(/usr/local/bin), C(/usr/local/python3*/bin) and C(/opt/*/bin).
    type: str
    default: mooncake_master
  ready_timeout:
    description: Seconds to wait for the master to become ready (and for a running one to answer its health check).
    type: float
    default: 60
  poll_interval:
    description: Seconds between readiness polls.
    type: float
    default: 0.1
  stop_timeout:
    description: Seconds after SIGTERM before SIGKILL (C(TimeoutStopSec=)).
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
notes:
  - Only the master's own unit is managed. A port already taken by another process (a master started by hand)
    makes the start fail with a message saying so; that process is never signalled.
  - 'In HA mode a standby master does not serve RPC until it is elected. Readiness is then: the health endpoint
    answers, exactly one master of this one and O(ha_peers) accepts RPC connections (the leader), every other one
    refuses them (no RPC port bound) or shows its HA state on its health endpoint (one that answers neither, a
    timeout or an unreachable host, is a problem naming it: its state is unknown), and every master
    whose health endpoint answers (0.3.12 and later; a 0.3.9 standby answers nothing) is C(serving) or C(standby)
    and names that one as its leader. A leader is elected about 5 s after the first master starts: Mooncake holds
    the leader key with a 5 s etcd lease and serves only after one lease of warm-up.'
seealso:
  - module: ascend.kvpool.mooncake_store_probe
  - name: Mooncake store deployment and operations guide
    description: The master's flags and HTTP endpoints.
    link: https://kvcache-ai.github.io/Mooncake/
"""

EXAMPLES = r"""
- name: Start the master as in the vLLM-Ascend guide, in a container made from the vllm-ascend container
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
    msg: "master {{ master.endpoints.rpc }} ({{ master.unit }}), ready in {{ master.ready_seconds }} s"

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
  description:
    - Pid of the real master process on the host; null when stopped.
    - The unit's main pid (in a service container, the process under the container's init), or, when that is a
      Python wrapper of the wheel (Mooncake up to 0.3.12.post1), its child that runs the real C(mooncake_master)
      binary.
  returned: always
  type: int
  sample: 4682
wrapper_pid:
  description: Pid of the wrapper that runs the real master as its child (the unit's main pid, or the child of the
    container's init); null when the main process is the master itself (Mooncake 0.3.13 and later, or a source
    build) or when stopped.
  returned: success
  type: int
  sample: null
unit:
  description: The systemd unit (or the container) of the master.
  returned: always
  type: str
  sample: kvpool-mooncake-master.service
logs:
  description: How to read the master's log.
  returned: always
  type: str
  sample: journalctl -u kvpool-mooncake-master
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
  sample: [/usr/local/bin/mooncake_master, --port=50088, --metrics_port=9003,
           --eviction_high_watermark_ratio=0.95, --eviction_ratio=0.05]
fingerprint:
  description: sha256 of the unit file (or container definition); a change restarts the master.
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
ready_seconds:
  description: Seconds the master took to become ready after its start (or to answer the health check); null
    when nothing was polled.
  returned: always
  type: float
  sample: 0.21
oplog:
  description: Whether the master runs with C(--enable_oplog) (HA metadata replicated through etcd).
  returned: always
  type: bool
  sample: true
oplog_namespace:
  description:
    - With O(enable_oplog) and a release that has it, the OpLog namespace in etcd as read before the master started.
    - C(format) is C(empty), C(batch) (the log of Mooncake 0.3.13 and later) or C(legacy); C(keys) the number of its
      keys; C(leader) what the leader key names (empty without a leader); C(deleted) the keys deleted by
      O(oplog_reset_legacy) (in check mode, those that would be).
  returned: when the namespace was read
  type: dict
  sample: {"cluster_id": "kvpool-33d2331b2a", "endpoint": "172.31.250.11:2379", "format": "batch", "keys": 22,
           "leader": "172.31.250.11:50088", "deleted": 0}
oplog_restart:
  description:
    - Why a running master was restarted for its OpLog - a standby that had applied the log while etcd holds none of
      it (etcd lost its data, or the namespace was deleted). Such a master never serves (it retries
      C(INCOMPLETE_OPLOG_CATCH_UP) forever, measured with Mooncake 0.3.13.post1); a new process does.
  returned: when it happened
  type: str
ha:
  description: In HA mode, the election as the gate last saw it - C(leader) (RPC address of the master serving),
    C(leader_name), C(standbys) (names of the masters whose RPC port refused the connection or whose health endpoint
    showed their HA state; a master that answered neither, a timeout or an unreachable host, is no standby but a
    problem), C(problem) ('' when the gate passed).
  returned: when polled in HA mode
  type: dict
  sample: {leader: "172.31.250.11:50088", leader_name: node1, standbys: [node2], problem: ""}
health_body:
  description: Body of the last health answer.
  returned: when polled
  type: str
  sample: '{"status":"ok","role":"leader","ha_state":"serving","service_ready":true}'
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.ascend.kvpool.plugins.module_utils import (
    _errors, _etcd, _mooncake, _preflight, _secrets, _shared, _validate,
)
from ansible_collections.ascend.kvpool.plugins.module_utils._errors import KvpoolError
from ansible_collections.ascend.kvpool.plugins.module_utils._proc import (
    http_status,
    parse_cmdline,
    tcp_open,
    try_connect,
    wrapper_child,
)
from ansible_collections.ascend.kvpool.plugins.module_utils._service import (
    ServiceError,
    backend_for,
    check_service_params,
    find_binary,
    lifecycle_for,
    proc_children,
    read_bytes,
    spec_for,
    unit_argument_spec,
)

BINARY_DIRS = list(_preflight.MASTER_BINARY_DIRS)
UNIT = 'kvpool-mooncake-master'
# The init a service container runs under (docker run --init: docker-init, a tini).
CONTAINER_INITS = ('docker-init', 'tini', 'tini-static')


def _read(path):
    return (read_bytes(path) or b'').decode('utf-8', 'replace')


def port_hint(port):
    """Whether connections of this node hold ``port`` (read from ``/proc/net/tcp{,6}`` after a failed start). The
    master exits with status 1 and no message when it cannot bind its RPC port; the guide's 50088 lies in Linux's
    default ephemeral range, so any outgoing connection can take it (and keeps it through TIME-WAIT)."""
    sockets = (_preflight.parse_net_tcp_port(_read('/proc/net/tcp'), port)
               + _preflight.parse_net_tcp_port(_read('/proc/net/tcp6'), port))
    return _preflight.port_held_hint(
        port, sockets, _preflight.parse_port_range(_read(_preflight.PORT_RANGE_PATH)),
        _preflight.parse_reserved_ports(_read(_preflight.RESERVED_PORTS_PATH)))


def explainer(port, seen=None):
    """The ``explain`` of a failed start: what the HA gate saw, the last error line of the log, the hint for an
    unknown flag or an HA build problem, and who holds the RPC port (None: HA masters are not checked for it)."""
    def explain(log):
        errors = _mooncake.log_errors(log)
        hint = _mooncake.unknown_flag_hint(log) or _mooncake.legacy_oplog_hint(log) or _mooncake.ha_hint(log)
        held = port_hint(port) if port else ''
        problem = (seen or {}).get('problem') or ''
        return '; '.join(([problem] if problem else []) + ([errors[-1]] if errors else []) + ([hint] if hint else [])
                         + ([held] if held else []))
    return explain


def ha_peers(p):
    """The other HA masters from ``ha_peers``: ``[{name, rpc, health}]``."""
    out = []
    for i, peer in enumerate(p['ha_peers']):
        rpc = str(peer.get('rpc') or '')
        try:
            if _mooncake.parse_master_address(rpc) is None:
                raise ValueError('not host:port')
        except ValueError as exc:
            raise KvpoolError('ha_peers[%d].rpc=%r: give the master\'s RPC address as host:port (%s)'
                              % (i, rpc, exc)) from exc
        out.append(dict(name=str(peer.get('name') or rpc), rpc=rpc,
                        health=_validate.http_url(str(peer.get('health') or ''), 'ha_peers[%d].health' % i)))
    return out


def _address(text):
    """``host:port`` without brackets, lower case: how two spellings of one master address compare."""
    return str(text or '').strip().replace('[', '').replace(']', '').lower()


def oplog_namespace(module, endpoints, cluster_id, masters, reset_legacy):
    """Read the OpLog namespace of ``cluster_id`` (and its leader key) from the first etcd endpoint that answers;
    with ``reset_legacy``, delete a namespace of the older format. Returns the RV(oplog_namespace) dict; raises
    KvpoolError naming the key, the endpoint and the fix for a namespace the master cannot start on."""
    cid = cluster_id or _etcd.DEFAULT_CLUSTER_ID
    prefix = _etcd.oplog_prefix(cid)
    view_key = _etcd.master_view_key(cid)
    tried = []
    for endpoint in endpoints:
        status, body = http_status('http://%s/v3/kv/range' % endpoint, timeout=2.0,
                                   data=_etcd.prefix_range_request(prefix, limit=100))
        if status != 200:
            tried.append('%s (HTTP %s)' % (endpoint, status or 'no answer'))
            continue
        status2, body2 = http_status('http://%s/v3/kv/range' % endpoint, timeout=2.0,
                                     data=_etcd.range_request(view_key))
        try:
            keys, count = _etcd.parse_range_keys(body)
            leader = _etcd.parse_range_value(body2) if status2 == 200 else None
        except ValueError as exc:
            tried.append('%s (%s)' % (endpoint, exc))
            continue
        if leader is None:
            tried.append('%s (the read of %s: HTTP %s)' % (endpoint, view_key, status2 or 'no answer'))
            continue
        break
    else:
        raise KvpoolError('the OpLog namespace %s could not be read from etcd before the master starts: %s. Fix: start '
                          'the etcd members (role ascend.kvpool.kvpool_etcd, site.yml --tags etcd) and check that '
                          'this node reaches their client port' % (prefix, '; '.join(tried)))
    fmt, legacy = _etcd.oplog_format(cid, keys)
    found = dict(cluster_id=cid, endpoint=endpoint, format=fmt, keys=count, leader=leader, deleted=0)
    ours = [_address(m) for m in masters]
    if leader and _address(leader) not in ours:
        raise KvpoolError('etcd at %s: the leader key %s names the master %s, which is not one of this pool\'s masters '
                          '(%s): another pool uses the cluster id %s on this etcd, or a master left out of the group '
                          'still runs. Fix: give this pool its own id (kvpool_cluster_id, or '
                          'mooncake_master_cluster_id), or stop that master. Nothing was deleted.'
                          % (endpoint, view_key, leader, ', '.join(masters), cid), result=dict(oplog_namespace=found))
    if fmt != 'legacy':
        return found
    what = ('%s holds an OpLog of the older per-entry format (%d key(s), e.g. %s), on which Mooncake 0.3.13\'s master '
            'aborts ("Legacy OpLog ... key exists")' % (prefix, count, legacy[0]))
    if not reset_legacy:
        raise KvpoolError('etcd at %s: %s. Fix: stop every master of the pool and run again with '
                          'mooncake_master_oplog_reset_legacy: true, which deletes %s (that log\'s metadata is lost; '
                          'check mode shows the keys), or turn the OpLog off (mooncake_master_oplog: false). Nothing '
                          'was deleted.' % (endpoint, what, prefix), result=dict(oplog_namespace=found))
    if leader:
        raise KvpoolError('etcd at %s: %s, and the master %s leads cluster %s now, so the log was not deleted (it may '
                          'still be written). Fix: stop every master of the pool first (site.yml --tags '
                          'mooncake_master -e mooncake_master_state=stopped), then run again with '
                          'mooncake_master_oplog_reset_legacy: true.' % (endpoint, what, leader, cid),
                          result=dict(oplog_namespace=found))
    if module.check_mode:
        found['deleted'] = count
        return found
    status, body = http_status('http://%s/v3/kv/txn' % endpoint, timeout=5.0,
                               data=_etcd.legacy_oplog_delete_txn(cid))
    try:
        if status != 200:
            raise ValueError('HTTP %s' % (status or 'no answer'))
        done, deleted = _etcd.parse_txn_deleted(body)
    except ValueError as exc:
        raise KvpoolError('etcd at %s did not delete the legacy OpLog namespace %s (%s). Fix: check the etcd members, '
                          'or delete it by hand with the masters stopped: ETCDCTL_API=3 etcdctl --endpoints=%s del '
                          '--prefix %s' % (endpoint, prefix, exc, endpoint, prefix),
                          result=dict(oplog_namespace=found)) from exc
    found['deleted'] = deleted if done else 0
    return found


def check_params(module):
    """Everything the argument spec cannot say, in one place; returns the environment (null values as empty
    strings). Raises KvpoolError naming the option, the value and the fix (``main()`` fails the task with it)."""
    p = module.params
    for name in ('port', 'metrics_port'):
        _validate.port(p[name], name)
    if p['port'] == p['metrics_port']:
        raise KvpoolError('port and metrics_port are both %d; give them different ports' % p['port'])
    for name in ('eviction_high_watermark_ratio', 'eviction_ratio'):
        _validate.number_range(p[name], name, low=0, high=1, why='a ratio between 0 and 1')
    for name in ('max_threads', 'client_ttl', 'default_kv_lease_ttl'):
        if p[name] is not None:
            _validate.int_range(p[name], name, 1, None, 'omit it for the master\'s default')
    try:
        _mooncake.parse_mooncake_version(p['mooncake_version'])
    except ValueError as exc:
        raise KvpoolError('mooncake_version: %s' % exc) from exc
    if p['enable_ha'] and not _mooncake.split_endpoints(p['etcd_endpoints']):
        raise KvpoolError('enable_ha needs at least one etcd endpoint in etcd_endpoints')
    if p['cluster_id'] and not _shared.NAME_RE.match(p['cluster_id']):
        raise KvpoolError('cluster_id is %r: use letters, digits, ".", "_" and "-" (it is part of etcd keys: '
                          'mooncake-store/<id>/master_view, /oplog/<id>/); role: kvpool_cluster_id' % p['cluster_id'])
    # A port in an address would reach the master's command line (--rpc_address=h:1), which it reads only at its
    # start; the ports are options of their own.
    for name, port_option in (('rpc_address', 'port'), ('metrics_address', 'metrics_port'),
                              ('health_host', 'port and metrics_port')):
        if p['state'] != 'stopped':  # a stop uses no address: a typo there must not keep the master running
            _validate.host_address(p[name], name, port_option)
    check_service_params(p)
    env = _validate.environment(p['env'], 'env')
    return env


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type='str', choices=['started', 'stopped', 'restarted'], default='started'),
            port=dict(type='int', default=_shared.MASTER_PORT, aliases=['rpc_port']),
            mooncake_version=dict(type='str', default=''),
            rpc_address=dict(type='str'),
            metrics_port=dict(type='int', default=_shared.MASTER_METRICS_PORT),
            metrics_address=dict(type='str'),
            eviction_high_watermark_ratio=dict(type='float', default=0.95),
            eviction_ratio=dict(type='float', default=0.05),
            max_threads=dict(type='int'),
            client_ttl=dict(type='int'),
            default_kv_lease_ttl=dict(type='int'),
            enable_ha=dict(type='bool', default=False),
            etcd_endpoints=dict(type='list', elements='str', default=[]),
            cluster_id=dict(type='str'),
            enable_oplog=dict(type='bool', default=False),
            oplog_reset_legacy=dict(type='bool', default=False),
            enable_http_metadata_server=dict(type='bool', default=False),
            ha_name=dict(type='str', default='this host'),
            ha_peers=dict(type='list', elements='dict', default=[], options=dict(
                name=dict(type='str'),
                rpc=dict(type='str', required=True),
                health=dict(type='str', required=True),
            )),
            extra_args=dict(type='list', elements='str', default=[]),
            env=dict(type='dict', default={}),
            binary=dict(type='str', default='mooncake_master'),
            container=dict(type='str'),
            container_step=dict(type='str', choices=['render', 'gate']),
            ready_timeout=dict(type='float', default=60),
            poll_interval=dict(type='float', default=0.1),
            stop_timeout=dict(type='float', default=10),
            health_host=dict(type='str'),
            health_path=dict(type='str', default='/health'),
            **unit_argument_spec()
        ),
        required_if=[('enable_ha', True, ('etcd_endpoints', 'rpc_address'))],
        supports_check_mode=True,
    )
    failed, result = _errors.outcome(module, _run, module)
    if failed:
        module.fail_json(**result)
    module.exit_json(**result)


def _run(module):
    """The module's work: returns its result or raises KvpoolError; main() answers the task with either."""
    p = module.params
    # Secret-named variables of env (HF_TOKEN, *_API_KEY) and the values of secret-named flags of extra_args
    # (--hf-token T): masked wherever the result or a message echoes them (argv, the task's input).
    module.no_log_values.update(_secrets.env_secret_values(module.params['env'])
                                + _secrets.secret_values(module.params.get('extra_args')))
    env = check_params(module)
    if p['enable_ha'] and p['cluster_id']:
        # The same id in the environment: Mooncake 0.3.9's master builds its leader key from MC_STORE_CLUSTER_ID only
        # (default "mooncake"; its --cluster_id does not change the key), 0.3.11 and later from --cluster_id (measured
        # on the PyPI wheels). Both given, every release writes mooncake-store/<id>/master_view.
        if env.get('MC_STORE_CLUSTER_ID', p['cluster_id']) != p['cluster_id']:
            raise KvpoolError('env sets MC_STORE_CLUSTER_ID=%s, but the pool\'s cluster_id is %s: the master would '
                              'write its leader key under the one, the clients look under the other. Remove it from '
                              'env (role: mooncake_master_environment) and set kvpool_cluster_id instead'
                              % (env['MC_STORE_CLUSTER_ID'], p['cluster_id']))
        env['MC_STORE_CLUSTER_ID'] = p['cluster_id']

    # Each server is polled where it listens: its bind address, or loopback when it binds all addresses.
    host = p['health_host'] or _shared.probe_host(p['rpc_address'])
    metrics_host = p['health_host'] or _shared.probe_host(p['metrics_address'] or p['rpc_address'])
    endpoints = {
        'rpc': _shared.format_host_port(host, p['port']),
        'metrics': 'http://%s/metrics' % _shared.format_host_port(metrics_host, p['metrics_port']),
        'health': 'http://%s%s' % (_shared.format_host_port(metrics_host, p['metrics_port']),
                                   p['health_path'] if p['health_path'].startswith('/') else '/' + p['health_path']),
    }
    result = dict(changed=False, endpoints=endpoints, ready_seconds=None, argv=[])

    argv = []
    if p['state'] != 'stopped':
        binary = find_binary(module, p['binary'], BINARY_DIRS, p['container'])
        if not binary:
            raise ServiceError('%s not found on the host (looked on PATH and in %s). Install Mooncake (role '
                               'ascend.kvpool.mooncake_install) or set binary to its path.'
                               % (p['binary'], ', '.join(BINARY_DIRS)), result=result)
        settings = _mooncake.master_settings(p)
        for _setting, warning in _mooncake.unsupported_settings(settings, p['mooncake_version']):
            module.warn(warning)
        argv = _mooncake.build_master_argv(binary, settings, p['extra_args'], p['mooncake_version'])
    result['argv'] = argv
    state = p['state']
    result['oplog'] = '--enable_oplog=true' in argv
    if result['oplog'] and p['container_step'] != 'gate':
        # Read (and with oplog_reset_legacy, reset) before the master starts: a namespace it cannot start on is named
        # here, not in a restart loop. The container's gate step ran the render step's read already.
        peers_rpc = [str(peer.get('rpc') or '') for peer in p['ha_peers']]
        own = _shared.format_host_port(p['rpc_address'], p['port'])
        result['oplog_namespace'] = oplog_namespace(
            module, _mooncake.split_endpoints(p['etcd_endpoints']), p['cluster_id'], [own] + peers_rpc,
            p['oplog_reset_legacy'])
        if result['oplog_namespace']['deleted'] and not module.check_mode:
            result['changed'] = True
        if p['state'] == 'started' and result['oplog_namespace']['format'] == 'empty':
            # A standby whose applied log is gone from etcd never promotes (INCOMPLETE_OPLOG_CATCH_UP): its process
            # is restarted, which costs nothing (it serves no RPC) and lets it, or another master, lead again.
            status, body = http_status(endpoints['health'], timeout=1.0)
            view = _mooncake.parse_ha_health(body) if status == 200 else None
            applied = _mooncake.oplog_applied(http_status(endpoints['metrics'], timeout=1.0)[1])
            if _mooncake.wedged_standby('empty', view, applied):
                state = 'restarted'
                result['oplog_restart'] = ('a standby that had applied the OpLog up to %d, and etcd holds no log of '
                                           'cluster %s (etcd lost its data, or the log was deleted): it could never '
                                           'serve (INCOMPLETE_OPLOG_CATCH_UP), so it was restarted'
                                           % (applied, result['oplog_namespace']['cluster_id']))
    spec = spec_for(p, result, UNIT, 'Mooncake master of the KV cache pool (ascend.kvpool)', argv or ['/bin/true'],
                    env=env, owner='ascend.kvpool.mooncake_master', devices=[], port=p['port'])
    last_health = {'body': None}

    peers = ha_peers(p) if p['enable_ha'] else []

    def ha_view():
        masters = [dict(rpc=endpoints['rpc'], health=endpoints['health'], name=p['ha_name'])] + peers
        for m in masters:
            # Only a refused connection says "no RPC port here" (a standby); a timeout or an unreachable host says
            # nothing, and with no health answer either the master's state is unknown (never a standby).
            conn = try_connect(m['rpc'], 0.5)
            m.update(serving=conn['ok'], refused='refused' in conn['error'].lower(), rpc_error=conn['error'])
            status, body = http_status(m['health'], timeout=1.0)
            m['view'] = _mooncake.parse_ha_health(body) if status == 200 else None
        view = _mooncake.ha_judgement(masters)
        result['ha'] = view
        last_health['problem'] = view['problem']
        return not view['problem']

    def gate():
        checks = []
        if not p['enable_ha']:
            checks.append(('rpc port %s' % endpoints['rpc'], lambda: tcp_open(host, p['port'], timeout=0.5)))

        def health():
            status, body = http_status(endpoints['health'], timeout=1.0)
            last_health['body'] = body
            result['health_body'] = body
            return status == 200 or (p['enable_ha'] and status == 503)
        checks.append(('GET %s -> 200' % endpoints['health'], health))
        return checks

    def peer_gate():
        # HA: exactly one master of the group serves RPC (standbys bind no RPC port, in every release), and every
        # master whose admin server answers (0.3.12 on; a 0.3.9 standby answers nothing) names that one as leader.
        return [('one leader serving RPC, the other masters standby', ha_view)]

    lifecycle = lifecycle_for(module, backend_for(module, p['container']), 'mooncake_master', finish=real_master)
    return lifecycle.ensure(spec, state, result, gate,
                            explain=explainer(None if p['enable_ha'] else p['port'], last_health),
                            peer_gate=peer_gate if p['enable_ha'] else None,
                            port_taken=None if p['enable_ha'] else (lambda: tcp_open(host, p['port'], timeout=0.5)))


def real_master(result):
    """Point ``pid`` of ``result`` at the real master when the main process (of the unit, or of the container under
    its init) is the wheel's Python wrapper (Mooncake up to 0.3.12.post1 runs the binary as its child);
    ``wrapper_pid`` keeps the wrapper's. /proc is scanned for children only where the main process is an init or
    the wrapper."""
    result['wrapper_pid'] = None
    pid = result.get('pid')
    if not pid:
        return

    def argv_of(p):
        return parse_cmdline(read_bytes('/proc/%d/cmdline' % p, 65536)) or []

    argv = argv_of(pid)
    if argv and os.path.basename(argv[0]) in CONTAINER_INITS:  # a service container runs with docker's init
        children = proc_children(pid)
        if len(children) != 1:
            return
        pid, argv = children[0]
        result['pid'] = pid  # the master itself (or its wrapper) under the container's init
    child = wrapper_child(argv, lambda: proc_children(pid), 'mooncake_master')
    if child:
        result.update(pid=child, wrapper_pid=pid)


if __name__ == '__main__':
    main()
