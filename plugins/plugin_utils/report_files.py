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


def write_json_report(path, report):
    """Write ``report`` as indented JSON to ``path`` (user and variables expanded, made absolute) with
    :func:`write_atomic`; returns the path written. Raises OSError/IOError."""
    path = os.path.abspath(os.path.expanduser(path))
    write_atomic(path, json_text(report))
    return path


class ControllerReportAction(ActionBase):
    """Base of the report actions: they run in the controller's own process, need no connection and copy no file.

    A subclass sets ``ARGUMENT_SPEC`` and implements ``report(result, args, task_vars)``, which gets the validated
    arguments and returns the task result.
    """

    TRANSFERS_FILES = False
    _requires_connection = False
    ARGUMENT_SPEC = {}

    def run(self, tmp=None, task_vars=None):
        result = super(ControllerReportAction, self).run(tmp, task_vars)
        del tmp
        dummy, args = self.validate_argument_spec(argument_spec=self.ARGUMENT_SPEC)
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

    @staticmethod
    def write_report(path, report, variable):
        """:func:`write_json_report`, failing the task with a message that names ``variable`` (the role variable
        that sets ``path``) when the file cannot be written."""
        try:
            return write_json_report(path, report)
        except (IOError, OSError) as e:
            raise AnsibleActionFail('cannot write the report to %s: %s (set %s)'
                                    % (path, e.strerror or e, variable)) from e
