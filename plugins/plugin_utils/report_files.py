# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Report files the action plugins write on the controller (outputs of a run, not managed state), the host
variables they are built from, and the base class of those action plugins."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import json
import math
import os
import stat
import struct
import traceback
from collections.abc import Mapping

from ansible.errors import AnsibleActionFail, AnsibleError
from ansible.plugins.action import ActionBase

from ansible_collections.ascend.kvpool.plugins.module_utils._errors import unexpected_message


def write_atomic(path, text):
    """Write ``text`` to ``path`` through a temporary file and a rename (a reader never sees half a report);
    creates the parent directory. Raises OSError/IOError (``path`` a directory included), leaving no temporary
    file behind."""
    if os.path.isdir(path):
        raise IsADirectoryError(errno.EISDIR, 'is a directory, not a file: name a file', path)
    parent = os.path.dirname(path)
    if parent and not os.path.isdir(parent):
        os.makedirs(parent)
    tmp = '%s.tmp.%d' % (path, os.getpid())
    try:
        with open(tmp, 'w') as handle:
            handle.write(text)
        os.replace(tmp, path)
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)


# Proof that a report file at a path is the collection's own, so that it may be replaced (issue 32): JSON has the
# top-level key ``written_by`` (``ascend.kvpool.<action>``), Markdown the first line ``<!-- Written by
# ascend.kvpool ... -->``, a PNG chart the text chunk ``Software: ascend.kvpool.<action>`` (matplotlib's
# ``savefig(metadata=...)``). Any other file at the path is left alone and the task fails naming it.
WRITTEN_BY_KEY = 'written_by'
OWNER = 'ascend.kvpool'
MARKDOWN_HEADER = '<!-- Written by ascend.kvpool'
PNG_SIGNATURE = b'\x89PNG\r\n\x1a\n'
MAX_PROOF_BYTES = 64 * 1024 * 1024
# A report of an earlier release (before the proof) is the collection's when it has the layout only that action
# writes (as for the router's record): the JSON's top-level keys, the Markdown's title line; its chart is the one
# that report's JSON lists in files.chart.
EARLIER_JSON_KEYS = {
    'npu_network_report': frozenset(('ok', 'label', 'nodes', 'npus_checked', 'pings', 'findings', 'suspects',
                                     'links')),
    'vllm_instance_report': frozenset(('ok', 'instances', 'healthy', 'lines', 'problems', 'missing_hosts', 'status')),
    'kvpool_benchmark_report': frozenset(('title', 'steps', 'ttft_ms', 'reference', 'checks', 'findings', 'files')),
}
EARLIER_MARKDOWN = {'kvpool_benchmark_report': '# vLLM-Ascend KV pool TTFT benchmark'}


def markdown_header(action):
    """The first line of a Markdown report of ``action`` (its proof)."""
    return '%s.%s: replaced on the next run; rename it to keep it -->\n' % (MARKDOWN_HEADER, action)


def png_metadata(action):
    """The PNG text chunk matplotlib writes with ``savefig(metadata=...)`` (the chart's proof)."""
    return {'Software': '%s.%s' % (OWNER, action)}


