# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Validators the modules share for what an argument spec cannot say (Python 3.8+).

Each takes the value and the option's name, returns the value to use, and raises
:class:`~ansible_collections.ascend.kvpool.plugins.module_utils._errors.KvpoolError` with a message that names the
option, what is wrong and the fix. A module calls them in one place, right after ``AnsibleModule(...)``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.ascend.kvpool.plugins.module_utils._errors import KvpoolError

try:
    from urllib.parse import urlsplit
except ImportError:  # pragma: no cover - Python 2 is not supported by this collection
    urlsplit = None

_COMPONENT = re.compile(r'^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$')


def path_component(value, option):
    """A name the module uses as one directory or file name under a directory of its own: letters, digits, ``.``,
    ``_`` and ``-``, starting with a letter or digit, at most 64 characters (so never empty, ``.``, ``..``, absolute
    or with a ``/``)."""
    text = '' if value is None else str(value)
    if not _COMPONENT.match(text) or text in ('.', '..'):
        raise KvpoolError('%s=%r cannot be used as a directory name: use 1-64 letters, digits, ".", "_" or "-", '
                          'starting with a letter or digit (no "/", no ".."), for example step1' % (option, text))
    return text


def http_url(value, option):
    """An ``http://`` or ``https://`` URL with a host (``host:port`` alone gets ``http://``); returns it without a
    trailing ``/``."""
    text = ('' if value is None else str(value)).strip()
    candidate = text if '://' in text else 'http://' + text
    try:
        parts = urlsplit(candidate)
        port = parts.port
    except ValueError as exc:
        raise KvpoolError('%s=%r is not a URL (%s): use http://HOST:PORT' % (option, text, exc)) from exc
    if parts.scheme not in ('http', 'https') or not parts.hostname or any(c.isspace() for c in candidate):
        raise KvpoolError('%s=%r is not an http:// or https:// URL with a host: use http://HOST:PORT[/path]'
                          % (option, text))
    del port
    return candidate.rstrip('/')
