# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""etcd for the Mooncake HA masters: the member's command line and the judgement of ``etcdctl`` answers (pure
functions; no I/O, Python 3.8).

- A static bootstrap (https://etcd.io/docs/v3.4/op-guide/clustering/): every member is given the whole
  ``--initial-cluster`` and ``--initial-cluster-state new``. etcd reads the ``--initial-*`` flags only while its data
  directory holds no member, so the same command line serves the first start and every restart after it.
- Client URLs are plain ``http``: Mooncake's etcd client (go.etcd.io/etcd/client/v3 in mooncake-common/etcd) has no
  TLS and no auth. Peer traffic may use TLS (``peer_tls``).
- ``etcdctl ... -w json`` answers, as etcd 3.4.23 prints them (recorded on the mock cluster):
  ``endpoint health`` a list of ``{endpoint, health, took[, error]}``; ``member list`` ``{header, members: [{ID,
  name, peerURLs, clientURLs}]}``; ``endpoint status`` a list of ``{Endpoint, Status: {header: {member_id}, leader,
  version}}``.
"""

from __future__ import absolute_import, division, print_function

import base64
import json

from ansible_collections.ascend.kvpool.plugins.module_utils import _shared
from ansible_collections.ascend.kvpool.plugins.module_utils._shared import format_host_port, is_loopback

__metaclass__ = type

NAME_RE = _shared.NAME_RE


def peer_url(address, port, tls=False):
    return '%s://%s' % ('https' if tls else 'http', format_host_port(address, port))


def client_url(address, port):
    return 'http://%s' % format_host_port(address, port)


def quorum(size):
    """Members that must be up for the cluster to accept writes."""
    return size // 2 + 1


def members_problem(members):
    """'' when ``members`` (dicts of name, address, peer_port) make a cluster, else what is wrong and the fix."""
    if not members:
        return 'no etcd members: put the etcd hosts in the etcd group'
    names = [m.get('name') for m in members]
    for name in names:
        if not NAME_RE.match(str(name or '')):
            return ('etcd member name %r: use letters, digits, ".", "_" and "-" (kvpool_etcd_name, default the '
                    'inventory name)' % (name,))
    dup = sorted(set(n for n in names if names.count(n) > 1))
    if dup:
        return 'etcd member names are not unique: %s (set kvpool_etcd_name per host)' % ', '.join(dup)
    peers = ['%s:%s' % (m.get('address'), m.get('peer_port')) for m in members]
    dup = sorted(set(p for p in peers if peers.count(p) > 1))
    if dup:
        return ('two etcd members share the peer address %s: give each host its own address (kvpool_etcd_address, '
                'default ansible_host)' % ', '.join(dup))
    for m in members:
        if not str(m.get('address') or '').strip():
            return 'etcd member %s has no address (kvpool_etcd_address, default ansible_host)' % m.get('name')
        problem = _shared.address_problem(m.get('address'))
        if problem or _shared.is_wildcard(m.get('address')):
            return ('etcd member %s has the address %r, which %s: give the member\'s own address alone '
                    '(kvpool_etcd_address, default ansible_host; the ports are kvpool_etcd_peer_port and '
                    'kvpool_etcd_client_port)' % (m.get('name'), str(m.get('address')),
                                                  'has %s' % problem if problem else 'means every address'))
        for key in ('peer_port', 'client_port'):
            if key in m and not _shared.is_port(m[key]):
                return ('etcd member %s has %s %r, which is not a TCP port 1-65535 (kvpool_etcd_%s)'
                        % (m.get('name'), key, m[key], key))
    return ''


def initial_cluster(members, tls=False):
    """The ``--initial-cluster`` value: ``name=peer-url,...`` in the order given."""
    return ','.join('%s=%s' % (m['name'], peer_url(m['address'], m['peer_port'], tls)) for m in members)


def build_etcd_argv(binary, p, members):
    """The member's command line (a list) from the module's options ``p`` and the whole cluster's ``members``."""
    tls = bool(p.get('peer_cert_file'))
    me = peer_url(p['address'], p['peer_port'], tls)
    client = client_url(p['address'], p['client_port'])
    listen_client = [client]
    if p.get('listen_localhost', True) and not is_loopback(p['address']):
        listen_client.append(client_url('127.0.0.1', p['client_port']))
    argv = [str(binary),
            '--name=%s' % p['name'],
            '--data-dir=%s' % p['data_dir'],
            '--listen-peer-urls=%s' % me,
            '--initial-advertise-peer-urls=%s' % me,
            '--listen-client-urls=%s' % ','.join(listen_client),
            '--advertise-client-urls=%s' % client,
            '--initial-cluster=%s' % initial_cluster(members, tls),
            '--initial-cluster-token=%s' % p['cluster_token'],
            '--initial-cluster-state=%s' % p.get('initial_cluster_state', 'new'),
            '--heartbeat-interval=%d' % int(p['heartbeat_interval']),
            '--election-timeout=%d' % int(p['election_timeout']),
            '--auto-compaction-retention=%s' % p['auto_compaction_retention']]
    if p.get('metrics_port'):
        argv.append('--listen-metrics-urls=%s' % client_url(p['address'], p['metrics_port']))
    if tls:
        argv += ['--peer-cert-file=%s' % p['peer_cert_file'], '--peer-key-file=%s' % p['peer_key_file'],
                 '--peer-trusted-ca-file=%s' % p['peer_trusted_ca_file'], '--peer-client-cert-auth=true']
    argv.extend(str(a) for a in p.get('extra_args') or [])
    return argv


MANAGED_FLAGS = ('--name', '--data-dir', '--listen-peer-urls', '--initial-advertise-peer-urls',
                 '--listen-client-urls', '--advertise-client-urls', '--initial-cluster', '--initial-cluster-token',
                 '--initial-cluster-state', '--listen-metrics-urls', '--client-cert-auth', '--cert-file',
                 '--key-file', '--auth-token',
                 # written from the module's options (a second value would silently override the option's)
                 '--heartbeat-interval', '--election-timeout', '--auto-compaction-retention', '--peer-cert-file',
                 '--peer-key-file', '--peer-trusted-ca-file', '--peer-client-cert-auth', '--peer-auto-tls',
                 # client TLS in any form (Mooncake's etcd client has none): etcd 3.4 and 3.5 flags
                 '--auto-tls', '--trusted-ca-file', '--client-crl-file', '--client-cert-allowed-hostname',
                 '--client-cert-file', '--client-key-file', '--listen-client-http-urls', '--auth-token-ttl')


def managed_flag_in(extra_args):
    """``(arg, flag)`` of the first extra argument that sets a flag the module writes (or client TLS/auth, which
    Mooncake's etcd client cannot use), else None. etcd's flags are Go flags: ``-flag`` and ``--flag`` are the
    same, a value after ``=`` or as the next word, and no abbreviation."""
    for arg in extra_args or []:
        flag = str(arg).split('=', 1)[0].strip()
        if flag.startswith('-') and not flag.startswith('--'):
            flag = '-' + flag
        if flag in MANAGED_FLAGS:
            return arg, flag
    return None


def managed_env_in(env):
    """``(name, flag)`` of the first environment variable that sets a flag :func:`managed_flag_in` refuses (etcd
    reads every flag from ``ETCD_<FLAG>`` too, e.g. ``ETCD_AUTO_TLS`` for ``--auto-tls``), else None."""
    names = dict(('ETCD_' + flag[2:].upper().replace('-', '_'), flag) for flag in MANAGED_FLAGS)
    for name in sorted(str(k) for k in (env or {})):
        if name in names:
            return name, names[name]
    return None


def _load(text, what):
    """The JSON of an answer; ValueError for anything else (not text, not JSON, nested beyond reading)."""
    if isinstance(text, bytes):
        text = text.decode('utf-8', 'replace')
    if not isinstance(text, str):
        raise ValueError('%s: no answer (%s)' % (what, type(text).__name__))
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ValueError('%s: not JSON: %r' % (what, text[:200])) from exc


def _uint(value, what):
    """An etcd id or number of an answer (a JSON number, or its digits as text, as the gateway writes uint64);
    ValueError naming ``what`` for anything else."""
    if value is None:
        return 0
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError('%s is %r, not an id' % (what, value))
    return value


def _urls(value, what):
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(u, str) for u in value):
        raise ValueError('%s is %r, not a list of URLs' % (what, value))
    return sorted(value)


