#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: mooncake_config_file
short_description: Write a node's mooncake.json in one round trip, and tell whether the pool's proof is there
version_added: 1.0.0
description:
  - Writes O(config) as the JSON of C(mooncake.json) (4-space indent, the keys in the order given, a final newline)
    to O(path) when the file's text differs, through a temporary file and a rename. The directory is made
    (mode O(directory_mode)) when it is missing.
  - One module call replaces the three round trips of C(ansible.builtin.file) for the directory and
    C(ansible.builtin.template) (its C(stat), then its C(file) for the mode) that the role
    C(ascend.kvpool.mooncake_config) used before; a node written by that template is left unchanged (the same
    bytes).
  - With O(proof), also reports whether that file exists (RV(proof_exists)). The role passes the record of its pool
    probe, C(mooncake_config_probe_marker), so that C(site.yml) needs no separate C(stat) to decide whether to probe
    the pool again.
  - With O(master), first opens one TCP connection to the master's RPC port from the node, and fails naming the
    master and the fix when none is accepted within O(connect_timeout), before anything is written (in check mode
    too, as it only reads). C(site.yml) uses it after the master phase, so that no instance starts against a master
    its node cannot reach, without a play of its own for the check.
  - Refuses a path that is not absolute, a directory in the place of the file, a directory below a file, and a
    read-only filesystem, naming the path; nothing is left half-written.
  - 'Ownership: the module replaces or removes only a file it can prove it wrote. Beside the file it keeps a record,
    C(.<name>.kvpool) (C(.mooncake.json.kvpool), mode 0644, with the collection''s header), holding the sha256 of
    the bytes it wrote. A file at O(path) whose bytes the record does not match (written by hand or by another
    tool, or changed since) fails the task naming the file and the fix, and nothing is written, in check mode
    too. A file with exactly the bytes the module would write is taken as its own (a node written by an earlier
    release, or by the role''s earlier template), and its record is written.'
author:
  - ascend.kvpool contributors (@ascend-kvpool)