def _png_software(data):
    """The value of the PNG's ``Software`` text chunk (tEXt or iTXt), or None."""
    if not data.startswith(PNG_SIGNATURE):
        return None
    pos = len(PNG_SIGNATURE)
    while pos + 8 <= len(data):
        length, kind = struct.unpack('>I4s', data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b'tEXt' and body.startswith(b'Software\x00'):
            return body.split(b'\x00', 1)[1].decode('latin-1')
        if kind == b'iTXt' and body.startswith(b'Software\x00'):
            return body.split(b'\x00', 4)[-1].decode('utf-8', 'replace') if body.count(b'\x00') >= 4 else None
        if kind == b'IEND':
            return None
        pos += 12 + length
    return None


def _earlier_json(value, action):
    """Whether the JSON ``value`` is a report of ``action`` of an earlier release (no ``written_by``, its layout)."""
    keys = EARLIER_JSON_KEYS.get(action)
    return bool(keys) and isinstance(value, dict) and WRITTEN_BY_KEY not in value and keys <= set(value)


def _listed_chart(path, action):
    """Whether the JSON report beside the chart ``path`` (same base name) is the collection's and lists ``path`` as
    its chart (the proof of a chart of an earlier release)."""
    sibling = os.path.splitext(path)[0] + '.json'
    try:
        if _why_not_ours(sibling, 'json', action) is not None:
            return False
        with open(sibling, 'rb') as handle:
            value = json.loads(handle.read(MAX_PROOF_BYTES).decode('utf-8'))
    except (IOError, OSError, ValueError):
        return False
    files = value.get('files') if isinstance(value, dict) else None
    return isinstance(files, dict) and files.get('chart') == path


def _why_not_ours(path, kind, action=None):
    """None when the regular file ``path`` is a report of the collection of ``kind`` (``json``, ``markdown``,
    ``png``), written by ``action`` in an earlier release too, else why it is not."""
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        return 'it is a symlink to %s' % os.readlink(path)
    if not stat.S_ISREG(st.st_mode):
        return 'it is not a regular file (a FIFO, socket or device node)'
    if st.st_size > MAX_PROOF_BYTES:
        return 'it is over %d MiB, larger than any report of the collection' % (MAX_PROOF_BYTES // 1024 // 1024)
    with open(path, 'rb') as handle:
        data = handle.read(MAX_PROOF_BYTES if kind != 'markdown' else 4096)
    if kind == 'png':
        software = _png_software(data)
        if (software is None or not software.startswith(OWNER + '.')) and not _listed_chart(path, action):
            return 'it is not a PNG chart with the text "Software: %s.<action>"' % OWNER
        return None
    if kind == 'json':
        try:
            value = json.loads(data.decode('utf-8'))
        except ValueError:
            return 'it is not JSON'
        owner = value.get(WRITTEN_BY_KEY) if isinstance(value, dict) else None
        if (not isinstance(owner, str) or not owner.startswith(OWNER + '.')) and not _earlier_json(value, action):
            return 'its JSON has no top-level "%s": "%s.<action>"' % (WRITTEN_BY_KEY, OWNER)
        return None
    earlier = EARLIER_MARKDOWN.get(action)
    if not data.startswith(MARKDOWN_HEADER.encode('ascii')) and not (earlier and data.startswith(earlier.encode())):
        return 'its first line is not the header "%s ... -->"' % MARKDOWN_HEADER
    return None


def check_ours(path, kind, variable, action=None):
    """Raise AnsibleActionFail naming ``path``, ``variable`` (what sets the path) and the fix unless ``path`` is
    absent, a directory (:func:`write_atomic` refuses it) or a report of the collection of ``kind`` (its proof:
    ``written_by``, the Markdown header or the PNG text; a report of ``action`` of an earlier release: its layout).
    The same in check mode: nothing is written before it."""
    if not os.path.lexists(path) or (os.path.isdir(path) and not os.path.islink(path)):
        return
    try:
        why = _why_not_ours(path, kind, action)
    except (IOError, OSError) as exc:
        why = 'it cannot be read (%s)' % (getattr(exc, 'strerror', None) or exc)
    if why:
        raise AnsibleActionFail(
            '%s exists but was not written by %s (%s), so it is not replaced. Fix: move it away or remove it if it '
            'is yours to keep or not needed, or set %s to another path' % (path, OWNER, why, variable))


def host_values(hostvars, var, hosts, keys=None):
    """``{host: value}`` of the host variable ``var`` of each of ``hosts`` that has it, as plain JSON data
    (templated, lazily evaluated host variables resolved).

    With ``keys``, for a registered module result: only those keys of it (a key ending in ``#`` gives the length of
    that list: ``results#``), read raw (``HostVars.raw_get``, where there is one). A module's result holds no
    template, and templating a whole registered result costs ansible-core 2.19 about 15 ms per host for
    hccn_facts' 58 KB, in the report's one worker, for every node."""
    raw_get = getattr(hostvars, 'raw_get', None) if keys is not None else None
    out = {}
    for host in hosts:
        if host not in hostvars:
            continue
        values = (raw_get(host) if raw_get is not None else hostvars.get(host)) or {}
        if var not in values:
            continue
        value = values[var]
        if keys is not None:
            if not isinstance(value, Mapping):
                continue
            value = dict((key, len(value[key.rstrip('#')] or []) if key.endswith('#') else value[key])
                         for key in keys if key.rstrip('#') in value)
        out[host] = json.loads(json.dumps(value, default=str))
    return out


def finite_json(value):
    """``value`` with every NaN or infinite number (a server's ``NaN`` gauge, a peer's ``Infinity``) replaced by
    None: ``json.dumps`` would write them as ``NaN`` / ``Infinity``, which no strict JSON reader (``jq``,
    JavaScript, Go) takes. Mappings, lists and tuples are walked; everything else is returned as it is."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return dict((key, finite_json(item)) for key, item in value.items())
    if isinstance(value, (list, tuple)):
        return [finite_json(item) for item in value]
    return value


def json_text(report, default=None):
    """The text of a JSON report: indented, sorted keys, NaN and infinity as null (:func:`finite_json`)."""
    return json.dumps(finite_json(report), indent=2, sort_keys=True, default=default, allow_nan=False) + '\n'


def owned_json(report, action):
    """``report`` with its proof, the top-level ``written_by: ascend.kvpool.<action>`` (only in the file)."""
    return dict(report, **{WRITTEN_BY_KEY: '%s.%s' % (OWNER, action)})


def write_json_report(path, report, action='report', variable='the report path'):
    """Write ``report`` as indented JSON to ``path`` (user and variables expanded, made absolute) with
    :func:`write_atomic`, with its proof ``written_by`` (:func:`owned_json`), after :func:`check_ours`; returns the
    path written. Raises OSError/IOError, and AnsibleActionFail for a file that is not the collection's."""
    path = os.path.abspath(os.path.expanduser(path))
    check_ours(path, 'json', variable, action)
    write_atomic(path, json_text(owned_json(report, action)))
    return path


def report_check_mode(task_check_mode, task_vars):
    """True when the run is in check mode (``--check``, or the task's own ``check_mode: true``): then no report is
    written. ``ansible_check_mode`` is the run's, also on a task that sets ``check_mode: false``."""
    return bool(task_check_mode or task_vars.get('ansible_check_mode'))


def report_line(path, check_mode):
    """The line that says where the report is: written, or in check mode where a run writes it."""
    if check_mode:
        return 'check mode: no report written (a run writes %s)' % path
    return 'report: %s' % path


class ControllerReportAction(ActionBase):
    """Base of the report actions: they run in the controller's own process, need no connection and copy no file.

    A subclass sets ``ARGUMENT_SPEC`` and ``NAME`` and implements ``report(result, args, task_vars)``, which gets
    the validated arguments and returns the task result.
    """

    TRANSFERS_FILES = False
    _requires_connection = False
    ARGUMENT_SPEC = {}
    NAME = 'report'  # the action's name: its files' proof says ascend.kvpool.<NAME>

    def run(self, tmp=None, task_vars=None):
        result = super(ControllerReportAction, self).run(tmp, task_vars)
        del tmp
        dummy, args = self.validate_argument_spec(argument_spec=self.ARGUMENT_SPEC)
        # --check writes no report, even on a task with check_mode: false (the network check's reads are real in
        # check mode, its report task too): ansible_check_mode is the run's --check. Option write_in_check_mode
        # (where an action has it) writes it all the same: the check's own report.
        self.check_mode = report_check_mode(self._task.check_mode, task_vars or {}) and not args.get(
            'write_in_check_mode')
        try:
            return self.report(result, args, task_vars or {})
        except AnsibleError:
            raise
        except Exception as exc:  # pylint: disable=broad-except  # the guard of every module, for the actions
            result.update(failed=True, exception=traceback.format_exc(),
                          msg=unexpected_message(self._task.action.split('.')[-1], exc, 'arguments',
                                                 ', '.join('%s=%r' % (k, args[k]) for k in sorted(args))))
            return result

    def report(self, result, args, task_vars):
        raise NotImplementedError

    def write_report(self, path, report, variable):
        """:func:`write_json_report`, failing the task with a message that names ``variable`` (the role variable
        that sets ``path``) when the file cannot be written or is not the collection's. In check mode nothing is
        written: the path a run would write is returned after the same :func:`check_ours` (a file that is not the
        collection's fails check mode as it would fail the run)."""
        if self.check_mode:
            path = os.path.abspath(os.path.expanduser(path))
            check_ours(path, 'json', variable, self.NAME)
            return path
        try:
            return write_json_report(path, report, self.NAME, variable)
        except (IOError, OSError) as e:
            raise AnsibleActionFail('cannot write the report to %s: %s (set %s)'
                                    % (path, e.strerror or e, variable)) from e