def parse_endpoint_health(text):
    """``etcdctl endpoint health -w json`` -> ``[{endpoint, health (bool), error}]``."""
    data = _load(text, 'endpoint health')
    if not isinstance(data, list):
        raise ValueError('endpoint health: expected a list, got %s' % type(data).__name__)
    out = []
    for item in data:
        if not isinstance(item, dict) or 'endpoint' not in item:
            raise ValueError('endpoint health: an entry without endpoint: %r' % (item,))
        out.append({'endpoint': str(item['endpoint']), 'health': item.get('health') is True,
                    'error': str(item.get('error') or '')})
    return out


def parse_member_list(text):
    """``etcdctl member list -w json`` -> ``[{id, name, peer_urls, client_urls}]`` (a member added but not yet
    started has an empty name)."""
    data = _load(text, 'member list')
    if not isinstance(data, dict) or not isinstance(data.get('members'), list):
        raise ValueError('member list: expected an object with members, got %r' % (text or '')[:200])
    out = []
    for m in data['members']:
        if not isinstance(m, dict):
            raise ValueError('member list: a member is not an object: %r' % (m,))
        name = m.get('name')
        if name is not None and not isinstance(name, str):
            raise ValueError('member list: a member\'s name is %r, not text' % (name,))
        out.append({'id': '%x' % _uint(m.get('ID'), 'member list: ID'), 'name': name or '',
                    'peer_urls': _urls(m.get('peerURLs'), 'member list: peerURLs'),
                    'client_urls': _urls(m.get('clientURLs'), 'member list: clientURLs')})
    return out


