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

import errno
import ipaddress
import os
import re
import stat

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


def ipv4_address(value, option):
    """A dotted-quad IPv4 address, as the NPU RoCE ports have (no name, no blank, nothing that an argv reader could
    take for an option)."""
    text = '' if value is None else str(value)
    try:
        ipaddress.IPv4Address(text)
    except ValueError as exc:
        raise KvpoolError('%s=%r is not an IPv4 address (for example 29.1.2.81): use the NPU port address that '
                          'hccn_tool -ip -g prints' % (option, text)) from exc
    return text


def int_range(value, option, low, high, why=''):
    """``value`` within [low, high], else a KvpoolError naming the option and the range."""
    if value is None or isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise KvpoolError('%s=%r is out of range %d-%d%s' % (option, value, low, high, (' (%s)' % why) if why else ''))
    return value


class FileProblem(KvpoolError):
    """A configuration file that cannot be used; ``missing`` tells a file that is not there from one that is
    there but unusable (a directory, a FIFO, unreadable, too large, not UTF-8)."""

    def __init__(self, message, missing=False):
        super(FileProblem, self).__init__(message)
        self.missing = missing


def read_text_file(path, limit=1 << 20):
    """The text of a small configuration file that the module reads (``/etc/hccn.conf`` and the like).

    Never hangs and never reads more than ``limit`` bytes: only a regular file is opened (a FIFO, a device or a
    socket is refused before ``open``, and the open is non-blocking in case the path changes in between). Raises
    :class:`FileProblem` naming the path, what is wrong and the fix.
    """
    try:
        info = os.stat(path)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            raise FileProblem('%s is missing' % path, missing=True) from exc
        raise FileProblem('%s cannot be read: %s (run as root, or fix its mode or its directory)'
                          % (path, exc.strerror or exc)) from exc
    if stat.S_ISDIR(info.st_mode):
        raise FileProblem('%s is a directory, not a file: point the option at the file itself' % path)
    if not stat.S_ISREG(info.st_mode):
        raise FileProblem('%s is not a regular file (a FIFO, socket or device node): not read, so nothing can hang; '
                          'replace it with the file itself' % path)
    if info.st_size > limit:
        raise FileProblem('%s is %d bytes, more than the %d a file of this kind can be: not read; is it the right '
                          'file?' % (path, info.st_size, limit))
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, 'O_NONBLOCK', 0))
        with os.fdopen(fd, 'rb') as handle:
            data = handle.read(limit + 1)
    except (IOError, OSError) as exc:
        raise FileProblem('%s cannot be read: %s (run as root, or fix its mode)' % (path, exc.strerror or exc)) from exc
    if len(data) > limit:
        raise FileProblem('%s is more than %d bytes: not read; is it the right file?' % (path, limit))
    try:
        return data.decode('utf-8')
    except UnicodeDecodeError as exc:
        raise FileProblem('%s is not UTF-8 text (byte 0x%02x at offset %d): save it as plain text'
                          % (path, bytearray(data[exc.start:exc.start + 1])[0], exc.start)) from exc
