# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Pure helpers for the Mooncake KV pool: mooncake.json sizes, master argv and address, fingerprints, logs.

No I/O here: text and values in, data out, so everything is unit-tested without a node.

Facts used (Mooncake 0.3.x, vllm-ascend):
- ``mooncake_master`` is a gflags program that exits on a flag it does not know. :func:`master_flag_names` gives
  the spelling of each managed setting for the declared Mooncake version, from :data:`FLAG_SPELLINGS`, which was
  checked against the real ``mooncake_master`` of PyPI's ``mooncake-transfer-engine-non-cuda`` 0.3.9,
  0.3.11.post1, 0.3.12.post1 and 0.3.13.post1 (``--helpfull`` and the startup line ``Master service started on
  port ...``; ``tests/mooncake_matrix`` starts each with what the collection renders):
  the thread count is ``--rpc_thread_num`` on every one of them (``--max_threads`` is accepted but capped at the
  host's CPU count), ``--metrics_host`` exists only from 0.3.13, ``--rpc_port`` and
  ``--ha_backend_type=etcd --ha_backend_connstring`` are written from 0.3.12 (``--port`` / ``--etcd_endpoints``
  before, which every release reads). :func:`unsupported_settings` names what a release cannot honour.
- ``mooncake.json`` sizes are bytes; vllm-ascend also reads strings such as ``"100GB"`` (1024-based).
- The master address is ``host:port``, or ``etcd://h1:2379;h2:2379`` when the masters run in HA mode.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import re

from ansible_collections.ascend.kvpool.plugins.module_utils._proc import tail_text as tail_lines  # noqa: F401

KIB = 1024
MIB = 1024 ** 2
GIB = 1024 ** 3
TIB = 1024 ** 4

_UNITS = {
    '': 1, 'B': 1,
    'K': KIB, 'KB': KIB, 'KIB': KIB,
    'M': MIB, 'MB': MIB, 'MIB': MIB,
    'G': GIB, 'GB': GIB, 'GIB': GIB,
    'T': TIB, 'TB': TIB, 'TIB': TIB,
}
_SIZE_RE = re.compile(r'^\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*$')

# Master flags managed by the module, in argv order: (setting name, gflags name).
MASTER_FLAGS = [
    ('port', 'port'),
    ('rpc_address', 'rpc_address'),
    ('metrics_port', 'metrics_port'),
    ('metrics_address', 'metrics_host'),
    ('eviction_high_watermark_ratio', 'eviction_high_watermark_ratio'),
    ('eviction_ratio', 'eviction_ratio'),
    ('max_threads', 'max_threads'),
    ('client_ttl', 'client_ttl'),
    ('default_kv_lease_ttl', 'default_kv_lease_ttl'),
    ('enable_ha', 'enable_ha'),
    ('etcd_endpoints', 'etcd_endpoints'),
    ('cluster_id', 'cluster_id'),
    ('enable_oplog', 'enable_oplog'),
    ('enable_http_metadata_server', 'enable_http_metadata_server'),
]

# From this Mooncake version the master's preferred RPC port and HA spellings are rendered.
NEW_FLAGS_SINCE = (0, 3, 12)
# The first version whose master has --metrics_host (PyPI 0.3.12.post1 refuses it, 0.3.13.post1 lists it).
METRICS_HOST_SINCE = (0, 3, 13)
# The first version whose master has --enable_oplog (HA metadata replicated through etcd, "batch-record OpLog";
# Mooncake commit ff217b8cc after 0.3.12.post1): PyPI's 0.3.13.post1 lists it, 0.3.12.post1 and older do not.
# --cluster_id is in every release from 0.3.9.
OPLOG_SINCE = (0, 3, 13)
# {setting: ((since, gflags name or None), ...)}: the last entry whose ``since`` is at or below the declared version
# applies (``since`` None: every version, and an undeclared one); a None name means the release has no such flag.
# Checked against the real masters of 0.3.9, 0.3.11.post1, 0.3.12.post1, 0.3.13.post1 (tests/mooncake_matrix).
# Settings not listed keep the name of MASTER_FLAGS.
FLAG_SPELLINGS = {
    'port': ((None, 'port'), (NEW_FLAGS_SINCE, 'rpc_port')),
    # --max_threads is min(value, CPU count) in every release; --rpc_thread_num is applied as given.
    'max_threads': ((None, 'rpc_thread_num'),),
    # An undeclared version gets the flag as asked (a release without it names the fix at start).
    'metrics_address': ((None, 'metrics_host'), ((0, 0, 0), None), (METRICS_HOST_SINCE, 'metrics_host')),
    'etcd_endpoints': ((None, 'etcd_endpoints'), (NEW_FLAGS_SINCE, 'ha_backend_connstring')),
    # Left out where the declared release has none (the HA masters then run without it: a failover empties the
    # pool); an undeclared version gets it as asked.
    'enable_oplog': ((None, 'enable_oplog'), ((0, 0, 0), None), (OPLOG_SINCE, 'enable_oplog')),
}
# Defaults of mooncake_master that changed in 0.3.12 (the collection sets its own values where it matters):
# (flag, default through 0.3.11, default from 0.3.12).
CHANGED_DEFAULTS = (
    ('eviction_high_watermark_ratio', 0.95, 0.90),
    ('default_kv_lease_ttl', 5000, 10000),
)
_MC_VERSION_RE = re.compile(r'^\s*v?(\d+)\.(\d+)(?:\.(\d+))?(?:[.-]?(?:post|rc|dev)?\d*)?\s*$')


def parse_mooncake_version(text):
    """(major, minor, patch) of a Mooncake version such as ``v0.3.9``, ``0.3.13.post1``; None for '' or None.

    Raises ValueError for anything else, naming the value."""
    if text is None or str(text).strip() == '':
        return None
    m = _MC_VERSION_RE.match(str(text))
    if not m:
        raise ValueError('%r is not a Mooncake version (expected e.g. 0.3.9 or 0.3.13.post1)' % (text,))
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


def master_flag_names(mooncake_version=None):
    """{setting name: gflags name, or None where the declared release has no such flag} for ``mooncake_version``
    ('' or None: undeclared). ``ha_backend_connstring`` is rendered together with ``--ha_backend_type=etcd`` by
    :func:`build_master_argv`."""
    names = dict(MASTER_FLAGS)
    parsed = parse_mooncake_version(mooncake_version)
    for setting, spellings in FLAG_SPELLINGS.items():
        for since, flag in spellings:
            if since is None or (parsed is not None and parsed >= since):
                names[setting] = flag
    return names


def has_oplog(mooncake_version=None):
    """Whether the master of ``mooncake_version`` has ``--enable_oplog`` (undeclared: assumed, as the flag is then
    rendered as asked)."""
    return master_flag_names(mooncake_version)['enable_oplog'] is not None


def unsupported_settings(settings, mooncake_version=None):
    """[(setting name, warning)] of the ``settings`` (:func:`master_settings`) that the declared release cannot take,
    which :func:`build_master_argv` leaves out; the warning says what happens instead and the fix."""
    names = master_flag_names(mooncake_version)
    out = []
    if settings.get('metrics_address') not in (None, '') and names['metrics_address'] is None:
        out.append(('metrics_address', 'Mooncake %s has no --metrics_host (0.3.13 and later have it): metrics_address '
                    '%s is left out, so the master\'s /metrics and /health server listens on every address of the '
                    'host. Firewall its port, or run Mooncake 0.3.13 or later and declare it (mooncake_version; role: '
                    'mooncake_master_mooncake_version).' % (mooncake_version, settings['metrics_address'])))
    if settings.get('enable_oplog') and names['enable_oplog'] is None:
        out.append(('enable_oplog', 'Mooncake %s has no --enable_oplog (0.3.13 and later have it): the HA masters run '
                    'without the OpLog, so a failover empties the pool\'s metadata (every object is computed again). '
                    'Run Mooncake 0.3.13 or later and declare it (mooncake_version; role: '
                    'mooncake_master_mooncake_version), or turn it off (role: mooncake_master_oplog: false).'
                    % mooncake_version))
    return out


# --- sizes ---------------------------------------------------------------------------------------------------------
def parse_size(value):
    """Bytes of a size given as an int or a string (``107374182400``, ``"100GB"``, ``"100 GiB"``, ``"512M"``).

    Units are 1024-based whatever their spelling (as vllm-ascend reads ``mooncake.json``).
    Raises ValueError with a message naming the value.

    This reads a ``mooncake.json`` that exists, as vllm-ascend reads it, so it is lenient where vllm-ascend is:
    decimals that give whole bytes (``"1.5GB"``, ``2.0``), any case of the unit, spaces around. What the roles take
    as input is checked by ``plugin_utils/sizes.py``'s ``size_bytes`` instead, which is strict on purpose (whole
    numbers only, as the roles always accepted) and takes its multipliers from ``_UNITS`` here, so both read every
    unit the same way.
    """
    if isinstance(value, bool) or value is None:
        raise ValueError('%r is not a size (use bytes or a string like "100GB")' % (value,))
    if isinstance(value, int):
        if value < 0:
            raise ValueError('%r is negative' % (value,))
        return value
    if isinstance(value, float):
        if value < 0 or value != int(value):
            raise ValueError('%r is not a whole number of bytes' % (value,))
        return int(value)
    m = _SIZE_RE.match(str(value))
    if not m:
        raise ValueError('%r is not a size (use bytes or a string like "100GB")' % (value,))
    number, unit = m.group(1), m.group(2).upper()
    if unit not in _UNITS:
        raise ValueError('%r has an unknown unit %r (use B, KB, MB, GB or TB; 1024-based)' % (value, m.group(2)))
    mult = _UNITS[unit]
    if '.' in number:
        whole, frac = number.split('.')
        num = int(whole) * mult + (int(frac) * mult) // (10 ** len(frac))
        if (int(frac) * mult) % (10 ** len(frac)):
            raise ValueError('%r is not a whole number of bytes' % (value,))
        return num
    return int(number) * mult


# --- master address ------------------------------------------------------------------------------------------------
def split_endpoints(endpoints):
    """etcd endpoints from a list or a ``;``/``,`` separated string, stripped, without empties."""
    if endpoints is None:
        return []
    if isinstance(endpoints, (list, tuple)):
        items = endpoints
    else:
        items = re.split(r'[;,]', str(endpoints))
    return [str(e).strip() for e in items if str(e).strip()]


def parse_master_address(address):
    """``(host, port)`` of a ``host:port`` master address, or None for an ``etcd://`` (HA) address."""
    address = str(address or '').strip()
    if not address or address.startswith('etcd://'):
        return None
    m = re.match(r'^\[([^\]]+)\]:(\d+)$', address) or re.match(r'^([^:]+):(\d+)$', address)
    if not m:
        raise ValueError('master_server_address %r is not host:port' % address)
    return m.group(1), int(m.group(2))


# --- master argv and fingerprint -------------------------------------------------------------------------------------
def format_flag_value(value):
    if isinstance(value, bool):
        return 'true' if value else 'false'
    if isinstance(value, float):
        text = ('%.6f' % value).rstrip('0').rstrip('.')
        return text if text else '0'
    if isinstance(value, (list, tuple)):
        return ';'.join(str(v) for v in value)
    return str(value)


def master_settings(params):
    """The effective master settings (name -> value) of module params: unset and off switches dropped."""
    out = {}
    for name in (flag[0] for flag in MASTER_FLAGS):
        val = params.get(name)
        if val is None:
            continue
        if name in ('enable_ha', 'enable_http_metadata_server', 'enable_oplog'):
            if not val:
                continue
        if name in ('cluster_id', 'enable_oplog') and not params.get('enable_ha'):
            continue  # the HA masters' settings: a master without HA has no leader key nor log
        if name == 'cluster_id' and not str(val).strip():
            continue
        if name in ('rpc_address', 'metrics_address') and not str(val).strip():
            continue
        if name == 'etcd_endpoints':
            if not params.get('enable_ha'):
                continue
            val = split_endpoints(val)
            if not val:
                continue
        out[name] = val
    return out


def build_master_argv(binary, settings, extra_args=None, mooncake_version=None):
    """``[binary, --flag=value, ...] + extra_args`` in a stable order, spelled for ``mooncake_version``
    (:func:`master_flag_names`); a setting the release has no flag for is left out (:func:`unsupported_settings`
    says which)."""
    names = master_flag_names(mooncake_version)
    argv = [str(binary)]
    for name, _legacy in MASTER_FLAGS:
        if name in settings and names[name]:
            if names[name] == 'ha_backend_connstring':
                argv.append('--ha_backend_type=etcd')
            argv.append('--%s=%s' % (names[name], format_flag_value(settings[name])))
    argv.extend(str(a) for a in (extra_args or []))
    return argv


def fingerprint(argv):
    """sha256 of an argv: changes exactly when a flag, its value, the order of extra args or the binary does."""
    return hashlib.sha256(json.dumps([str(a) for a in argv], separators=(',', ':')).encode('utf-8')).hexdigest()


def settings_text(argv):
    """An argv as diff-friendly text: the binary, then one flag per line."""
    if not argv:
        return 'state: stopped\n'
    lines = ['state: running', 'binary: %s' % argv[0]]
    lines.extend('  %s' % a for a in argv[1:])
    return '\n'.join(lines) + '\n'


# --- logs ----------------------------------------------------------------------------------------------------------
_GLOG_ERROR = re.compile(r'^[EF]\d{4} ')
_GLOG_INFO = re.compile(r'^I\d{4} ')


def log_excerpt(text, lines=20, max_chars=4000):
    """The last ``lines`` lines of a glog text without its INFO lines (warnings, errors and plain output)."""
    if isinstance(text, bytes):
        text = text.decode('utf-8', 'replace')
    kept = [line for line in (text or '').splitlines()
            if not _GLOG_INFO.match(line) and not line.startswith('WARNING: Logging before InitGoogleLogging')]
    return tail_lines('\n'.join(kept), lines, max_chars)


def log_errors(text, limit=5):
    """The glog ERROR/FATAL lines (``E1129 ...``, ``F1129 ...``) and gflags' own errors (``ERROR: unknown command
    line flag 'x'``) of a log, last ``limit`` of them."""
    if isinstance(text, bytes):
        text = text.decode('utf-8', 'replace')
    found = [line for line in (text or '').splitlines()
             if _GLOG_ERROR.match(line) or 'Check failed' in line or line.startswith('ERROR: ')]
    return found[-limit:]


# Flags the module writes that not every Mooncake release knows: what to do when the master rejects one.
_NEWER_FLAGS = {
    'metrics_host': 'This Mooncake release has no --metrics_host (0.3.13 and later have it): declare the version '
                    'that runs (mooncake_version; role: mooncake_master_mooncake_version, e.g. "0.3.11.post1"), so '
                    'the flag is left out, or leave metrics_address unset (role: mooncake_master_metrics_address: "")',
}
for _flag in ('rpc_port', 'ha_backend_type', 'ha_backend_connstring'):
    _NEWER_FLAGS[_flag] = ('This Mooncake release has no --%s: declare the version that runs '
                           '(mooncake_version; role: mooncake_master_mooncake_version, e.g. "0.3.9"), so the '
                           'spellings of that release are written' % _flag)
# Every release from 0.3.9 has it: a master without it is older than the collection's table.
_NEWER_FLAGS['rpc_thread_num'] = ('This Mooncake release has no --rpc_thread_num (0.3.9 and later have it): leave '
                                  'max_threads unset (role: mooncake_master_max_threads: 0), or run Mooncake 0.3.9 '
                                  'or later')
_NEWER_FLAGS['enable_oplog'] = ('This Mooncake release has no --enable_oplog (0.3.13 and later have it): declare the '
                                'version that runs (mooncake_version; role: mooncake_master_mooncake_version), so it '
                                'is left out, or turn the OpLog off (role: mooncake_master_oplog: false)')
_UNKNOWN_FLAG = re.compile(r"unknown command line flag '([A-Za-z0-9_]+)'")


_LEGACY_OPLOG = re.compile(r'Legacy (?:OpLog latest|per-entry OpLog) key exists for cluster=(\S+?);')


def legacy_oplog_hint(text):
    """The fix for a master that aborted on an OpLog namespace of the older format (0.3.13.post1:
    ``Legacy OpLog latest key exists for cluster=X; clear the legacy OpLog namespace ...``), or None."""
    if isinstance(text, bytes):
        text = text.decode('utf-8', 'replace')
    m = _LEGACY_OPLOG.search(text or '')
    if not m:
        return None
    return ('etcd holds an OpLog of the older format under /oplog/%s/, which this master refuses. Fix: run again with '
            'mooncake_master_oplog_reset_legacy: true (it deletes that log, whose metadata is lost; check mode shows '
            'what), or turn the OpLog off (mooncake_master_oplog: false)' % m.group(1))


def unknown_flag_hint(text):
    """The fix for a master that exited on a flag its release does not know, or None."""
    if isinstance(text, bytes):
        text = text.decode('utf-8', 'replace')
    m = _UNKNOWN_FLAG.search(text or '')
    return _NEWER_FLAGS.get(m.group(1)) if m else None


def config_text(document):
    """The text of ``mooncake.json`` for a document (a mapping): 4-space indent, the document's key order, a final
    newline; the same bytes as the role's earlier ``to_nice_json(indent=4, sort_keys=false)`` template, so that a
    node written by that release is unchanged. Raises :class:`TypeError` for a value JSON cannot hold, and
    :class:`ValueError` for NaN or infinity (``allow_nan=False``: written, they would make the file no JSON)."""
    return json.dumps(document, indent=4, separators=(',', ': '), allow_nan=False) + '\n'


HA_STATES_READY = ('serving', 'standby')


def parse_ha_health(body):
    """The HA fields of a master's ``/health`` JSON (Mooncake 0.3.12 and later, 200 in every state):
    ``{role, ha_state, service_ready, leader_address}``; None when the body is not that JSON."""
    try:
        data = json.loads(body or '')
    except (ValueError, TypeError, RecursionError):  # a peer's garbage is no view
        return None
    if not isinstance(data, dict) or 'ha_state' not in data:
        return None
    return {'role': str(data.get('role') or ''), 'ha_state': str(data.get('ha_state') or ''),
            'service_ready': data.get('service_ready') is True,
            'leader_address': str(data.get('leader_address') or '')}


_APPLIED_SEQ = re.compile(r'^ha_oplog_applied_sequence_id\s+([0-9.eE+]+)\s*$', re.M)


def oplog_applied(metrics_text):
    """The master's ``ha_oplog_applied_sequence_id`` (the last OpLog entry a standby applied) from its ``/metrics``,
    None when it does not export it."""
    m = _APPLIED_SEQ.search(metrics_text or '')
    try:
        return int(float(m.group(1))) if m else None
    except ValueError:
        return None


def wedged_standby(namespace_format, view, applied):
    """Whether a standby can never serve again: it applied OpLog entries (``applied`` > 0), and etcd holds no log at
    all (``namespace_format`` ``empty``: etcd lost its data, or the namespace was deleted). Measured with 0.3.13.post1:
    elected leader, it retries forever with ``Failed to promote standby for serve: INCOMPLETE_OPLOG_CATCH_UP`` and
    keeps the leader key, so no master serves; a restarted process promotes at once."""
    return namespace_format == 'empty' and bool(applied) and bool(view) and view.get('role') == 'standby'


def ha_silent(master):
    """Whether a master showed nothing at all: its RPC port neither accepted nor refused (a timeout, an unreachable
    host) and its health endpoint gave no HA view. Only a refused connection (the host answers, no RPC port bound)
    says "standby" without a view; silence says nothing."""
    return not master.get('serving') and not master.get('refused') and master.get('view') is None


def ha_judgement(masters):
    """Judge an HA master group from what each master showed: ``masters`` are dicts with ``name``, ``rpc``
    (host:port), ``serving`` (its RPC port accepts connections), ``refused`` (its RPC port refused the connection:
    the host answers and binds no RPC port, a standby), ``rpc_error`` (optional: what the connection said) and
    ``view`` (:func:`parse_ha_health`, or None when its admin server did not answer). Returns ``{leader,
    leader_name, standbys, problem}``; ``problem`` is '' when exactly one master serves RPC, every other one refused
    RPC or showed its HA state, and every master that answers is serving or standby and names it as leader. A master
    that showed nothing (:func:`ha_silent`) is no standby: its state is unknown, which is a problem naming it (it may
    be the leader, or a master of another election). Pure."""
    serving = [m for m in masters if m.get('serving')]
    silent = [m for m in masters if ha_silent(m)]
    out = {'leader': serving[0]['rpc'] if len(serving) == 1 else '',
           'leader_name': serving[0]['name'] if len(serving) == 1 else '',
           'standbys': [m['name'] for m in masters if not m.get('serving') and not ha_silent(m)], 'problem': ''}
    if len(serving) > 1:
        out['problem'] = 'more than one master serves RPC: %s (split brain: check that all use the same etcd ' \
                         'endpoints and cluster_id)' % ', '.join(m['name'] for m in serving)
        return out
    if silent:
        out['problem'] = '; '.join(
            '%s: no answer from rpc %s%s or health, state unknown' % (
                m['name'], m['rpc'], (' (%s)' % m['rpc_error']) if m.get('rpc_error') else '') for m in silent) + \
            '. Fix: start %s or make %s reachable from this node (a firewall that drops its ports?), or take it ' \
            'out of the master group (ha_peers): a master whose state is unknown may be the leader' % (
                ', '.join(m['name'] for m in silent), 'it' if len(silent) == 1 else 'them')
        return out
    if not serving:
        states = ', '.join('%s %s' % (m['name'], (m.get('view') or {}).get('ha_state') or 'no answer')
                           for m in masters)
        out['problem'] = 'no master serves RPC yet (%s)' % states
        return out
    leader = serving[0]['rpc']
    for m in masters:
        view = m.get('view')
        if view is None:
            continue
        if m is serving[0] and (view['ha_state'] != 'serving' or not view['service_ready']):
            out['problem'] = '%s accepts RPC connections but is %s, not serving' % (
                m['name'], view['ha_state'] or 'in no HA state')
            return out
        if view['ha_state'] not in HA_STATES_READY:
            out['problem'] = '%s is %s (%s)' % (m['name'], view['ha_state'] or 'in no HA state', view['role'])
            return out
        if view['leader_address'] and view['leader_address'] != leader:
            out['problem'] = '%s names %s as leader, but %s serves RPC' % (m['name'], view['leader_address'], leader)
            return out
    return out


def ha_hint(text):
    """The fix for a master log that shows an HA build or etcd problem, else ''."""
    text = text or ''
    if 'Etcd is not enabled in compilation' in text or 'not enabled in compilation' in text:
        return ('this mooncake_master was built without etcd (STORE_USE_ETCD off, the default of a source build): '
                'use the PyPI wheel, which has it, or build with -DUSE_ETCD=ON -DSTORE_USE_ETCD=ON (needs Go)')
    if 'ETCD_OPERATION_ERROR' in text:
        return ('the master cannot read its leader key from etcd: are the etcd members running and healthy '
                '(role ascend.kvpool.kvpool_etcd) and etcd_endpoints right?')
    return ''


# --- the failover drill's kill (playbooks/drill_master_failover.yml) ----------------------------------------------
# docker inspect reports State.Pid 0 for a container that is not running: ``kill -KILL 0`` would signal the task's
# own process group (on the mock cluster it killed Ansible's worker), ``kill -KILL -1`` every process the user may
# signal, and 1 is init. So the drill signals a pid only when the container runs, the pid is above 1, and the process
# is the container's (its /proc/<pid>/cgroup names the container's id), checked again right before the signal.
_CONTAINER_ID = re.compile(r'^[0-9a-f]{12,64}$')


def _registered(value, what):
    """(text, problem) of a registered command result (a dict with rc, stdout, stderr) or of plain text."""
    if isinstance(value, dict):
        if value.get('skipped'):
            return '', '%s did not run (skipped)' % what
        rc = value.get('rc')
        if rc != 0:
            err = str(value.get('stderr') or value.get('msg') or value.get('stdout') or '').strip()
            return '', '%s failed (rc %s%s)' % (what, rc, (': %s' % err[:300]) if err else '')
        value = value.get('stdout')
    if isinstance(value, bytes):
        value = value.decode('utf-8', 'replace')
    if not isinstance(value, str):
        return '', '%s gave no text (%s)' % (what, type(value).__name__)
    return value, ''


def _on(host):
    """The prefix that names the host in a message of the drill's kill target."""
    return ('%s: ' % host) if host else ''


def container_kill_target(inspect, container, cgroup=None, host=None):
    """``{'pid': int, 'id': str}`` of the main process of ``container`` that a signal may go to, from ``docker
    inspect <container>`` (its registered result or its text) and, with ``cgroup``, the text (or registered result)
    of ``/proc/<pid>/cgroup`` read afterwards. Raises ValueError naming the container, what was seen and the fix: a
    container that is missing, not running, paused or restarting, a pid of 1 or less (Docker's 0 for a stopped
    container), an answer about another container, and a pid whose cgroup does not name the container's id (the
    process ended, and the pid may be another process now). ``host`` (the inventory name), when given, starts every
    message. Pure: nothing is signalled here."""
    try:
        return _container_kill_target(inspect, container, cgroup)
    except ValueError as exc:
        raise ValueError('%s%s' % (_on(host), exc)) from exc


def _container_kill_target(inspect, container, cgroup):
    name = str(container or '').strip()
    what = 'docker inspect %s' % name
    text, problem = _registered(inspect, what)
    if problem:
        raise ValueError('%s, so nothing was killed: is the container there (container mode: site.yml makes it)?'
                         % problem)
    try:
        docs = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ValueError('%s printed no JSON (%r), so nothing was killed' % (what, text[:200])) from exc
    if not isinstance(docs, list) or len(docs) != 1 or not isinstance(docs[0], dict):
        raise ValueError('%s did not describe one container (%r), so nothing was killed' % (what, text[:200]))
    doc = docs[0]
    seen = str(doc.get('Name') or '').lstrip('/')
    if seen != name:
        raise ValueError('%s describes the container %r, not %s, so nothing was killed' % (what, seen, name))
    cid = doc.get('Id')
    if not isinstance(cid, str) or not _CONTAINER_ID.match(cid):
        raise ValueError('%s gives no container id (Id %r), so nothing was killed' % (what, cid))
    state = doc.get('State') if isinstance(doc.get('State'), dict) else {}
    pid = state.get('Pid')
    status = state.get('Status') or ('running' if state.get('Running') else 'not running')
    if state.get('Running') is not True or state.get('Paused') is True or state.get('Restarting') is True:
        raise ValueError('container %s is %s (State.Pid %r), so nothing was killed: a signal to pid %r would reach '
                         'the wrong processes. Start it first (site.yml --tags master), or run the drill where the '
                         'leader\'s master runs' % (name, status, pid, pid))
    if isinstance(pid, bool) or not isinstance(pid, int) or pid <= 1:
        raise ValueError('container %s is running but docker reports its pid as %r, which is no process of it (0 '
                         'signals the caller\'s own group, 1 is init), so nothing was killed' % (name, pid))
    target = {'pid': pid, 'id': cid}
    if cgroup is None:
        return target
    text, problem = _registered(cgroup, 'the read of /proc/%d/cgroup' % pid)
    if problem:
        raise ValueError('pid %d of container %s is gone (%s), so nothing was killed: run the drill again'
                         % (pid, name, problem))
    if cid not in text:
        raise ValueError('pid %d is not a process of container %s (its /proc/%d/cgroup does not name the container '
                         'id %s: the process ended and the pid may be another process now), so nothing was killed: '
                         'run the drill again' % (pid, name, pid, cid[:12]))
    return target


# Host mode: what systemctl kill needs to be a kill. `systemctl kill` of a unit that is not loaded fails, but of a unit
# that is loaded and stopped (MainPID 0) it may signal nothing and exit 0: the drill would then time a failover that
# never happened. So the unit must be loaded, active and have a main process, read right before.
UNIT_KILL_PROPERTIES = ('LoadState', 'ActiveState', 'SubState', 'MainPID')


def unit_kill_target(show, unit, host=None):
    """``{'pid': int, 'unit': str}`` of the systemd unit ``unit`` whose processes the failover drill may kill with
    ``systemctl kill -s KILL``, from ``systemctl show -p LoadState,ActiveState,SubState,MainPID <unit>`` (its
    registered result or its text). Raises ValueError naming the host, the unit, what was seen and the fix: a read
    that failed or printed no state, a unit that is not loaded (``not-found``, ``masked``), not ``active`` (stopped,
    failed, between two starts) or whose MainPID is 1 or less (0: no main process). Pure: nothing is signalled
    here; the drill's command that signals reads MainPID once more and kills only when it is still this pid."""
    name = str(unit or '').strip()
    on = _on(host)
    where = host or 'the node'
    text, problem = _registered(show, 'systemctl show %s' % name)
    if problem:
        raise ValueError('%s%s, so whether the master runs is unknown and nothing was killed. Fix: run `systemctl '
                         'show %s` as root on %s; systemd must run and its bus be reachable'
                         % (on, problem, name, where))
    props = {}
    for line in text.splitlines():
        key, sep, value = line.partition('=')
        if sep and key.strip() in UNIT_KILL_PROPERTIES:
            props[key.strip()] = value.strip()
    missing = [k for k in ('LoadState', 'ActiveState', 'MainPID') if not props.get(k)]
    if missing:
        raise ValueError('%ssystemctl show %s printed no %s (%r), so whether the master runs is unknown and nothing '
                         'was killed. Fix: run `systemctl show -p LoadState,ActiveState,MainPID %s` on %s'
                         % (on, name, ', '.join(missing), text[:200], name, where))
    load, active, sub, pid_text = props['LoadState'], props['ActiveState'], props.get('SubState'), props['MainPID']
    if load != 'loaded':
        raise ValueError('%sunit %s is %s (LoadState), so nothing was killed: the master does not run as a systemd '
                         'unit on %s. Fix: run the drill where the leader\'s master runs as a unit (site.yml '
                         '--tags master deploys it; in container mode set kvpool_site_container to the node\'s '
                         'container)' % (on, name, load, where))
    state = '%s%s' % (active, (' (%s)' % sub) if sub else '')
    if active != 'active':
        raise ValueError('%sunit %s is %s with MainPID %s, so nothing was killed: systemctl kill of a unit that does '
                         'not run kills nothing, and the drill would time a failover that never happened. Fix: start '
                         'it (site.yml --tags master) and run the drill again once the masters have one leader'
                         % (on, name, state, pid_text))
    try:
        pid = int(pid_text)
    except ValueError:
        pid = None
    if pid is None or pid <= 1:
        raise ValueError('%sunit %s is %s but its MainPID is %r, which is no process of it (0: no main process), so '
                         'nothing was killed. Fix: check `systemctl status %s` on %s and run the drill again once it '
                         'runs' % (on, name, state, pid_text, name, where))
    return {'pid': pid, 'unit': name}