def parse_endpoint_status(text):
    """``etcdctl endpoint status -w json`` -> ``[{endpoint, member_id, leader, version}]`` (ids in hex, as etcdctl's
    table shows them)."""
    data = _load(text, 'endpoint status')
    if not isinstance(data, list):
        raise ValueError('endpoint status: expected a list, got %s' % type(data).__name__)
    out = []
    for item in data:
        status = item.get('Status') if isinstance(item, dict) else None
        if not isinstance(status, dict):
            raise ValueError('endpoint status: an entry without Status: %r' % (item,))
        header = status.get('header') or {}
        if not isinstance(header, dict):
            raise ValueError('endpoint status: a header that is not an object: %r' % (header,))
        out.append({'endpoint': str(item.get('Endpoint') or ''),
                    'member_id': '%x' % _uint(header.get('member_id'), 'endpoint status: member_id'),
                    'leader': '%x' % _uint(status.get('leader'), 'endpoint status: leader'),
                    'version': str(status.get('version') or '')})
    return out


def cluster_problem(members, health, listed, status, tls=False):
    """'' when the cluster is what ``members`` says and healthy, else what is wrong, naming the members:
    every endpoint healthy, the member list exactly the members (names and peer URLs), one leader for all."""
    want = dict((m['name'], peer_url(m['address'], m['peer_port'], tls)) for m in members)
    problems = []
    sick = ['%s%s' % (h['endpoint'], (' (%s)' % h['error']) if h['error'] else '') for h in health if not h['health']]
    if sick:
        problems.append('not healthy: %s' % ', '.join(sick))
    seen = dict((m['name'] or '(unstarted %s)' % ','.join(m['peer_urls']), m['peer_urls']) for m in listed)
    missing = sorted(n for n in want if n not in seen)
    if missing:
        problems.append('not in the member list: %s' % ', '.join(missing))
    extra = sorted(n for n in seen if n not in want)
    if extra:
        problems.append('in the member list but not in the etcd group: %s (remove it with etcdctl member remove '
                        '<ID> if the host is gone)' % ', '.join(extra))
    wrong = sorted(n for n in want if n in seen and seen[n] != [want[n]])
    if wrong:
        pairs = ['%s has %s, wanted %s' % (n, ','.join(seen[n]), want[n]) for n in wrong]
        problems.append('peer URL differs: %s' % ', '.join(pairs))
    leaders = sorted(set(s['leader'] for s in status if s['leader'] != '0'))
    if status and len(leaders) != 1:
        problems.append('members disagree on the leader: %s' % (', '.join(leaders) or 'none'))
    return '; '.join(problems)


