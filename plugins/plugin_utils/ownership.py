# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Whether a file a role is about to write is the collection's (issue 32, ownership), from what ``stat`` and
``slurp`` saw on the host: the rule of the roles that write files with ``template`` / ``copy`` (filter
``ascend.kvpool.owned_file_problems``; the modules' own rule is ``module_utils/_service.check_owned``).

A file is the collection's, and may be replaced, when it is missing, or a regular file and:

- ``kind: header`` (a text file that can carry a comment): one of its first lines starts with the collection's
  header ``# Written by ascend.kvpool`` (``_service.OWN_MARK``; after a template's ``ansible_managed`` line), or
  with one of the role's ``marks`` (the first comment line of an earlier release's copy);
- ``kind: record`` (a file that cannot carry one: a JSON dashboard, a token): its bytes are the ones the role writes
  (``sha256``) or wrote in an earlier release (``earlier_sha256``, before the records), or the record beside it,
  ``<dir>/.<name>.kvpool`` (the layout of ``mooncake_config_file``'s), starts with the header and names the sha256
  of its bytes;
- ``package: <name>``: its md5 is the one ``dpkg-query -W -f='${Conffiles}'`` lists for it, the package's own
  default, untouched (Debian's prometheus ships ``/etc/prometheus/prometheus.yml`` and ``/etc/default/prometheus``).

Anything else (a hand-written file, one changed since, a link, a FIFO, a directory, a record without the header) is
a problem naming the file, its variable and the fix; the role fails before anything is written, in check mode too.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import binascii
import hashlib
import os

from ansible_collections.ascend.kvpool.plugins.module_utils._service import OWN_MARK

HEADER = OWN_MARK.rstrip()  # '# Written by ascend.kvpool': also the '.kvpool_monitoring' spelling of earlier releases
HEADER_LINES = 5  # a template's ansible_managed line (or a YAML '---') may come first


def record_path(path):
    """The ownership record beside ``path``: ``<dir>/.<name>.kvpool``."""
    folder, name = os.path.split(path)
    return os.path.join(folder, '.%s.kvpool' % name)


def record_text(role, sha256):
    """The text of the record a role writes beside a file whose bytes have this sha256."""
    return ('# Written by ascend.kvpool (role %s): the sha256 of the file it wrote beside this record (its proof of '
            'ownership). Remove both together.\nsha256=%s\n' % (role, sha256))


def _by_path(results, key):
    """``{path: value}`` of a looped ``stat`` (key ``stat``) or ``slurp`` (key ``content``) task's results."""
    out = {}
    for res in (results or {}).get('results', []) if isinstance(results, dict) else results or []:
        if not isinstance(res, dict) or res.get('skipped') or res.get('failed'):
            continue
        path = res.get('source') or (res.get('item') if isinstance(res.get('item'), str) else None) or \
            (res.get('stat') or {}).get('path')
        if path and key in res:
            out[path] = res[key]
    return out


def _bytes(content):
    try:
        return base64.b64decode(content or '')
    except (binascii.Error, ValueError, TypeError):
        return None


def conffile_md5s(dpkg_output):
    """``{path: md5}`` of ``dpkg-query -W -f='${Conffiles}\\n' <package>`` output (`` /etc/x 0123abcd [obsolete]``)."""
    out = {}
    for line in str(dpkg_output or '').splitlines():
        words = line.split()
        if len(words) >= 2 and words[0].startswith('/'):
            out[words[0]] = words[1].lower()
    return out


def _not_a_file(info):
    if info.get('islnk'):
        return 'it is a symlink to %s, and the role writes only files' % (info.get('lnk_source') or '?')
    if info.get('isdir'):
        return 'it is a directory'
    return 'it is not a regular file (a FIFO, a socket or a device), which is never read nor replaced'


def file_problem(entry, stats, reads, conffiles, marks=()):
    """'' when the file of ``entry`` (``path``, ``variable``, ``kind``, optional ``sha256``, ``earlier_sha256``,
    ``package``, ``fix``) is
    missing or the collection's, else the message naming it, its variable and the fix."""
    path = entry['path']
    info = stats.get(path) or {}
    if not info.get('exists'):
        return ''
    what = '%s (%s)' % (path, entry['variable'])
    fix = entry.get('fix') or ('if it is yours, set %s to another path (or move the file away); if it is a stale '
                               'copy of the collection\'s, remove it' % entry['variable'])
    tail = ', so it is not replaced and nothing was changed. Fix: %s, and run again' % fix
    if not info.get('isreg') or info.get('islnk'):
        return '%s exists but %s%s' % (what, _not_a_file(info), tail)
    data = _bytes(reads.get(path)) if path in reads else None
    md5 = conffiles.get(path)
    if md5 and data is not None and hashlib.md5(data).hexdigest() == md5:  # dpkg's own digest of the default
        return ''  # the package's default, untouched
    if entry['kind'] == 'header':
        if data is None:
            return '%s exists but could not be read, so whether ascend.kvpool wrote it is unknown%s' % (what, tail)
        head = data.decode('utf-8', 'replace').splitlines()[:HEADER_LINES]
        if any(line.startswith(mark) for line in head for mark in (HEADER,) + tuple(marks or ())):
            return ''
        why = 'none of its first %d lines is the header "%s ..."' % (HEADER_LINES, HEADER)
        if md5:
            why += ', and it is not the %s package\'s default' % entry.get('package', 'package')
        return '%s exists but was not written by ascend.kvpool (%s)%s' % (what, why, tail)
    # kind record
    checksum = (info.get('checksum') or '').lower()
    known = [str(d).lower() for d in [entry.get('sha256')] + list(entry.get('earlier_sha256') or []) if d]
    if checksum and checksum in known:
        return ''  # the bytes the role writes or wrote in an earlier release (no record then), or a record lost
    record = record_path(path)
    rinfo = stats.get(record) or {}
    if rinfo.get('exists') and (not rinfo.get('isreg') or rinfo.get('islnk')):
        return '%s (the ownership record of %s) exists but %s, so nothing was changed. Fix: move it away and run ' \
            'again' % (record, what, _not_a_file(rinfo))
    text = (_bytes(reads.get(record)) or b'').decode('utf-8', 'replace') if rinfo.get('exists') else None
    if text is not None and not text.startswith(HEADER):
        return '%s (the name of the ownership record of %s) exists but was not written by ascend.kvpool (its first ' \
            'line is not the header "%s ..."), so nothing was changed. Fix: move it away and run again' \
            % (record, what, HEADER)
    if text is not None and checksum and ('sha256=%s' % checksum) in text:
        return ''
    why = 'no record %s beside it' % record if text is None else 'its bytes are not the ones %s records' % record
    return '%s exists but ascend.kvpool cannot prove it wrote it (%s)%s' % (what, why, tail)


def file_problems(entries, stats, reads=None, conffiles='', marks=()):
    """The message of every file of ``entries`` that is not the collection's (see the module docstring); ``stats`` and
    ``reads`` are the registered results of the role's looped ``stat`` (``checksum_algorithm: sha256``) and
    ``slurp`` tasks, ``conffiles`` the text of ``dpkg-query``."""
    stat_of, read_of = _by_path(stats, 'stat'), _by_path(reads, 'content')
    md5s = conffile_md5s(conffiles)
    problems = []
    for entry in entries or []:
        if not isinstance(entry, dict) or not entry.get('path') or entry.get('kind') not in ('header', 'record'):
            raise ValueError('each file needs path, variable and kind (header or record), got %r' % (entry,))
        problem = file_problem(dict(entry, variable=entry.get('variable') or 'its variable'), stat_of, read_of, md5s,
                               marks)
        if problem:
            problems.append(problem)
    return problems


def teardown_dir_problems(paths, explicit=False, host=None):
    """Messages of the directories of ``paths`` that ``teardown.yml`` must not remove as a whole (pure).

    Never: a relative path, ``/`` or a directory directly under it (``/etc``, ``/var``, ``/opt``), whoever named
    it. The collection's own directories (``kvpool_defaults_config_dir``, ``kvpool_defaults_state_dir``, defaults
    ``/etc/ascend-kvpool``, ``/var/lib/ascend-kvpool``) also only when their name says ``kvpool``: one set to a shared
    directory (``/etc/ascend``) holds files the collection did not write. ``explicit``: the operator listed the
    paths in ``kvpool_teardown_paths``, which is their word that everything in them may go."""
    on = ('%s: ' % host) if host else ''
    out = []
    for path in paths or []:
        text = str(path or '')
        parts = [p for p in text.split('/') if p not in ('', '.')]
        if not text.startswith('/') or len(parts) < 2 or '..' in parts:
            out.append('%steardown.yml never removes %r as a whole: / , a directory directly under it, a relative path '
                       'or one with .. would take files the collection did not write. Fix: list only the '
                       'collection\'s own directories in kvpool_teardown_paths (defaults /etc/ascend-kvpool and '
                       '/var/lib/ascend-kvpool)' % (on, text))
        elif not explicit and 'kvpool' not in parts[-1]:
            out.append('%steardown.yml does not remove %s as a whole: its name does not say kvpool, so it may be a '
                       'shared directory (kvpool_defaults_config_dir or kvpool_defaults_state_dir set to it) with '
                       'files the collection did not write. Fix: remove the collection\'s files there by hand, or '
                       'name the directories to remove in kvpool_teardown_paths' % (on, text))
    return out
