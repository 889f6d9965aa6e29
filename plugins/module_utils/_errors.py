# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The collection's own error types and ``outcome``, which runs every module's work (Python 3.8+).

- :class:`KvpoolError`: a message for the operator that names the input (option, host, file), what is wrong with
  it and the fix. A module turns it into a plain task failure.
- :class:`ParseError`: text that is not what the tool prints. Every parser of the collection returns a verdict or
  raises this, and nothing else (the Hypothesis properties under ``tests/unit`` hold them to that). It is also a
  ``ValueError``, so older callers that catch ``ValueError`` keep working.
- :func:`outcome`: runs a module's work and returns ``(failed, result)`` for the module's ``main()``, which alone
  calls ``exit_json`` or ``fail_json``: no library code exits. A :class:`KvpoolError` becomes a plain failure with
  its message and the result fields it carries (a unit name, a logs hint, a pid); any other exception a failure
  whose message names the module and its input (no traceback in the task's ``msg``; the traceback is kept in
  ``exception``, shown with ``-vvv``). Values of ``no_log`` options are masked by ``fail_json`` as everywhere else.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import traceback


class KvpoolError(Exception):
    """A failure whose message names the input and the fix.

    ``result`` (keyword only): the fields the failed task still returns next to ``msg`` (a unit name, a logs hint,
    a log tail); the module's ``main()`` passes them to ``fail_json``."""

    def __init__(self, *args, **kwargs):
        self.result = dict(kwargs.pop('result', None) or {})
        super(KvpoolError, self).__init__(*args, **kwargs)


class ParseError(KvpoolError, ValueError):
    """Text that is not what the tool prints (empty, garbage, truncated, an error printed with exit code 0)."""


def unexpected_message(name, exc, what, inputs):
    """The message of a failure the collection did not expect, in a module (``what`` 'input') or an action plugin
    ('arguments'): it names the plugin, the error and what it was given."""
    return ('ascend.kvpool.%s failed unexpectedly (%s: %s) with the %s %s. The collection does not handle this case '
            'yet: check the %s named above, and report this message.'
            % (name, type(exc).__name__, exc, what, inputs, what))


def _inputs(module):
    params = getattr(module, 'params', None) or {}
    shown = []
    for key in sorted(params):
        if key.startswith('_'):
            continue
        value = params[key]
        text = repr(value)
        if len(text) > 80:
            text = text[:77] + '...'
        shown.append('%s=%s' % (key, text))
    return ', '.join(shown)


def outcome(module, body, *args, **kwargs):
    """``(failed, result)`` of ``body(*args, **kwargs)``, which returns the module's result dict (None: an empty
    one). Never exits: the module's ``main()`` calls ``fail_json(**result)`` or ``exit_json(**result)``."""
    try:
        return False, body(*args, **kwargs) or {}
    except KvpoolError as exc:
        return True, dict(exc.result, msg=str(exc))
    except Exception as exc:  # pylint: disable=broad-except
        name = getattr(module, '_name', None) or 'module'
        return True, dict(msg=unexpected_message(name, exc, 'input', _inputs(module)),
                          exception=traceback.format_exc())