def leader_name(listed, status):
    """Name of the etcd leader from the member list and the endpoint status, '' when unknown."""
    ids = set(s['leader'] for s in status)
    for m in listed:
        if m['id'] in ids:
            return m['name']
    return ''


# Mooncake's leader key (mooncake-store include/master_config.h): the leader writes its RPC address there under an
# etcd lease; clients read it to find the master. The cluster id is the master's --cluster_id and the store clients'
# MC_STORE_CLUSTER_ID: the pool's kvpool_cluster_id with HA masters; this is Mooncake's default.
DEFAULT_CLUSTER_ID = 'mooncake_cluster'


def master_view_key(cluster_id=DEFAULT_CLUSTER_ID):
    return 'mooncake-store/%s/master_view' % cluster_id


def range_request(key):
    """The body of etcd's HTTP gateway ``POST /v3/kv/range`` for one key (keys and values are base64 there)."""
    return {'key': base64.b64encode(key.encode('utf-8')).decode('ascii')}


def parse_range_value(text):
    """The value of the first key of a ``/v3/kv/range`` answer, '' when there is none; ValueError when the answer
    is not one."""
    data = _load(text, 'kv range')
    if not isinstance(data, dict) or 'header' not in data:
        raise ValueError('kv range: not an etcd answer: %r' % (text or '')[:200])
    kvs = data.get('kvs') or []
    if not isinstance(kvs, list) or not all(isinstance(kv, dict) for kv in kvs):
        # a peer's garbage (an object, a string) is no answer: never KeyError: 0
        raise ValueError('kv range: kvs is %r, not a list of keys and values' % (kvs,))
    if not kvs:
        return ''
    value = kvs[0].get('value') or ''
    if not isinstance(value, str):
        raise ValueError('kv range: value is %r, not base64 text' % (value,))
    try:
        return base64.b64decode(value, validate=True).decode('utf-8', 'replace')
    except (TypeError, ValueError) as exc:
        raise ValueError('kv range: value is not base64: %s' % exc) from exc


# --- the masters' OpLog namespace (Mooncake 0.3.13 on, --enable_oplog) ------------------------------------------
# Recorded from the real 0.3.13.post1 master: its log is /oplog/<cluster id>/batches/<20 digits> and
# /oplog/<cluster id>/durable_prefix ({"batch_id": .., "last_seq": .., "schema_version": 1}). The older per-entry
# format (/oplog/<cluster id>/<20 digits> and /oplog/<cluster id>/latest) makes it abort ~5 s after its start
# ("Legacy OpLog latest key exists for cluster=X" / "Legacy per-entry OpLog key exists ..."); upstream's fix deletes
# the namespace, which loses the log.
def oplog_prefix(cluster_id):
    return '/oplog/%s/' % cluster_id


def prefix_range_end(prefix):
    """etcd's ``range_end`` that makes a range of every key starting with ``prefix``: its last byte plus one."""
    raw = bytearray(prefix.encode('utf-8'))
    while raw and raw[-1] == 0xff:
        raw.pop()
    if not raw:
        return b'\0'
    raw[-1] += 1
    return bytes(raw)


def _b64(raw):
    return base64.b64encode(raw if isinstance(raw, bytes) else raw.encode('utf-8')).decode('ascii')


def prefix_range_request(prefix, limit=0):
    """The body of ``POST /v3/kv/range`` for the keys (only) under ``prefix``."""
    body = {'key': _b64(prefix), 'range_end': _b64(prefix_range_end(prefix)), 'keys_only': True}
    if limit:
        body['limit'] = int(limit)
    return body


