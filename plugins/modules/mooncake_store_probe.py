#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: mooncake_store_probe
short_description: Prove a Mooncake KV pool end to end by writing an object on one node and reading it on others
version_added: 1.0.0
description:
  - Uses the real Mooncake store client (C(from mooncake.store import MooncakeDistributedStore)) with the
    settings of a node's C(mooncake.json) (C(master_server_address), C(metadata_server), C(protocol),
    C(device_name)), as a vLLM-Ascend instance would, before any instance starts.
  - O(mode=put) writes O(size_bytes) random bytes under O(key) and returns their sha256, latency and throughput.
    The object lives in the writer's own global segment, so the writer must stay connected while the other nodes
    read it. The module therefore starts a small holder as a transient systemd unit (C(systemd-run), named
    C(kvpool-probe-<key>); in O(container) mode a transient container of that name) that sets the client up,
    puts the object, reports, and then stays alive until O(mode=remove) stops that unit or O(hold_seconds) pass.
    Nothing but that unit is ever stopped, and no pid file is read or signalled. The reader nodes then pull the
    bytes across the network from the writer's DRAM, the same path as a cross-node KV cache hit.
  - O(mode=get) reads O(key) in a short-lived client (which contributes no segment of its own by default), compares
    the sha256 with O(expected_sha256) and fails naming the node when the object cannot be read or differs. The
    module returns as soon as the client has reported; the client then closes its connection to the pool (about
    2 s in Mooncake 0.3) and exits on its own, bounded by a 30 s alarm.
  - O(mode=remove) stops the holder's unit, whose client removes the object and closes, and waits until it has
    exited, so that its segment has left the pool before anything else is stored there (objects stored in a
    segment that is unmounted are lost). Its result files are deleted.
  - Before connecting, the master address of a C(host:port) form is checked with a TCP connect, so an unreachable
    master fails in seconds with a clear message instead of the client's 20 retries.
  - The client runs in its own Python process (O(python)) in its own transient unit or container, so the glog
    output of Mooncake and a hung setup cannot affect the module; O(timeout) bounds each client (SIGALRM), and the
    unit's C(RuntimeMaxSec) bounds its whole process tree.
author:
  - ascend.kvpool contributors (@ascend-kvpool)
attributes:
  check_mode:
    support: full
    description: In check mode nothing is written or read; the module only reports what it would do.
  diff_mode:
    support: none
    description: Nothing to compare; the module writes or reads a transient object.
  idempotent:
    support: none
    description: A put writes a new transient object every time; the role reports the probe as not changed.