options:
  path:
    description: Absolute path of C(mooncake.json) on the node.
    type: path
    required: true
  config:
    description:
      - The document (C(metadata_server), C(protocol), C(device_name), C(master_server_address),
        C(global_segment_size), C(local_buffer_size), ...). Written as given; the role checks the values.
      - Required when O(state=present).
    type: dict
  state:
    description:
      - C(present) writes the file (O(config) is then required).
      - C(absent) removes the file and its record when the record proves the module wrote it (a missing file is
        C(ok)); any other file there fails the task and is left alone. C(teardown.yml) removes mooncake.json so.
    type: str
    choices: [present, absent]
    default: present
  mode:
    description:
      - Mode of the file, an octal string in quotes (C("0644")). It is world-readable by default, as vllm-ascend
        reads it.
      - A number is refused - YAML reads an unquoted C(0644) as the number 420, which cannot be told from the
        mode C(0420).
    type: raw
    default: '0644'
  directory_mode:
    description: Mode of the directory when the module makes it (an existing directory keeps its mode); an octal
      string in quotes, as O(mode).
    type: raw
    default: '0755'
  proof:
    description:
      - A file whose existence the module reports as RV(proof_exists) (read only, never written here).
      - With O(state=absent) it is removed too, when it is the record the role C(ascend.kvpool.mooncake_config)
        writes (its header, or the text of an earlier release); any other file there fails the task and stays.
    type: path
  master:
    description:
      - C(host:port) (C([v6]:port) for IPv6) of the Mooncake master's RPC port to connect to before writing, as in
        the document's C(master_server_address). Not checked when empty.
      - For HA masters the C(etcd://e1:2379;e2:2379;...) address - a majority of the etcd members must answer
        C(/health) from the node, the leader key C(mooncake-store/<cluster id>/master_view) (O(cluster_id)) must
        name a master, and that master must accept the connection.
    type: str
    default: ''
  cluster_id:
    description:
      - The pool's cluster id in etcd, the masters' C(--cluster_id) and the store clients' C(MC_STORE_CLUSTER_ID).
        The leader key read for HA masters is C(mooncake-store/<cluster_id>/master_view).
      - Empty is Mooncake's default, C(mooncake_cluster). Only read when O(master) is an C(etcd://) address.
      - The role C(ascend.kvpool.mooncake_config) passes C(mooncake_config_cluster_id) (the pool's
        C(kvpool_cluster_id) with HA masters).
    type: str
    default: ''
  connect_timeout:
    description:
      - Seconds to wait for the connection to O(master) (more than 0, at most 60).
      - For HA masters it bounds each step of the lookup as a whole (every etcd member's C(/health), asked at
        once; the read of the leader key; the connection), from the connection to the last byte of the answer, so
        the lookup takes at most 3 times this. A member that answers one byte at a time counts as not answering;
        a redirect is not followed.
    type: float
    default: 3.0
attributes:
  check_mode:
    support: full
    description: Reports whether the file would change, and the diff, without writing.
  diff_mode:
    support: full
    description: The old and the new text of the file.
  idempotent:
    support: full
    description: A second run with the same O(config) changes nothing.
seealso:
  - module: ansible.builtin.template
"""

EXAMPLES = r"""
- name: Write mooncake.json
  ascend.kvpool.mooncake_config_file:
    path: /etc/ascend-kvpool/mooncake.json
    config:
      metadata_server: P2PHANDSHAKE
      protocol: ascend
      device_name: ""
      master_server_address: 90.90.100.188:50088
      global_segment_size: 107374182400
      local_buffer_size: 10737418240
    proof: /etc/ascend-kvpool/mooncake.json.proven
    master: 90.90.100.188:50088   # fail before writing when this node cannot reach the master
  register: written
"""

RETURN = r"""
path:
  description: The file written (or that would be).
  returned: always
  type: str
  sample: /etc/ascend-kvpool/mooncake.json
text:
  description: The text of the file as it is after the run (as it would be, in check mode).
  returned: always
  type: str
proof_exists:
  description: Whether O(proof) exists on the node; false when O(proof) is not given.
  returned: always
  type: bool
master_connect:
  description:
    - The connection to O(master) (C(ok), C(error) empty when it connected, C(ms)); empty without O(master).
    - For HA masters also C(leader) (the master the leader key names), C(leader_key) (the key read,
      C(mooncake-store/<cluster_id>/master_view)) and C(etcd_healthy) (the etcd members that answered C(/health)).
  returned: always
  type: dict
  sample: {"ok": true, "error": "", "ms": 0.4}
"""

import hashlib
import math
import os
import stat
from concurrent.futures import ThreadPoolExecutor

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.ascend.kvpool.plugins.module_utils import _errors, _etcd
from ansible_collections.ascend.kvpool.plugins.module_utils._errors import KvpoolError
from ansible_collections.ascend.kvpool.plugins.module_utils._mooncake import config_text
from ansible_collections.ascend.kvpool.plugins.module_utils._proc import http_status, split_target, try_connect
from ansible_collections.ascend.kvpool.plugins.module_utils._service import (
    OWN_MARK, read_bytes, remove_file, write_file,
)

RECORD_HEADER = ('# Written by ascend.kvpool (module mooncake_config_file): the sha256 of the file it wrote beside '
                 'this record (its proof of ownership). Remove both together.\n')


def record_path(path):
    """The record beside ``path`` that proves the module wrote it: ``<dir>/.<name>.kvpool``."""
    folder, name = os.path.split(path)
    return os.path.join(folder, '.%s.kvpool' % name)


def record_text(data):
    return RECORD_HEADER + 'sha256=%s\n' % hashlib.sha256(data).hexdigest()


def ownership(path):
    """(bytes of the file at ``path`` or None, whether the record proves the module wrote exactly them). A path that
    is not a regular file (a link, a FIFO, a device), a file that cannot be read, and a record that is not the
    collection's are KvpoolErrors naming them: never replaced, removed, or taken as missing."""
    fix = ('Fix: if it is yours, give the collection another path (mooncake_config_path); if it is a stale file of '
           'the collection, remove it and run again')
    if os.path.islink(path) or (os.path.lexists(path) and not os.path.isfile(path)):
        raise KvpoolError('path %s is not a regular file (a symlink, a FIFO, a socket or a device), which this module '
                          'never writes, so it is neither replaced nor removed and nothing was changed. %s'
                          % (path, fix))
    old = read_bytes(path)
    if old is None and os.path.lexists(path):
        raise KvpoolError('path %s exists but cannot be read, so it is neither replaced nor removed and nothing was '
                          'changed. %s' % (path, fix))
    record = record_path(path)
    if os.path.islink(record) or (os.path.lexists(record) and not os.path.isfile(record)):
        raise KvpoolError('%s (the ownership record of %s) is not a regular file, which this module never writes, '
                          'so nothing was changed. Fix: move it away and run again' % (record, path))
    mark = read_bytes(record)
    if mark is not None and not mark.decode('utf-8', 'replace').startswith(OWN_MARK):
        raise KvpoolError('%s (the name of the ownership record of %s) exists but was not written by ascend.kvpool '
                          '(its first line is not the header "%s(module ...)"), so nothing was changed. Fix: move it '
                          'away and run again' % (record, path, OWN_MARK))
    proven = old is not None and mark is not None and record_text(old) in mark.decode('utf-8', 'replace')
    return old, proven


def not_ours(path, why):
    return KvpoolError('path %s exists but ascend.kvpool cannot prove it wrote it (%s), so it is not %s and nothing '
                       'was changed. Fix: if it is yours, give the collection another path (mooncake_config_path); '
                       'if it is the collection\'s (changed by hand, or written by another tool), remove it and run '
                       'again' % (path, 'no record %s beside it' % record_path(path) if not os.path.exists(
                           record_path(path)) else 'its bytes are not the ones %s records' % record_path(path), why))


def _mode(module, name):
    """The file mode of option ``name``: an octal string (``"0644"``). A number is refused: YAML reads an unquoted
    ``0644`` as the octal number 420, which arrives here as 420, indistinguishable from a mode written ``420``
    (0o420, the owner unable to write)."""
    text = module.params[name]
    if isinstance(text, int) and not isinstance(text, bool):
        raise KvpoolError('%s is the number %d, not an octal string: YAML reads an unquoted 0644 as the number %d, '
                          'which cannot be told from the mode 0%d. Quote it: %s: "0644"'
                          % (name, text, 0o644, text, name))
    if not isinstance(text, str):
        raise KvpoolError('%s is %r (a %s), not an octal string: quote the mode, %s: "0644"'
                          % (name, text, type(text).__name__, name))
    try:
        value = int(text.strip(), 8) if text.strip() else -1
    except ValueError:
        value = -1
    if not 0 <= value <= 0o7777:
        raise KvpoolError('%s is %r, which is not an octal file mode: give a string such as "0644"' % (name, text))
    return value


def _non_finite(value, where='config'):
    """The place (``config.a.b[2]``) of the first NaN or infinite number in a document, else ''."""
    if isinstance(value, float) and not math.isfinite(value):
        return where
    if isinstance(value, dict):
        for key, item in value.items():
            found = _non_finite(item, '%s.%s' % (where, key))
            if found:
                return found
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            found = _non_finite(item, '%s[%d]' % (where, index))
            if found:
                return found
    return ''


def reach_ha_master(address, timeout, cluster_id=''):
    """HA masters (``etcd://e1;e2;...``): a majority of the etcd members answers ``/health`` from this node, the
    leader key of ``cluster_id`` (``mooncake-store/<cluster_id>/master_view``; '' is Mooncake's default) names a
    master, and that master accepts a TCP connection; KvpoolError naming what failed and the fix."""
    try:
        endpoints = _etcd.split_etcd_address(address)
    except ValueError as exc:
        raise KvpoolError('master is %r: %s' % (address, exc)) from exc
    if not endpoints:
        raise KvpoolError('master is %r, which lists no etcd endpoint: give etcd://host:2379;host:2379' % address)
    # Every member asked at once, each request bounded as a whole (a member that answers one byte at a time is cut
    # at the timeout): the lookup takes at most 3 x connect_timeout (health, the leader key, the connection).
    with ThreadPoolExecutor(max_workers=min(16, len(endpoints))) as pool:
        answers = list(pool.map(lambda e: http_status('http://%s/health' % e, timeout=timeout)[1], endpoints))
    healthy = [e for e, body in zip(endpoints, answers) if '"true"' in (body or '')]
    problem = _etcd.quorum_problem(endpoints, healthy)
    if problem:
        raise KvpoolError('%s, so mooncake.json was not written. Fix: start the etcd members (role '
                          'ascend.kvpool.kvpool_etcd, site.yml --tags etcd) and check that this node reaches their '
                          'client port' % problem)
    key = _etcd.master_view_key(cluster_id or _etcd.DEFAULT_CLUSTER_ID)
    status, body = http_status('http://%s/v3/kv/range' % healthy[0], timeout=timeout,
                               data=_etcd.range_request(key))
    why = ''
    try:
        leader = _etcd.parse_range_value(body) if status == 200 else None
    except ValueError as exc:  # a peer's garbage: named, never a traceback nor taken for "no leader"
        leader, why = None, ': %s' % exc
    if leader is None:
        raise KvpoolError('etcd at %s did not answer the read of %s (HTTP %s%s), so mooncake.json was not written. '
                          'Fix: check that %s is an etcd member (its client port, kvpool_etcd_client_port) and that '
                          'it is healthy (etcdctl endpoint health)' % (healthy[0], key, status or 'no answer', why,
                                                                       healthy[0]))
    if not leader:
        raise KvpoolError('no Mooncake master is leader in etcd under cluster id %s (%s is empty), so mooncake.json '
                          'was not written. Fix: start the masters in HA mode (role ascend.kvpool.mooncake_master '
                          'with mooncake_master_enable_ha) against the same etcd endpoints and with --cluster_id=%s; '
                          'the masters and the store clients take it from kvpool_cluster_id (cluster_id of this '
                          'module, mooncake_config_cluster_id of the role)'
                          % (cluster_id or _etcd.DEFAULT_CLUSTER_ID, key, cluster_id or _etcd.DEFAULT_CLUSTER_ID))
    result = try_connect(leader, timeout)
    if not result['ok']:
        raise KvpoolError('etcd names %s as the leading Mooncake master, but this node cannot reach it: %s (within '
                          '%.1f s), so mooncake.json was not written. Fix: check that the master listens on an '
                          'address this node reaches (mooncake_master_rpc_address) and that no firewall blocks the '
                          'port' % (leader, result['error'], timeout))
    return dict(result, leader=leader, leader_key=key, etcd_healthy=healthy)


def reach_master(target, timeout, cluster_id=''):
    """The connection to the master's ``host:port`` (``{}`` without a target), or for HA masters to the leader etcd
    names under ``cluster_id``; KvpoolError naming the fix when it is malformed or refused."""
    if not target:
        return {}
    if not 0 < timeout <= 60:
        raise KvpoolError('connect_timeout is %s: give a number of seconds above 0 and at most 60' % timeout)
    if str(target).startswith('etcd://'):
        return reach_ha_master(target, timeout, cluster_id)
    try:
        host, port = split_target(target)
    except ValueError as exc:
        raise KvpoolError('master is %r, which is not host:port: give the master\'s RPC address as in '
                          'master_server_address, for example 90.90.100.188:50088 ([v6]:port for IPv6)'
                          % target) from exc
    result = try_connect(target, timeout)
    if not result['ok']:
        raise KvpoolError('cannot reach the Mooncake master at %s: %s (within %.1f s), so mooncake.json was not '
                          'written. Fix: check that mooncake_master runs on %s and listens on an address this node '
                          'reaches (mooncake_master_rpc_address), and that no firewall blocks port %d.'
                          % (target, result['error'], timeout, host, port))
    return result


# The text of the pool probe's record as role mooncake_config wrote it before it had the header.
PROOF_LEGACY = "pool proven: every node of the play read the probe's object from this node"


def proof_is_ours(proof):
    """Whether ``proof`` exists (False when missing); KvpoolError when something there is not the role's record."""
    if not os.path.lexists(proof):
        return False
    data = read_bytes(proof, 4096) if not os.path.islink(proof) else None
    text = (data or b'').decode('utf-8', 'replace')
    if data is None or not (text.startswith(OWN_MARK) or text.strip() == PROOF_LEGACY):
        raise KvpoolError('proof %s exists but is not the pool probe\'s record of role ascend.kvpool.mooncake_config '
                          '(no "%s" header), so it is not removed and nothing was changed. Fix: if it is yours, set '
                          'mooncake_config_probe_marker to another file; if it is a stale record, remove it and run '
                          'again' % (proof, OWN_MARK.strip()))
    return True


def _remove(module, path):
    """state=absent: the file and its record removed when the record proves the module wrote the file; ``proof``
    too when it is the probe's record."""
    old, proven = ownership(path)
    if old is not None and not proven:
        raise not_ours(path, 'removed')
    proof = module.params['proof']
    proof_there = proof_is_ours(proof) if proof else False
    changed = old is not None
    if changed and not module.check_mode:
        remove_file(path)
        remove_file(record_path(path))
    elif old is None and os.path.exists(record_path(path)) and not module.check_mode:
        remove_file(record_path(path))  # a record left without its file (checked to be the collection's)
    if proof_there and not module.check_mode:
        remove_file(proof)
    result = dict(changed=changed or proof_there, path=path, text='', proof_exists=proof_there and module.check_mode,
                  master_connect={})
    if module._diff:
        result['diff'] = dict(before=(old or b'').decode('utf-8', 'replace'), after='', before_header=path,
                              after_header=path)
    return result


def _run(module):
    path = module.params['path']
    if not os.path.isabs(path):
        raise KvpoolError('path is %r, which is not an absolute path: give the full path of mooncake.json, for example '
                          '/etc/ascend-kvpool/mooncake.json' % path)
    if os.path.isdir(path):
        raise KvpoolError('path %s is a directory: give the path of the file mooncake.json in it' % path)
    try:
        kind = os.stat(path).st_mode
    except OSError:
        kind = None
    if kind is not None and not stat.S_ISREG(kind):
        raise KvpoolError('path %s is not a regular file (a FIFO, socket or device node): it is neither read nor '
                          'replaced, so nothing hangs; remove it, or give the path of mooncake.json' % path)
    if module.params['state'] == 'absent':
        return _remove(module, path)
    mode = _mode(module, 'mode')
    dir_mode = _mode(module, 'directory_mode')
    bad = _non_finite(module.params['config'])
    if bad:
        # json.dumps would write NaN or Infinity, which no JSON reader (Mooncake's included) takes.
        raise KvpoolError('%s is not a finite number (NaN or infinity), which JSON cannot hold, so mooncake.json was '
                          'not written: give a number of bytes or a string (for example global_segment_size: '
                          '"100GB" in the role)' % bad)
    try:
        text = config_text(module.params['config'])
    except (TypeError, ValueError) as exc:
        raise KvpoolError('config cannot be written as JSON (%s): give strings, numbers, booleans, lists and '
                          'mappings only' % exc) from exc

    old, proven = ownership(path)
    old_text = None if old is None else old.decode('utf-8', 'replace')
    if old is not None and not proven and old != text.encode('utf-8'):
        raise not_ours(path, 'replaced')  # before any other step, in check mode too

    reached = reach_master(module.params['master'], module.params['connect_timeout'], module.params['cluster_id'])
    try:
        old_mode = stat.S_IMODE(os.stat(path).st_mode) if old is not None else None
    except OSError:
        old_mode = None
    changed = old_text != text or old_mode != mode
    if changed and not module.check_mode:
        write_file(path, text, mode, 'mooncake.json', dir_mode=dir_mode)
    if (changed or not proven) and not module.check_mode:
        # The proof of ownership (bookkeeping, not reported as a change when the file itself is unchanged).
        write_file(record_path(path), record_text(text.encode('utf-8')), 0o644, 'ownership record of %s' % path,
                   dir_mode=dir_mode)
    proof = module.params['proof']
    result = dict(changed=changed, path=path, text=text, proof_exists=bool(proof) and os.path.exists(proof),
                  master_connect=reached)
    if module._diff:
        result['diff'] = dict(before=old_text or '', after=text, before_header=path, after_header=path)
    return result


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type='path', required=True),
            config=dict(type='dict'),
            state=dict(type='str', choices=['present', 'absent'], default='present'),
            mode=dict(type='raw', default='0644'),
            directory_mode=dict(type='raw', default='0755'),
            proof=dict(type='path'),
            master=dict(type='str', default=''),
            connect_timeout=dict(type='float', default=3.0),
            cluster_id=dict(type='str', default=''),
        ),
        required_if=[('state', 'present', ('config',))],
        supports_check_mode=True,
    )
    failed, result = _errors.outcome(module, _run, module)
    if failed:
        module.fail_json(**result)
    module.exit_json(**result)


if __name__ == '__main__':
    main()