def parse_range_keys(text):
    """The keys of a ``/v3/kv/range`` answer, and its ``count`` (all keys in the range, beyond a limit);
    ValueError when the answer is not one."""
    data = _load(text, 'kv range')
    if not isinstance(data, dict) or 'header' not in data:
        raise ValueError('kv range: not an etcd answer: %r' % (text or '')[:200])
    kvs = data.get('kvs') or []
    if not isinstance(kvs, list) or not all(isinstance(kv, dict) for kv in kvs):
        raise ValueError('kv range: kvs is %r, not a list of keys' % (kvs,))
    keys = []
    for kv in kvs:
        try:
            keys.append(base64.b64decode(str(kv.get('key') or ''), validate=True).decode('utf-8', 'replace'))
        except (TypeError, ValueError) as exc:
            raise ValueError('kv range: a key is not base64: %s' % exc) from exc
    return keys, _uint(data.get('count', len(keys)), 'kv range count')


def _digits(text):
    return bool(text) and all(c in '0123456789' for c in text)


def oplog_format(cluster_id, keys):
    """``(format, legacy keys)`` of the keys under :func:`oplog_prefix`: ``empty``, ``batch`` (0.3.13's) or
    ``legacy`` (the per-entry format the 0.3.13 master refuses: ``latest`` or 20-digit entries directly there)."""
    prefix = oplog_prefix(cluster_id)
    legacy = [k for k in keys if k.startswith(prefix) and (k[len(prefix):] == 'latest' or _digits(k[len(prefix):]))]
    if legacy:
        return 'legacy', legacy
    return ('batch' if any(k.startswith(prefix) for k in keys) else 'empty'), []


def legacy_oplog_delete_txn(cluster_id):
    """The body of ``POST /v3/kv/txn`` that deletes the namespace only while it holds no log of the new format (its
    ``durable_prefix`` key absent): two masters' tasks that ask at once, or one that asks after a new master
    started, never delete a new log."""
    prefix = oplog_prefix(cluster_id)
    return {'compare': [{'key': _b64(prefix + 'durable_prefix'), 'target': 'CREATE', 'result': 'EQUAL',
                         'create_revision': '0'}],
            'success': [{'request_delete_range': {'key': _b64(prefix), 'range_end': _b64(prefix_range_end(prefix))}}]}


def parse_txn_deleted(text):
    """``(succeeded, keys deleted)`` of a ``/v3/kv/txn`` answer with one delete_range; ValueError when not one."""
    data = _load(text, 'kv txn')
    if not isinstance(data, dict) or 'header' not in data:
        raise ValueError('kv txn: not an etcd answer: %r' % (text or '')[:200])
    deleted = 0
    for resp in data.get('responses') or []:
        if isinstance(resp, dict) and isinstance(resp.get('response_delete_range'), dict):
            deleted += _uint(resp['response_delete_range'].get('deleted', 0), 'kv txn deleted')
    return data.get('succeeded') is True, deleted


def split_etcd_address(address):
    """``['h1:2379', ...]`` of a Mooncake ``etcd://h1:2379;h2:2379`` address (``,`` also separates)."""
    text = str(address or '')
    if not text.startswith('etcd://'):
        raise ValueError('%r is not an etcd:// address' % text)
    return [e.strip() for e in text[len('etcd://'):].replace(',', ';').split(';') if e.strip()]


def quorum_problem(endpoints, healthy):
    """'' when ``healthy`` (the endpoints that answered /health true) is a majority of ``endpoints``, else what is
    wrong, naming the endpoints that did not answer."""
    down = [e for e in endpoints if e not in healthy]
    if len(healthy) >= quorum(len(endpoints)):
        return ''
    return ('only %d of the %d etcd members answer /health as healthy (a majority, %d, is needed); not healthy from '
            'this node: %s' % (len(healthy), len(endpoints), quorum(len(endpoints)), ', '.join(down)))