options:
  mode:
    description: C(put) on the writer node, C(get) on every reader node, C(remove) on the writer node at the end.
    type: str
    choices: [put, get, remove]
    required: true
  key:
    description: Object key, not empty; use a fresh one per probe (for example with a timestamp).
    type: str
    required: true
  config_path:
    description: The node's C(mooncake.json) (inside O(container) when it is set).
    type: path
    default: /etc/ascend-kvpool/mooncake.json
  size_bytes:
    description:
      - Size of the random object written by O(mode=put), 1 to 1073741824 (1 GiB).
      - The probe only has to prove that a put on one node and a get on the others cross the pool, which the
        default 1 MiB does; the writer registers twice the object's size and every reader as much, so the bound
        keeps a typo (C("1e12") is 10^12 bytes) from exhausting a node's memory.
    type: int
    default: 1048576
  expected_sha256:
    description: sha256 (64 hex digits) the object must have on O(mode=get) (the writer's RV(sha256)). Unset only
      reads it.
    type: str
  local_hostname:
    description:
      - Address this node's store client registers under and is reached at by the other nodes (its data-plane
        address). Required for O(mode=put) and O(mode=get).
    type: str
  node_name:
    description: Name of this node in messages (the role passes C(inventory_hostname)). Defaults to O(local_hostname).
    type: str
  protocol:
    description: Transport for the probe. Unset uses the C(protocol) of O(config_path).
    type: str
  cluster_id:
    description:
      - The pool's cluster id in etcd, given to the store clients as C(MC_STORE_CLUSTER_ID), as to the instances.
        With HA masters (an C(etcd://) master address) a client reads the leader's address from the key
        C(mooncake-store/<cluster_id>/master_view), which the masters write under their C(--cluster_id).
      - Empty sets no C(MC_STORE_CLUSTER_ID) (Mooncake's default, which a client of a single master never reads).
        The role C(ascend.kvpool.mooncake_config) passes C(mooncake_config_cluster_id) (the pool's
        C(kvpool_cluster_id) with HA masters).
    type: str
    default: ''
  use_config_sizes:
    description:
      - Register the C(global_segment_size) and C(local_buffer_size) of O(config_path) instead of probe-sized ones.
      - Proves that the host can register the configured sizes, at the cost of that much memory during the probe.
    type: bool
    default: false
  timeout:
    description: Seconds allowed for each store client to connect and do its put or get.
    type: float
    default: 60
  hold_seconds:
    description: Longest time the writer's holder stays alive if O(mode=remove) never comes.
    type: float
    default: 600
  master_connect_timeout:
    description: Seconds for the TCP check of the master address before the client starts.
    type: float
    default: 3
  python:
    description: Python interpreter that can C(import mooncake.store), on the host or in O(container).
    type: str
    default: python3
  container:
    description:
      - Run the store clients in transient containers made from this container's image and mounts (the node's
        vllm-ascend container), on the host network, instead of transient systemd units on the host.
    type: str
  state_dir:
    description:
      - Directory for the clients' result files (on the host; mounted at the same path in O(container)); made when
        missing.
      - An absolute, writable directory of its own, not a file nor below one, and never a system directory
        (C(/etc), C(/usr) and the like), as given or through a symlink.
    type: path
    default: /var/lib/ascend-kvpool/probe
  poll_interval:
    description: Seconds between polls while waiting for the holder's result.
    type: float
    default: 0.1
notes:
  - With O(protocol=ascend) the Mooncake client needs an NPU context as inside a vLLM-Ascend worker; on real Atlas
    nodes the probe may use O(protocol=tcp) over the nodes' host network to prove the master, the segments and the
    cross-node data path before the instances start.
seealso:
  - module: ascend.kvpool.mooncake_master
"""

EXAMPLES = r"""
- name: Write a 1 MiB object on node1
  ascend.kvpool.mooncake_store_probe:
    mode: put
    key: kvpool-probe-1
    local_hostname: "{{ ansible_host }}"
  register: probe_put
  when: inventory_hostname == 'node1'

- name: Read it on every other node
  ascend.kvpool.mooncake_store_probe:
    mode: get
    key: kvpool-probe-1
    expected_sha256: "{{ hostvars['node1'].probe_put.sha256 }}"
    local_hostname: "{{ ansible_host }}"
    node_name: "{{ inventory_hostname }}"
  when: inventory_hostname != 'node1'

- name: Remove it and stop the writer's holder
  ascend.kvpool.mooncake_store_probe:
    mode: remove
    key: kvpool-probe-1
  when: inventory_hostname == 'node1'
"""

RETURN = r"""
sha256:
  description: sha256 of the object written (put) or read (get).
  returned: put, get
  type: str
size_bytes:
  description: Size of the object written or read.
  returned: put, get
  type: int
  sample: 1048576
latency_ms:
  description: Time of the put or get call alone, in milliseconds.
  returned: put, get
  type: float
  sample: 4.5
throughput_MBps:
  description: O(size_bytes) divided by the put or get time, in MB/s (1 MB = 10^6 bytes).
  returned: put, get
  type: float
  sample: 230.4
setup_ms:
  description: Time the store client took to connect to the master and register its memory, in milliseconds.
  returned: put, get
  type: float
put_attempts:
  description:
    - Number of put calls the writer made. A put whose transfer failed (Mooncake's C(-800), TRANSFER_FAIL) is tried
      again every 0.5 s until 2 s before O(timeout). Right after an instance restarted, the master still lists the
      gone client's segment until its client TTL runs out, and a put may be placed there. 0 for C(get).
  returned: put, get
  type: int
  sample: 1
master_server_address:
  description: The master address the client used (from O(config_path)).
  returned: put, get
  type: str
  sample: 172.31.250.11:50088
holder_unit:
  description: The writer's holder, a transient systemd unit (or container) started by put and stopped by remove.
  returned: put, remove
  type: str
  sample: kvpool-probe-kvpool-probe-1-8c2e0a1b
logs:
  description: How to read the holder's log while it runs.
  returned: put, remove
  type: str
  sample: journalctl -u kvpool-probe-kvpool-probe-1-8c2e0a1b
"""

import hashlib
import json
import re
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.ascend.kvpool.plugins.module_utils import _errors, _mooncake, _validate
from ansible_collections.ascend.kvpool.plugins.module_utils._errors import KvpoolError
from ansible_collections.ascend.kvpool.plugins.module_utils._proc import tcp_open, wait_until
from ansible_collections.ascend.kvpool.plugins.module_utils._service import (
    ServiceError,
    backend_for,
    find_binary,
    read_bytes,
    remove_file,
)

MARK = 'KVPOOL_PROBE_RESULT '

# The store client, run as `python -c CLIENT '<json args>'`. Phase 1 (connect + put/get) is bounded by SIGALRM's
# default action, which ends the process even inside a blocking C++ call. The holder then serves its segment
# until SIGTERM, a stop file, or the hold deadline, and removes the object on the way out.
CLIENT = r'''
import hashlib, json, os, signal, sys, time
a = json.loads(sys.argv[1])
def emit(res):
    line = "KVPOOL_PROBE_RESULT " + json.dumps(res)
    if a.get("result_file"):
        tmp = a["result_file"] + ".tmp"
        with open(tmp, "w") as fh:
            fh.write(line + "\n")
        os.rename(tmp, a["result_file"])
    sys.stdout.write(line + "\n")
    sys.stdout.flush()
signal.alarm(max(1, int(a["timeout"])))
if a.get("cluster_id"):
    # The HA leader is looked up under mooncake-store/<MC_STORE_CLUSTER_ID>/master_view: the pool's, as the instances.
    os.environ["MC_STORE_CLUSTER_ID"] = a["cluster_id"]
try:
    from mooncake.store import MooncakeDistributedStore
except Exception as exc:
    emit({"ok": False, "stage": "import", "error": "import mooncake.store failed: %s" % exc})
    raise SystemExit(2)
store = MooncakeDistributedStore()
t0 = time.time()
rc = store.setup(a["local_hostname"], a["metadata_server"], int(a["global_segment_size"]),
                 int(a["local_buffer_size"]), a["protocol"], a["device_name"], a["master_server_address"])
setup_ms = (time.time() - t0) * 1000.0
if rc != 0:
    # Which Mooncake this client is (read only here, on the way out): a client of another release than the
    # master's fails its setup (RPC_FAIL, "invalid rpc arg"), e.g. when a second Mooncake on the node comes first.
    version = None
    try:
        from importlib import metadata
        for dist in metadata.distributions():
            if (dist.metadata.get("Name") or "").lower().replace("_", "-").startswith("mooncake-transfer-engine"):
                version = dist.version
                break
    except Exception:
        pass
    emit({"ok": False, "stage": "setup", "rc": rc, "setup_ms": setup_ms, "python": sys.executable,
          "mooncake_version": version, "error": "store setup returned %s" % rc})
    raise SystemExit(3)
res = {"ok": True, "setup_ms": setup_ms, "pid": os.getpid()}
if a["mode"] == "put":
    data = os.urandom(int(a["size_bytes"]))
    # A put whose transfer fails (-800, TRANSFER_FAIL) most often hit the segment of a client that has just gone
    # (an instance restarted): the master lists it until that client's TTL (--client_ttl) runs out. Such a put is
    # tried again every 0.5 s until 2 s before the timeout; every other error ends the put at once.
    deadline = t0 + max(1, int(a["timeout"])) - 2
    attempts = 0
    while True:
        attempts += 1
        t1 = time.time()
        rc = store.put(a["key"], data)
        res["op_s"] = time.time() - t1
        if rc != -800 or time.time() + 0.5 > deadline:
            break
        res.setdefault("first_error", "put returned %s" % rc)
        time.sleep(0.5)
    res["put_attempts"] = attempts
    res["sha256"] = hashlib.sha256(data).hexdigest()
    res["size"] = len(data)
    if rc != 0:
        res.update(ok=False, stage="put", rc=rc, error="put returned %s (%d attempt(s))" % (rc, attempts))
    del data
else:
    t0 = time.time()
    data = store.get(a["key"])
    res["op_s"] = time.time() - t0
    data = bytes(data) if data is not None else b""
    res["size"] = len(data)
    res["sha256"] = hashlib.sha256(data).hexdigest()
    if not data:
        res.update(ok=False, stage="get", error="get returned no data (key not found)")
signal.alarm(0)
emit(res)
# store.close() unmounts the segment and joins the client's threads: about 2 s. A reader (no segment) closes on its
# own after its result; the writer's holder is waited for (its segment must leave the pool). SIGALRM bounds both.
if a["mode"] != "put" or not res["ok"]:
    signal.alarm(30)
    store.close()
    raise SystemExit(0 if res["ok"] else 4)
stop = {"now": False}
def on_signal(signum, frame):
    stop["now"] = True
signal.signal(signal.SIGTERM, on_signal)
signal.signal(signal.SIGINT, on_signal)
deadline = time.time() + float(a["hold_seconds"])
while not stop["now"] and time.time() < deadline and not os.path.exists(a["stop_file"]):
    time.sleep(0.05)
try:
    store.remove(a["key"])
finally:
    signal.alarm(30)
    store.close()
'''


def safe_name(key):
    return re.sub(r'[^A-Za-z0-9_.-]', '_', key)[:120] + '-' + hashlib.sha256(key.encode('utf-8')).hexdigest()[:8]


def round_up_mib(nbytes):
    return ((int(nbytes) + _mooncake.MIB - 1) // _mooncake.MIB) * _mooncake.MIB


def parse_result(text):
    """The client's result dict from its output (the last marked line), or None."""
    if isinstance(text, bytes):
        text = text.decode('utf-8', 'replace')
    found = None
    for line in (text or '').splitlines():
        if line.startswith(MARK):
            try:
                found = json.loads(line[len(MARK):])
            except ValueError:
                pass
    return found


def figures(res, size):
    op_s = max(float(res.get('op_s') or 0.0), 1e-9)
    return {
        'latency_ms': round(op_s * 1000.0, 3),
        'throughput_MBps': round(float(size) / op_s / 1e6, 1),
        'setup_ms': round(float(res.get('setup_ms') or 0.0), 1),
        'put_attempts': int(res.get('put_attempts') or 0),
    }


def load_config(module, path, who):
    try:
        raw = _validate.read_text_file(path)  # a FIFO or a device at the path is refused, never read: no hang
    except _validate.FileProblem as exc:
        if exc.missing:
            raise KvpoolError('%s: %s not found; write it first (role ascend.kvpool.mooncake_config)'
                              % (who, path)) from exc
        raise KvpoolError('%s: config_path: %s' % (who, exc)) from exc
    try:
        cfg = json.loads(raw)
    except ValueError as exc:
        raise KvpoolError('%s: %s is not valid JSON: %s' % (who, path, exc)) from exc
    if not isinstance(cfg, dict) or not cfg.get('master_server_address'):
        raise KvpoolError('%s: %s has no master_server_address' % (who, path))
    return cfg


def client_sizes(module, cfg, who):
    p = module.params
    if p['use_config_sizes']:
        try:
            seg = _mooncake.parse_size(cfg.get('global_segment_size', 0))
            buf = _mooncake.parse_size(cfg.get('local_buffer_size', _mooncake.GIB))
        except ValueError as exc:
            raise KvpoolError('%s: %s: %s' % (who, p['config_path'], exc)) from exc
        if p['mode'] == 'get':
            seg = 0
        return seg, max(buf, round_up_mib(p['size_bytes'] * 2))
    seg = max(64 * _mooncake.MIB, round_up_mib(p['size_bytes'] * 2)) if p['mode'] == 'put' else 0
    return seg, max(16 * _mooncake.MIB, round_up_mib(p['size_bytes'] * 2))


def check_master(module, address, who):
    try:
        hp = _mooncake.parse_master_address(address)
    except ValueError as exc:
        raise KvpoolError('%s: %s' % (who, exc)) from exc
    if hp is None:
        return
    if not tcp_open(hp[0], hp[1], timeout=module.params['master_connect_timeout']):
        raise KvpoolError('%s: cannot reach the Mooncake master at %s (no TCP connection within %s s). Is it '
                          'running (role ascend.kvpool.mooncake_master), is master_server_address in %s right, '
                          'and is the port open between the nodes?'
                          % (who, address, module.params['master_connect_timeout'], module.params['config_path']),
                          result=dict(master_server_address=address))


def setup_hint(res, address='', cluster_id=''):
    """After a failed store setup: which Python and Mooncake the client ran, and the fix for a client of another
    release than the master's (its setup fails with RPC_FAIL / "invalid rpc arg"); with HA masters (``etcd://``),
    the leader key the client looked up (its MC_STORE_CLUSTER_ID)."""
    if not res or res.get('stage') != 'setup':
        return ''
    ha = ''
    if str(address).startswith('etcd://'):
        ha = ('. With HA masters the client looks the leader up under mooncake-store/%s/master_view: the masters\' '
              '--cluster_id must be the same (both come from kvpool_cluster_id; cluster_id, role variable '
              'mooncake_config_cluster_id)' % (cluster_id or '<Mooncake\'s default, no MC_STORE_CLUSTER_ID>'))
    return ('. The store client ran %s (Mooncake %s); a client of another Mooncake release than the master\'s fails '
            'its setup: set python (role variable mooncake_config_probe_python) to the Python of the master\'s '
            'release%s' % (res.get('python') or 'python', res.get('mooncake_version') or 'of unknown version', ha))


def client_log(backend, unit):
    """The last lines of a client's log, without its result line."""
    text = backend.transient_logs(unit, 40) or ''
    return _mooncake.log_excerpt('\n'.join(line for line in text.splitlines() if not line.startswith(MARK)), 20)


def run_client(module, backend, unit, argv, result_path, who, what):
    """Start a client in its own transient unit and wait for its result file; (result or None, timed out)."""
    p = module.params
    state = {'res': None}

    def reported():
        state['res'] = parse_result(read_bytes(result_path))
        return state['res'] is not None

    remove_file(result_path)
    limit = p['timeout'] + 35 + (p['hold_seconds'] if p['mode'] == 'put' else 0)
    try:
        backend.run_transient(unit, argv, limit, mounts=[p['state_dir']])
    except ServiceError as exc:
        raise KvpoolError('%s: could not start the %s: %s' % (who, what, exc)) from exc
    started = time.monotonic()
    wait = wait_until([('result', reported)], p['timeout'] + 5, p['poll_interval'],
                      alive=lambda: backend.transient_alive(unit))
    if not wait['ready'] and wait['died']:
        reported()  # it may have written its result just before exiting
    return state['res'], time.monotonic() - started >= p['timeout']


def stop_after_failure(backend, unit):
    """Stop a client that failed; what became of it, for the failure's message (a stop that failed is said, never
    "stopped")."""
    try:
        backend.stop_transient(unit)
    except ServiceError as exc:
        return 'its unit %s could NOT be stopped: %s' % (unit, exc)
    return 'its unit was stopped: %s' % unit


def unit_for(key, role):
    return ('kvpool-probe-%s-%s' % (role, safe_name(key)))[:200]


def read(module, backend, python, args, base, address, who, result):
    """mode=get: run the reader client and return on its result file, not on its exit (its client close takes
    about 2 s more, bounded by its own alarm and its unit's RuntimeMaxSec)."""
    p = module.params
    result_path = base + '.result'
    unit = unit_for(p['key'], 'get')
    argv = [python, '-c', CLIENT, json.dumps(dict(args, result_file=result_path))]
    res, timed_out = run_client(module, backend, unit, argv, result_path, who, 'store client')
    log = client_log(backend, unit)
    stopped = stop_after_failure(backend, unit) if res is None else ''
    remove_file(result_path)
    if res is None:
        why = ('timed out after %s s (%s)' % (p['timeout'], stopped)) if timed_out else 'exited (%s)' % stopped
        raise KvpoolError('%s: the store client %s before reading %s. Last lines:\n%s'
                          % (who, why, p['key'], log), result=result)
    if not res.get('ok'):
        raise KvpoolError('%s (%s): could not read %s from the pool through master %s: %s%s. Last lines:\n%s'
                          % (who, p['local_hostname'], p['key'], address, res.get('error'),
                             setup_hint(res, address, p['cluster_id']), log),
                          result=result)
    result.update(sha256=res['sha256'], size_bytes=res['size'], **figures(res, res['size']))
    if p['expected_sha256'] and res['sha256'] != p['expected_sha256'].lower():
        raise KvpoolError('%s (%s): read %s (%d bytes) but its sha256 %s differs from the writer\'s %s'
                          % (who, p['local_hostname'], p['key'], res['size'], res['sha256'],
                             p['expected_sha256']), result=result)
    return result


# The probe object only has to prove that a put on one node and a get on another cross the pool; 1 MiB (the
# default) does that. A larger one costs the writer twice its size in registered memory (its segment) and every
# reader as much in its buffer, so the bound keeps a typo ("1e12" is 10^12 bytes) from ending in the client's
# MemoryError (std::bad_alloc) or in a node out of memory.
MAX_SIZE_BYTES = 1 << 30
SHA256_RE = re.compile(r'^[0-9A-Fa-f]{64}$')


def check_params(module):
    """Everything the argument spec cannot say, in one place. Raises KvpoolError naming the option, the value and
    the fix (``main()`` fails the task with it)."""
    p = module.params
    if not p['key']:
        raise KvpoolError('key is empty: give the probe object a key, a fresh one per probe (for example '
                          'kvpool-probe-<timestamp>)')
    _validate.int_range(p['size_bytes'], 'size_bytes', 1, MAX_SIZE_BYTES,
                        'bytes of the probe object, at most 1 GiB: it only has to prove a put and a get across the '
                        'nodes; the default 1048576 does')
    if p['expected_sha256'] and not SHA256_RE.match(p['expected_sha256']):
        raise KvpoolError('expected_sha256=%r is not a sha256 (64 hex digits): pass the writer\'s sha256 result'
                          % p['expected_sha256'])
    for key in ('timeout', 'hold_seconds', 'master_connect_timeout', 'poll_interval'):
        _validate.number_range(p[key], key, above=0, why='seconds')
    if not module.check_mode:
        # The clients' result files go there (written by the clients, removed by the module).
        _validate.directory(p['state_dir'], 'state_dir', create=p['mode'] != 'remove', writable=True,
                            example='/var/lib/ascend-kvpool/probe')


def main():
    module = AnsibleModule(
        argument_spec=dict(
            mode=dict(type='str', choices=['put', 'get', 'remove'], required=True),
            key=dict(type='str', required=True, no_log=False),
            config_path=dict(type='path', default='/etc/ascend-kvpool/mooncake.json'),
            size_bytes=dict(type='int', default=1048576),
            expected_sha256=dict(type='str'),
            local_hostname=dict(type='str'),
            node_name=dict(type='str'),
            protocol=dict(type='str'),
            cluster_id=dict(type='str', default=''),
            use_config_sizes=dict(type='bool', default=False),
            timeout=dict(type='float', default=60),
            hold_seconds=dict(type='float', default=600),
            master_connect_timeout=dict(type='float', default=3),
            python=dict(type='str', default='python3'),
            container=dict(type='str'),
            state_dir=dict(type='path', default='/var/lib/ascend-kvpool/probe'),
            poll_interval=dict(type='float', default=0.1),
        ),
        required_if=[('mode', 'put', ('local_hostname',)), ('mode', 'get', ('local_hostname',))],
        supports_check_mode=True,
    )
    failed, result = _errors.outcome(module, _run, module)
    if failed:
        module.fail_json(**result)
    module.exit_json(**result)


def _run(module):
    """The module's work: returns its result or raises KvpoolError; main() answers the task with either."""
    p = module.params
    who = p['node_name'] or p['local_hostname'] or 'this node'
    check_params(module)
    base = '%s/%s' % (p['state_dir'].rstrip('/'), safe_name(p['key']))
    result_path, stop_path = base + '.result', base + '.stop'
    holder = unit_for(p['key'], 'put')
    result = dict(changed=False, key=p['key'], mode=p['mode'])

    if module.check_mode:
        result['msg'] = 'check mode: the probe (%s of %s) was not run' % (p['mode'], p['key'])
        return result

    backend = backend_for(module, p['container'])
    try:
        backend.check()
    except ServiceError as exc:
        raise KvpoolError('%s: %s' % (who, exc)) from exc

    if p['mode'] == 'remove':
        try:
            alive = backend.transient_alive(holder)
            if alive:
                # The holder removes the object and closes its client on SIGTERM; its segment leaves the pool when
                # the stop returns. Only this unit is stopped, and only when it is the collection's (its
                # Description, or its container's label): it never signals a process it did not start.
                backend.stop_transient(holder)
        except ServiceError as exc:  # not ours, unreadable, or still running: never "nothing left behind"
            raise KvpoolError('%s: the holder of %s was not removed: %s' % (who, p['key'], exc),
                              result=dict(result, holder_unit=holder)) from exc
        for path in (result_path, stop_path):
            remove_file(path)
        result.update(changed=alive, holder_unit=holder, logs=backend.logs_hint(_Named(holder)))
        return result

    cfg = load_config(module, p['config_path'], who)
    address = cfg['master_server_address']
    result['master_server_address'] = address
    seg, buf = client_sizes(module, cfg, who)
    python = find_binary(module, p['python'], ['/usr/local/python3*/bin', '/opt/*/bin'], p['container'])
    if not python:
        raise KvpoolError('%s: %s not found; set python to an interpreter that can import mooncake.store'
                          % (who, p['python']))
    args = {
        'mode': p['mode'], 'key': p['key'], 'size_bytes': p['size_bytes'], 'timeout': p['timeout'],
        'local_hostname': p['local_hostname'], 'metadata_server': cfg.get('metadata_server') or 'P2PHANDSHAKE',
        'protocol': p['protocol'] or cfg.get('protocol') or 'tcp', 'device_name': cfg.get('device_name') or '',
        'master_server_address': address, 'global_segment_size': seg, 'local_buffer_size': buf,
        'cluster_id': p['cluster_id'],
    }
    check_master(module, address, who)

    if p['mode'] == 'get':
        return read(module, backend, python, args, base + '.get', address, who, result)

    # put: a holder in its own transient unit keeps the writer's segment (and so the object) in the pool.
    try:
        if backend.transient_alive(holder):
            backend.stop_transient(holder)  # the holder of an earlier put of this key (only that unit, when ours)
    except ServiceError as exc:
        raise KvpoolError('%s: %s' % (who, exc), result=dict(result, holder_unit=holder)) from exc
    remove_file(stop_path)
    args.update(result_file=result_path, stop_file=stop_path, hold_seconds=p['hold_seconds'])
    res, timed_out = run_client(module, backend, holder, [python, '-c', CLIENT, json.dumps(args)], result_path, who,
                                'probe writer')
    result.update(changed=True, holder_unit=holder, logs=backend.logs_hint(_Named(holder)))
    if res is None or not res.get('ok'):
        tail = client_log(backend, holder)
        stopped = stop_after_failure(backend, holder)
        # Nothing is left behind only when the writer was stopped again.
        result['changed'] = not stopped.startswith('its unit was stopped')
        why = res.get('error') if res else (
            'no result after %.1f s%s' % (p['timeout'], ' (timed out)' if timed_out else ''))
        raise KvpoolError('%s (%s): could not write %s to the pool through master %s: %s%s (%s). Last lines of '
                          '%s:\n%s' % (who, p['local_hostname'], p['key'], address, why,
                                       setup_hint(res, address, p['cluster_id']), stopped,
                                       holder, tail), result=result)
    result.update(sha256=res['sha256'], size_bytes=res['size'], **figures(res, res['size']))
    return result


class _Named(object):
    def __init__(self, unit):
        self.unit = unit


if __name__ == '__main__':
    main()
