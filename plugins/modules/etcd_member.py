#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: etcd_member
short_description: Run one member of the etcd cluster of the Mooncake HA masters as a health-gated systemd unit
version_added: 1.0.0
description:
  - Starts, stops or restarts one C(etcd) member as the systemd unit C(kvpool-etcd.service) on the host, for the
    Mooncake masters in HA mode (they elect their leader through etcd; the clients find it there).
  - 'A static bootstrap: every member gets the whole cluster (O(members)) and C(--initial-cluster-state new). etcd
    reads the C(--initial-*) flags only while its data directory holds no member, so the same command line serves
    the first start and every restart; a member whose node comes back rejoins with its data.'
  - Run the task on every member at once (one play over the etcd group). A member is healthy only with a quorum,
    so the gate of the first waits for the others.
  - 'The health gate, polled every O(poll_interval) seconds for at most O(ready_timeout) seconds: the member''s
    C(GET /health) answers C({"health":"true"}), and C(etcdctl endpoint health), C(member list) and
    C(endpoint status) over every member show all of them healthy, exactly the members of O(members) with their
    peer URLs, and one leader.'
  - A start that fails fails the task with the unit's name, what the gate saw (the members that are not healthy or
    missing) and the tail of its journal.
  - Client URLs are plain C(http). Mooncake's etcd client has no TLS and no auth, so client TLS is refused (bind the
    client port to the cluster network). Peer traffic can use TLS (O(peer_cert_file)).
author:
  - ascend.kvpool contributors (@ascend-kvpool)
extends_documentation_fragment:
  - ascend.kvpool.service.unit