# --- joining a running cluster ---------------------------------------------------------------------------------
# etcd reads --initial-cluster and --initial-cluster-state only while its data directory holds no member
# (``<data_dir>/member``). A member that has one keeps the values of its installed unit, so a group that grows or
# shrinks restarts no running member for flags etcd would not read. A member without one either bootstraps with the
# group (``new``: nothing of the others answers, a first deploy) or joins the cluster the others already run
# (``existing``, after ``etcdctl member add`` when it is not listed yet).
INITIAL_FLAGS = ('--initial-cluster', '--initial-cluster-state')


def installed_initial_flags(unit_text):
    """``{'--initial-cluster': v, '--initial-cluster-state': v}`` of an installed unit's ExecStart ({} when absent)."""
    out = {}
    logical, lines = [], []
    for line in (unit_text or '').splitlines():  # systemd joins lines that end with a backslash
        lines.append(line[:-1] if line.endswith('\\') else line)
        if not line.endswith('\\'):
            logical.append(' '.join(lines))
            lines = []
    for line in logical + ([' '.join(lines)] if lines else []):
        if not line.startswith('ExecStart='):
            continue
        for word in line[len('ExecStart='):].split():
            word = word.strip('"\'')
            flag, sep, value = word.partition('=')
            if sep and flag in INITIAL_FLAGS and value:
                out[flag] = value
    return out if len(out) == len(INITIAL_FLAGS) else {}


def with_initial_flags(argv, flags):
    """``argv`` with its ``--initial-cluster*`` values replaced by ``flags`` (those etcd no longer reads)."""
    out = []
    for arg in argv:
        flag = arg.split('=', 1)[0]
        out.append('%s=%s' % (flag, flags[flag]) if flag in flags else arg)
    return out


def join_decision(name, own_peer, listed):
    """What a member whose data directory holds no member does, from the member list the OTHER members answered
    (``None`` when none of them answered: no etcd runs there yet). etcd serves ``member list`` from a member's own
    view, without a quorum: during a static bootstrap every member of ``--initial-cluster`` is listed with its name
    and no client URLs until it has started; a member added at run time has no name until it starts.

    Returns ``(action, member_id)``:
    - ``new``: bootstrap with the group (a first deploy, or a member of one that starts late);
    - ``existing``: listed, added at run time and not started: start it with ``existing``;
    - ``add``: not listed: ``etcdctl member add`` first, then ``existing``;
    - ``lost``: listed as a started member of this name: its data was lost, and the cluster refuses it until that
      member is removed (``etcdctl member remove <id>``);
    - ``taken``: its peer URL belongs to a started member of another name;
    - ``renamed``: a started member of this name has another peer URL (``etcdctl member update``)."""
    if listed is None:
        return 'new', ''
    for m in listed:
        if own_peer in m['peer_urls']:
            if m['client_urls']:
                return ('lost' if m['name'] == name else 'taken'), m['id']
            return ('new' if m['name'] else 'existing'), m['id']
    for m in listed:
        if m['name'] == name:
            return 'renamed', m['id']
    return 'add', ''


def joined_initial_cluster(listed, members, name, own_peer):
    """``--initial-cluster`` of a member joining a running cluster: every listed member (an unstarted one named after
    the group's member with its peer URL) and this one."""
    by_peer = dict((peer_url(m['address'], m['peer_port'], own_peer.startswith('https')), m['name']) for m in members)
    pairs = []
    for m in listed:
        for url in m['peer_urls']:
            who = m['name'] or (name if url == own_peer else by_peer.get(url, ''))
            if who:
                pairs.append('%s=%s' % (who, url))
    if not any(p.endswith('=' + own_peer) for p in pairs):
        pairs.append('%s=%s' % (name, own_peer))
    return ','.join(pairs)


def parse_member_add(text):
    """``etcdctl member add ... -w json`` -> the member list after the add (as ``parse_member_list``)."""
    data = _load(text, 'member add')
    if not isinstance(data, dict) or not isinstance(data.get('members'), list):
        raise ValueError('member add: expected an object with members, got %r' % (text or '')[:200])
    return parse_member_list(json.dumps({'members': data['members']}))