options:
  state:
    description:
      - C(started) makes sure the member runs with these settings and passes its health gate.
      - C(stopped) stops its unit, disables it and removes the unit file (the data directory stays).
      - C(restarted) always restarts it.
    type: str
    choices: [started, stopped, restarted]
    default: started
  name:
    description: This member's name (C(--name)); must be one of the names in O(members).
    type: str
    required: true
  address:
    description: This node's address; the member listens on it for peers and clients (and on C(127.0.0.1) for
      clients). One address, no port (the ports are O(client_port) and O(peer_port)).
    type: str
    required: true
  client_port:
    description: Client port (C(2379) by default).
    type: int
    default: 2379
  peer_port:
    description: Peer port of this member (C(2380) by default).
    type: int
    default: 2380
  metrics_port:
    description: Port of C(--listen-metrics-urls) (C(/metrics) and C(/health) without the client API); C(0) leaves
      it out (the client port serves C(/metrics) too).
    type: int
    default: 0
  members:
    description: Every member of the cluster, this one included, in a fixed order (the inventory's).
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description: The member's name.
        type: str
        required: true
      address:
        description: The member's address.
        type: str
        required: true
      peer_port:
        description: Its peer port.
        type: int
        default: 2380
      client_port:
        description: Its client port.
        type: int
        default: 2379
  data_dir:
    description: Data directory of the member (created 0700). Its C(member) subdirectory is the member's identity;
      removing it makes a new member that the cluster refuses until the old one is removed
      (C(etcdctl member remove)).
    type: path
    default: /var/lib/ascend-kvpool/etcd
  cluster_token:
    description: C(--initial-cluster-token), the same on every member; keeps two clusters of the same hosts apart.
    type: str
    default: kvpool-etcd
  initial_cluster_state:
    description:
      - How a member whose data directory holds no member yet starts (etcd reads C(--initial-cluster) and
        C(--initial-cluster-state) only then).
      - C(auto) asks the other members first (C(etcdctl member list)). None answers -
        C(new), a static bootstrap with every member of O(members) (a first deploy). They run a cluster that does not
        list this member - C(etcdctl member add), then C(existing) (a group that grew, a replaced node); retried
        while the cluster refuses the add for want of started members (members joining at once). Listed as added -
        C(existing). Listed as a started member - the task fails naming C(etcdctl member remove <ID>), as its data was
        lost and the cluster refuses it until then.
      - Only an C(etcdctl member list) that says it reached no endpoint (C(context deadline exceeded), C(connection
        refused)) counts as none answering, and only while no member accepts a TCP connection on its client port,
        or those that do answer no C(etcdctl endpoint status) either (members in the same first bootstrap) -
        etcd members that run without a quorum (a member list needs a leader) make etcdctl say the same, and then the
        task fails naming the members that accept connections and the fix (restore the quorum), never bootstrapping
        a new cluster beside the live one. Any other failure, and an answer that is not a member list (even with
        exit code 0), fails the task naming the command, and nothing is changed.
      - A member whose data directory holds a member keeps the values of its installed unit, so that a group that
        grows or shrinks restarts no running member for flags etcd would not read.
      - C(new) and C(existing) force the value (no question, no C(member add)).
    type: str
    choices: [auto, new, existing]
    default: auto
  heartbeat_interval:
    description: C(--heartbeat-interval) in ms (etcd's default 100).
    type: int
    default: 100
  election_timeout:
    description: C(--election-timeout) in ms (etcd's default 1000); at least 5 times O(heartbeat_interval).
    type: int
    default: 1000
  auto_compaction_retention:
    description: C(--auto-compaction-retention) (hours, or a duration such as C(30m)). Mooncake writes only its
      leader key, so the history stays small.
    type: str
    default: '1'
  peer_cert_file:
    description: Certificate of this member for peer TLS (peer URLs become C(https)); with O(peer_key_file) and
      O(peer_trusted_ca_file). Unset is plain C(http).
    type: path
  peer_key_file:
    description: Key of O(peer_cert_file).
    type: path
  peer_trusted_ca_file:
    description: CA of the peers' certificates (C(--peer-trusted-ca-file); C(--peer-client-cert-auth) is on).
    type: path
  binary:
    description: The C(etcd) executable.
    type: path
    default: /usr/bin/etcd
  etcdctl:
    description:
      - The C(etcdctl) executable (the gate's cluster check, the membership question of O(initial_cluster_state=auto)).
      - Its requests are bounded by its own C(--command-timeout=2s) and C(--dial-timeout=1s). The process itself is
        killed with its children after 10 seconds, or when O(ready_timeout) of the gate (or of the C(member add)
        retries) ends if that comes first; a killed call counts as no answer.
    type: path
    default: /usr/bin/etcdctl
  extra_args:
    description: More C(etcd) flags, one per item. Flags the module writes (names, URLs, the initial cluster, the
      data directory) and client TLS or auth (C(--auto-tls), C(--cert-file), C(--trusted-ca-file), ...) are
      refused, and so are the same flags set through O(env) (C(ETCD_AUTO_TLS), ...).
    type: list
    elements: str
    default: []
  env:
    description:
      - Extra environment of the member (for example C(ETCD_UNSUPPORTED_ARCH=arm64) for etcd 3.4 on aarch64).
      - A variable whose name says it holds a secret (C(HF_TOKEN), C(*_API_KEY), C(*PASSWORD*), C(*SECRET*),
        C(*AUTH*), ...) and has a value is written into the unit's mode 0600 C(EnvironmentFile=) (in container mode
        it is filled into the container's environment by the action plugin), never into the world-readable unit file;
        its value is masked in the result, the diff and every message.
    type: dict
    default: {}
  ready_timeout:
    description: Seconds to wait for the health gate.
    type: float
    default: 60
  poll_interval:
    description: Seconds between two polls of the gate.
    type: float
    default: 0.2
  stop_timeout:
    description: Seconds after SIGTERM before SIGKILL (C(TimeoutStopSec=)).
    type: float
    default: 10
notes:
  - Members are never removed from the cluster by this module. A host taken out of O(members) makes the gate fail
    naming it, with the C(etcdctl member remove) command to run.
  - A member whose data directory was lost (a replaced disk or node) is refused by the others. The task fails naming
    the C(etcdctl member remove <ID>) to run; the next run adds it again (O(initial_cluster_state=auto)).
seealso:
  - name: etcd clustering guide
    description: Static bootstrap and the initial-cluster flags.
    link: https://etcd.io/docs/v3.4/op-guide/clustering/
  - module: ascend.kvpool.mooncake_master
"""

EXAMPLES = r"""
- name: Run the etcd member of this node (every host of group etcd at once)
  ascend.kvpool.etcd_member:
    name: "{{ inventory_hostname }}"
    address: "{{ ansible_host }}"
    members:
      - {name: node1, address: 172.31.250.11}
      - {name: node2, address: 172.31.250.12}
      - {name: node3, address: 172.31.250.13}
  register: etcd

- name: Show the cluster
  ansible.builtin.debug:
    msg: "etcd {{ etcd.endpoint }}: leader {{ etcd.leader }}, {{ etcd.cluster | length }} members healthy"
"""

RETURN = r"""
state:
  description: State of the member after the task (C(running) or C(stopped)).
  returned: always
  type: str
  sample: running
action:
  description: What the task did (or would do in check mode).
  returned: always
  type: str
  sample: started
reason:
  description: Why it did it.
  returned: always
  type: str
  sample: settings changed
unit:
  description: The systemd unit.
  returned: always
  type: str
  sample: kvpool-etcd.service
argv:
  description: The effective command line.
  returned: always
  type: list
  elements: str
endpoint:
  description: This member's client URL.
  returned: always
  type: str
  sample: http://172.31.250.11:2379
endpoints:
  description: The client URLs of every member (what Mooncake's C(etcd://) address lists, without C(http://)).
  returned: always
  type: list
  elements: str
  sample: [172.31.250.11:2379, 172.31.250.12:2379, 172.31.250.13:2379]
cluster:
  description: The member list at the last poll, as C(id), C(name), C(peer_urls) and C(client_urls).
  returned: when polled
  type: list
  elements: dict
leader:
  description: Name of the etcd leader at the last poll ('' when unknown).
  returned: when polled
  type: str
  sample: node2
join:
  description: How the member starts when its data directory holds no member yet, and why - C(action) (C(new),
    C(existing), C(added) after C(etcdctl member add), C(kept) the installed unit's values for a member with data,
    C(given) by O(initial_cluster_state)) and C(reason).
  returned: unless stopped
  type: dict
  sample: {action: added, reason: "the cluster of node1 does not list node2: etcdctl member add, then existing"}
ready_seconds:
  description: Seconds the member took to pass its gate after its start (or to pass it when running).
  returned: always
  type: float
  sample: 1.4
"""

import os
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.ascend.kvpool.plugins.module_utils import _errors, _etcd, _secrets, _validate
from ansible_collections.ascend.kvpool.plugins.module_utils._errors import KvpoolError
from ansible_collections.ascend.kvpool.plugins.module_utils._shared import (
    ETCD_CLIENT_PORT, ETCD_PEER_PORT, format_host_port, probe_host,
)
from ansible_collections.ascend.kvpool.plugins.module_utils._proc import http_status, tcp_open, try_connect
from ansible_collections.ascend.kvpool.plugins.module_utils._runner import execute
from ansible_collections.ascend.kvpool.plugins.module_utils._service import (
    OWN_MARK,
    UNIT_DIR,
    ServiceError,
    backend_for,
    check_service_params,
    lifecycle_for,
    read_text,
    spec_for,
    unit_argument_spec,
)

UNIT = 'kvpool-etcd'


def check_params(p):
    """Everything the argument spec cannot say; returns the members (with ports). Raises KvpoolError naming the
    option, the value and the fix."""
    for name in ('client_port', 'peer_port'):
        _validate.port(p[name], name)
    _validate.port(p['metrics_port'], 'metrics_port', none=True)
    if len(set([p['client_port'], p['peer_port']] + ([p['metrics_port']] if p['metrics_port'] else []))) < (
            3 if p['metrics_port'] else 2):
        raise KvpoolError('client_port, peer_port and metrics_port must differ (now %s, %s, %s)'
                          % (p['client_port'], p['peer_port'], p['metrics_port']))
    _validate.int_range(p['heartbeat_interval'], 'heartbeat_interval', 10, 10000, 'milliseconds')
    _validate.int_range(p['election_timeout'], 'election_timeout', 5 * p['heartbeat_interval'], 50000,
                        'milliseconds, at least 5 x heartbeat_interval')
    if not p['cluster_token'] or not _etcd.NAME_RE.match(p['cluster_token']):
        raise KvpoolError('cluster_token=%r: use letters, digits, ".", "_" and "-"' % p['cluster_token'])
    tls = [p['peer_cert_file'], p['peer_key_file'], p['peer_trusted_ca_file']]
    if any(tls) and not all(tls):
        raise KvpoolError('peer TLS needs peer_cert_file, peer_key_file and peer_trusted_ca_file together')
    managed = _etcd.managed_flag_in(p['extra_args'])
    if managed:
        raise KvpoolError('extra_args: %s sets %s, which this module writes itself or which Mooncake\'s etcd client '
                          'cannot use (client TLS, auth); use the module option instead'
                          % (str(managed[0]).split('=', 1)[0], managed[1]))
    managed = _etcd.managed_env_in(p['env'])
    if managed:
        raise KvpoolError('env: %s sets %s, which this module writes itself or which Mooncake\'s etcd client cannot '
                          'use (client TLS, auth); remove it (kvpool_etcd_environment)' % managed)
    if p['state'] != 'stopped':
        _validate.host_address(p['address'], 'address', 'client_port and peer_port', empty=False)
    members = [dict(name=str(m['name']), address=str(m['address']).strip(), peer_port=int(m['peer_port']),
                    client_port=int(m['client_port'])) for m in p['members']]
    problem = _etcd.members_problem(members)
    if problem:
        raise KvpoolError('members: %s' % problem)
    mine = [m for m in members if m['name'] == p['name']]
    if not mine:
        raise KvpoolError('name=%r is not one of members (%s): every member needs the whole cluster, itself '
                          'included' % (p['name'], ', '.join(m['name'] for m in members)))
    if mine[0]['address'] != p['address'] or mine[0]['peer_port'] != p['peer_port']:
        raise KvpoolError('members lists %s at %s, but this member is at %s (address, peer_port): give the same '
                          'address to both' % (p['name'], format_host_port(mine[0]['address'], mine[0]['peer_port']),
                                               format_host_port(p['address'], p['peer_port'])))
    check_service_params(p)
    # etcd makes it (0700) at its first start; never a system directory, as given or through a link.
    _validate.directory(p['data_dir'], 'data_dir', example='/var/lib/ascend-kvpool/etcd')
    return members


def main():
    module = AnsibleModule(
        argument_spec=dict(
            state=dict(type='str', choices=['started', 'stopped', 'restarted'], default='started'),
            name=dict(type='str', required=True),
            address=dict(type='str', required=True),
            client_port=dict(type='int', default=ETCD_CLIENT_PORT),
            peer_port=dict(type='int', default=ETCD_PEER_PORT),
            metrics_port=dict(type='int', default=0),
            members=dict(type='list', elements='dict', required=True, options=dict(
                name=dict(type='str', required=True),
                address=dict(type='str', required=True),
                peer_port=dict(type='int', default=ETCD_PEER_PORT),
                client_port=dict(type='int', default=ETCD_CLIENT_PORT),
            )),
            data_dir=dict(type='path', default='/var/lib/ascend-kvpool/etcd'),
            cluster_token=dict(type='str', default='kvpool-etcd', no_log=False),  # a name, not a secret
            initial_cluster_state=dict(type='str', choices=['auto', 'new', 'existing'], default='auto'),
            heartbeat_interval=dict(type='int', default=100),
            election_timeout=dict(type='int', default=1000),
            auto_compaction_retention=dict(type='str', default='1'),
            peer_cert_file=dict(type='path'),
            peer_key_file=dict(type='path'),
            peer_trusted_ca_file=dict(type='path'),
            binary=dict(type='path', default='/usr/bin/etcd'),
            etcdctl=dict(type='path', default='/usr/bin/etcdctl'),
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


# etcdctl's own --command-timeout (2 s) and --dial-timeout (1 s) bound its requests; ours bounds the process (a
# hung or stub etcdctl, a slow start): killed with its children after this many seconds, or the time the caller has
# left (the gate's ready_timeout), whichever is less.
ETCDCTL_TIMEOUT = 10.0


def _etcdctl(module, p, endpoints, *args, **kwargs):
    """``etcdctl --endpoints=... <args> -w json`` (API v3, LANG=C); returns (rc, stdout, stderr). The process is
    killed after ``timeout`` seconds (at most ETCDCTL_TIMEOUT): rc -9, stderr says it timed out."""
    timeout = max(0.5, min(ETCDCTL_TIMEOUT, kwargs.get('timeout') or ETCDCTL_TIMEOUT))
    argv = [p['etcdctl'], '--endpoints=%s' % ','.join(endpoints), '--command-timeout=2s', '--dial-timeout=1s']
    argv += list(args) + ['-w', 'json']
    return execute(argv, timeout=timeout, env={'ETCDCTL_API': '3'})


def _run(module):
    # Secret-named variables of env (HF_TOKEN, *_API_KEY) and the values of secret-named flags of extra_args
    # (--hf-token T): masked wherever the result or a message echoes them (argv, the task's input).
    module.no_log_values.update(_secrets.env_secret_values(module.params['env'])
                                + _secrets.secret_values(module.params.get('extra_args')))
    p = module.params
    try:
        members = check_params(p)
    except KvpoolError:
        # Mask secret values of extra_args (--auth-token=...) wherever fail_json would echo them.
        module.no_log_values.update(_secrets.secret_values(p['extra_args']))
        raise
    tls = bool(p['peer_cert_file'])
    endpoints = [format_host_port(m['address'], m['client_port']) for m in members]
    own = 'http://%s' % format_host_port(probe_host(p['address']), p['client_port'])
    result = dict(changed=False, endpoint=own, endpoints=endpoints, ready_seconds=None, argv=[])
    argv = []
    if p['state'] != 'stopped':
        for path, what in ((p['binary'], 'binary'), (p['etcdctl'], 'etcdctl')):
            if not module.check_mode and not _is_executable(path):
                raise ServiceError('%s not found at %s (%s). Install etcd (role ascend.kvpool.kvpool_etcd with '
                                   'kvpool_etcd_install_method=package does: Debian/Ubuntu etcd-server and '
                                   'etcd-client) or set %s to its path.' % (what, path, what, what), result=result)
        state = 'new' if p['initial_cluster_state'] == 'auto' else p['initial_cluster_state']
        argv = _etcd.build_etcd_argv(p['binary'], dict(p, listen_localhost=True, initial_cluster_state=state),
                                     members)
        argv = _initial_flags(module, p, members, endpoints, argv, result)
    result['argv'] = argv
    spec = spec_for(p, result, UNIT, 'etcd member %s of the Mooncake HA masters (ascend.kvpool)' % p['name'],
                    argv or ['/bin/true'], env=_validate.environment(p['env'], 'env'),
                    owner='ascend.kvpool.etcd_member', devices=[], port=p['client_port'])
    seen = {'problem': '', 'deadline': time.monotonic() + p['ready_timeout']}

    def own_health():
        status, body = http_status(own + '/health', timeout=max(0.2, min(1.0, seen['deadline'] - time.monotonic())))
        if status != 200 or '"true"' not in (body or ''):
            seen['problem'] = 'GET %s/health answered %s %s (no quorum yet?)' % (
                own, status or 'nothing', (body or '').strip()[:120])
            return False
        return True

    def cluster_ok():
        answers = []
        for args in (('endpoint', 'health'), ('member', 'list'), ('endpoint', 'status')):
            rc, out, err = _etcdctl(module, p, endpoints if args != ('member', 'list') else [endpoints[0]], *args,
                                    timeout=seen['deadline'] - time.monotonic())
            answers.append((rc, out, err))
        try:
            health = _etcd.parse_endpoint_health(answers[0][1])
            listed = _etcd.parse_member_list(answers[1][1])
        except (ValueError, TypeError, AttributeError) as exc:
            seen['problem'] = 'etcdctl: %s %s' % (exc, ' '.join(a[2].strip() for a in answers)[:300])
            return False
        try:  # with a member down etcdctl exits 1 and still prints the others' status
            status = _etcd.parse_endpoint_status(answers[2][1])
        except (ValueError, TypeError, AttributeError) as exc:
            # Never "no leader to compare": an answer that cannot be read leaves the leader unchecked.
            seen['problem'] = 'etcdctl endpoint status: %s %s' % (exc, answers[2][2].strip()[:300])
            return False
        result['cluster'] = listed
        result['leader'] = _etcd.leader_name(listed, status)
        seen['problem'] = _etcd.cluster_problem(members, health, listed, status, tls)
        return not seen['problem']

    def gate():
        seen['deadline'] = time.monotonic() + p['ready_timeout']
        return [('GET %s/health -> {"health":"true"}' % own, own_health)]

    def peer_gate():
        seen['deadline'] = time.monotonic() + p['ready_timeout']  # no etcdctl runs past the gate's ready_timeout
        return [('etcdctl: every member healthy, listed, one leader', cluster_ok)]

    def explain(log):
        if 'ETCD_UNSUPPORTED_ARCH' in (log or ''):
            seen['problem'] = ('etcd 3.4 refuses this architecture: set env ETCD_UNSUPPORTED_ARCH=arm64 '
                               '(kvpool_etcd_environment) or use etcd 3.5 or later')
        lines = [x for x in (log or '').splitlines() if '"level":"fatal"' in x or '"level":"error"' in x
                 or ' C | ' in x or ' E | ' in x]
        return '; '.join([x for x in (seen['problem'], lines[-1].strip()[:300] if lines else '') if x])

    return lifecycle_for(module, backend_for(module, None), 'etcd member %s' % p['name']).ensure(
        spec, p['state'], result, gate, explain=explain, peer_gate=peer_gate,
        port_taken=lambda: tcp_open(probe_host(p['address']), p['client_port'], timeout=0.5))


def _initial_flags(module, p, members, endpoints, argv, result):
    """``argv`` with the ``--initial-cluster*`` values this member starts with (module option
    ``initial_cluster_state``); ``etcdctl member add`` for a member that joins a running cluster. Sets RV join."""
    if p['initial_cluster_state'] != 'auto':
        result['join'] = dict(action='given', reason='initial_cluster_state=%s' % p['initial_cluster_state'])
        return argv
    own_peer = _etcd.peer_url(p['address'], p['peer_port'], bool(p['peer_cert_file']))
    if os.path.isdir(os.path.join(p['data_dir'], 'member')):
        _check_own_peer_url(module, p, endpoints, own_peer, result)
        unit_text = read_text('%s/%s.service' % (UNIT_DIR, UNIT)) or ''
        # Only the flags of the collection's own unit (its header); any other file there fails the engine's plan.
        installed = _etcd.installed_initial_flags(unit_text) if unit_text.startswith(OWN_MARK) else {}
        result['join'] = dict(action='kept', reason='%s holds a member: etcd reads no --initial-* flag, the installed '
                                                    'unit\'s are kept' % p['data_dir'])
        return _etcd.with_initial_flags(argv, installed) if installed else argv
    others = [e for m, e in zip(members, endpoints) if m['name'] != p['name']]
    listed = _member_list(module, p, others) if others else None
    action, member_id = _etcd.join_decision(p['name'], own_peer, listed)
    who = ', '.join(m['name'] or m['id'] for m in listed or [])
    remove = 'ETCDCTL_API=3 etcdctl --endpoints=%s member remove %s' % (','.join(others), member_id)
    if action in ('lost', 'taken', 'renamed'):
        why = {
            'lost': 'the etcd cluster (%s) lists %s as a started member, but %s holds no member: its data was lost (a '
                    'replaced disk or node) and the cluster refuses it. Remove it (%s), then run again: it is added '
                    'back. If kvpool_etcd_data_dir was changed, move the data there instead.'
                    % (who, p['name'], p['data_dir'], remove),
            'taken': 'the etcd cluster (%s) has a started member %s at this member\'s peer URL %s: give this host '
                     'its own kvpool_etcd_address, or remove that member (%s)' % (who, member_id, own_peer, remove),
            'renamed': 'the etcd cluster (%s) has a member %s (%s) at another peer URL than %s: update it '
                       '(etcdctl member update %s --peer-urls=%s) or remove it (%s)'
                       % (who, p['name'], member_id, own_peer, member_id, own_peer, remove),
        }[action]
        raise ServiceError('etcd member %s: %s' % (p['name'], why), result=result)
    if action == 'new':
        result['join'] = dict(action='new', reason='no other member answers: a static bootstrap with the group'
                              if listed is None else 'listed in the bootstrap of the group, not started yet')
        return argv
    if action == 'add':
        result['join'] = dict(action='added', reason='the cluster of %s does not list %s: etcdctl member add, then '
                                                     'existing' % (who, p['name']))
        if module.check_mode:
            return _etcd.with_initial_flags(argv, {'--initial-cluster-state': 'existing'})
        listed = _member_add(module, p, others, own_peer, result)
    else:
        result['join'] = dict(action='existing', reason='added to the cluster of %s, not started yet' % who)
    return _etcd.with_initial_flags(argv, {
        '--initial-cluster': _etcd.joined_initial_cluster(listed, members, p['name'], own_peer),
        '--initial-cluster-state': 'existing'})


# Seconds for the TCP connection to each member's client port after etcdctl reached none (quorum lost or down?).
MEMBER_CONNECT_TIMEOUT = 1.0
# Seconds a member list that got no answer from members that accept connections is asked again (a leader being
# elected: etcd's election timeout is 1 s here) before the members are taken to lack a quorum.
QUORUM_GRACE = 6.0

# What etcdctl (3.4, 3.5) prints when no endpoint answers: the dial or the request ran out of time, or was refused.
UNREACHABLE = ('context deadline exceeded', 'deadlineexceeded', 'connection refused', 'no route to host',
               'i/o timeout', 'code = unavailable', 'error while dialing', 'no such host', 'network is unreachable',
               # _runner.execute's words for an etcdctl killed at our timeout (it hung: no answer either)
               'timed out after')


def _member_list(module, p, endpoints):
    """The members that etcd at ``endpoints`` lists (``parse_member_list``), None when none of them answers (etcdctl
    says it could not reach them, and none accepts a TCP connection: ``_require_no_member_up``). Any other failure,
    and an answer that is not a member list (whatever the exit code), is a ServiceError naming etcdctl: never "no
    other member answers", which would bootstrap a second cluster."""
    command = 'ETCDCTL_API=3 %s --endpoints=%s member list -w json' % (p['etcdctl'], ','.join(endpoints))
    rc, out, err = _etcdctl(module, p, endpoints, 'member', 'list')
    said = (err or out or '').strip()
    if rc != 0 and _unreachable(said):
        up = [e for e in endpoints if try_connect(e, MEMBER_CONNECT_TIMEOUT)['ok']]
        # Members that accept connections and answer endpoint status ran a cluster; they may be electing its leader
        # right now (the members of a first deploy started in parallel: refused once on the mock cluster when asked
        # at that moment), so the list is asked again for QUORUM_GRACE s before a missing quorum is concluded.
        deadline = time.monotonic() + QUORUM_GRACE
        while up and time.monotonic() < deadline and _served_a_cluster(p, up):
            time.sleep(0.5)
            rc, out, err = _etcdctl(module, p, endpoints, 'member', 'list')
            said = (err or out or '').strip()
            if rc == 0 or not _unreachable(said):
                break
        if rc != 0 and _unreachable(said):
            _require_no_member_up(p, endpoints, command, said, up)
            return None
    if rc != 0:
        raise ServiceError('etcd member %s: `%s` failed (rc %s): %s. Whether the other members run a cluster is '
                           'unknown, so nothing was changed. Fix: run it on the node and repair etcdctl (the etcdctl '
                           'option) or the members it names' % (p['name'], command, rc, said[-300:] or 'no output'))
    try:
        return _etcd.parse_member_list(out)
    except (ValueError, TypeError, AttributeError) as exc:  # TypeError: an ID or URL list of the wrong type
        raise ServiceError('etcd member %s: `%s` exited 0 but its answer is not a member list (%s). Whether the other '
                           'members run a cluster is unknown, so nothing was changed. Fix: check that the etcdctl '
                           'option names etcd\'s etcdctl (3.4 or later) and that the endpoints are etcd client URLs'
                           % (p['name'], command, exc)) from exc


def _unreachable(said):
    return any(word in said.lower() for word in UNREACHABLE)


def _require_no_member_up(p, endpoints, command, said, up=None):
    """After etcdctl said it reached no endpoint: nothing when no endpoint accepts a TCP connection either (none
    runs: a first deploy). etcdctl says "context deadline exceeded" too when the members run but have no quorum (the
    member list is linearizable: it needs a leader); then a member that accepts connections is a ServiceError naming
    it, never "no other member answers", which would bootstrap a new cluster beside the live one."""
    if up is None:
        up = [e for e in endpoints if try_connect(e, MEMBER_CONNECT_TIMEOUT)['ok']]
    if up and not _served_a_cluster(p, up):
        # They accept connections but answer no request: etcd serves clients only once its member is ready (it has
        # reached a leader), so these members are starting in the same bootstrap as this one (a first deploy, the
        # members started in parallel) and wait for it: the static bootstrap with the group stays right.
        return
    if up:
        raise ServiceError('etcd member %s: `%s` got no answer (%s), but %s accept%s TCP connections: the members run '
                           'and do not answer, most likely for want of a quorum (a member list needs a leader), so '
                           'whether they run a cluster is unknown and nothing was changed (no new cluster is '
                           'bootstrapped beside a live one). Fix: restore the quorum first (start the stopped '
                           'members: kvpool-etcd.service on their hosts; `ETCDCTL_API=3 etcdctl --endpoints=%s '
                           'endpoint status` shows the leader), then run again; do not set initial_cluster_state=new'
                           % (p['name'], command, said.splitlines()[-1][:200] if said else 'no output',
                              ', '.join(up), 's' if len(up) == 1 else '', ','.join(endpoints)))


def _served_a_cluster(p, up):
    """Whether a member at ``up`` answers ``etcdctl endpoint status`` (served locally, without a leader): etcd answers
    clients only after its member was ready once, in a cluster with a leader, so an answer means a cluster that ran
    and lost its quorum; members still in their first bootstrap accept connections and answer nothing."""
    dummy, out, dummy_err = _etcdctl(None, p, up, 'endpoint', 'status')
    try:
        return bool(_etcd.parse_endpoint_status(out)) if (out or '').strip() else False
    except (ValueError, TypeError, AttributeError):
        return False


def _check_own_peer_url(module, p, endpoints, own_peer, result):
    """A member with data whose peer URL the cluster lists otherwise (http against https, another address or port):
    restarted with the new one it would not reach its peers, so the task fails before anything changes. Nothing is
    checked when no member answers (etcdctl says it reached none); any other failure of the read fails the task."""
    mine = [m for m in _member_list(module, p, endpoints) or [] if m['name'] == p['name']]
    if mine and mine[0]['peer_urls'] and own_peer not in mine[0]['peer_urls']:
        raise ServiceError('etcd member %s: the cluster lists it with the peer URL %s, but this run gives it %s '
                           '(peer TLS, kvpool_etcd_address or kvpool_etcd_peer_port changed): restarted so, it would '
                           'not reach its peers. Nothing was changed. Change the peer URL of one member at a time '
                           '(ETCDCTL_API=3 etcdctl --endpoints=%s member update %s --peer-urls=%s, then run with the '
                           'new settings for that host) or start a new cluster (docs/ha.md, TLS).'
                           % (p['name'], ','.join(mine[0]['peer_urls']), own_peer, ','.join(endpoints),
                              mine[0]['id'], own_peer), result=result)


def _member_add(module, p, others, own_peer, result):
    """``etcdctl member add`` of this member, retried while the cluster refuses it for want of started members
    (another member joining at the same time) for at most ``ready_timeout``; returns the member list after it."""
    deadline = time.monotonic() + p['ready_timeout']
    while True:
        rc, out, err = _etcdctl(module, p, others, 'member', 'add', p['name'], '--peer-urls=%s' % own_peer,
                                timeout=deadline - time.monotonic())
        if rc == 0:
            try:
                return _etcd.parse_member_add(out)
            except (ValueError, TypeError, AttributeError) as exc:
                raise ServiceError('etcd member %s: etcdctl member add answered %s' % (p['name'], exc),
                                   result=result) from exc
        if 'already exists' in (err or '') or time.monotonic() >= deadline:
            raise ServiceError('etcd member %s: etcdctl --endpoints=%s member add %s --peer-urls=%s failed for '
                               '%.0f s: %s' % (p['name'], ','.join(others), p['name'], own_peer,
                                               p['ready_timeout'], (err or out).strip()[-300:]), result=result)
        time.sleep(max(0.2, p['poll_interval']))


def _is_executable(path):
    return os.path.isfile(path) and os.access(path, os.X_OK)


if __name__ == '__main__':
    main()
