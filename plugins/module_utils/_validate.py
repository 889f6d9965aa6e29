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
import math
import os
import re
import stat

from ansible_collections.ascend.kvpool.plugins.module_utils import _shared
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


def host_address(value, option, port_option=None, example='172.31.250.11', empty=True):
    """A listen or peer address: one host (:func:`_shared.address_problem`: an IP address, IPv6 bare or in
    brackets, or a host name; a wildcard, or none when ``empty``), never ``host:port``, a URL or a blank. Returns it
    as given; a KvpoolError names the option, what the value carries and the fix (``port_option``: where the port
    goes)."""
    text = '' if value is None else str(value)
    if not text.strip() and not empty:
        raise KvpoolError('%s is empty: give the address (for example %s)' % (option, example))
    problem = _shared.address_problem(text)
    if problem:
        where = ('; the port is set with %s' % port_option) if port_option else ''
        raise KvpoolError('%s=%r is not one address, it has %s: give the address alone (for example %s)%s'
                          % (option, text, problem, example, where))
    return value


def int_range(value, option, low, high=None, why=''):
    """``value`` within [low, high] (``high`` None: no upper bound), else a KvpoolError naming the option, the
    value and the range."""
    bad = value is None or isinstance(value, bool) or not isinstance(value, int)
    if bad or value < low or (high is not None and value > high):
        allowed = 'is out of range %d-%d' % (low, high) if high is not None else 'must be at least %d' % low
        note = (' (%s)' % why) if why else ''
        raise KvpoolError('%s=%r %s%s' % (option, value, allowed if not bad else 'is not a whole number', note))
    return value


def port(value, option, none=False):
    """A TCP port (1-65535; 0 too, meaning none, when ``none``), else a KvpoolError naming the option and the value:
    the rule of every port option of the modules (:func:`_shared.is_port` is the same test without a message)."""
    return int_range(value, option, 0 if none else 1, 65535, 'a TCP port, 0 for none' if none else 'a TCP port')


def number_range(value, option, low=None, high=None, above=None, why=''):
    """A finite number (int or float, not a bool) at least ``low`` (or strictly above ``above``) and at most
    ``high``, else a KvpoolError naming the option, the value and the range. NaN and infinity are refused: a
    timeout of either would never end, or end at once."""
    bad = value is None or isinstance(value, bool) or not isinstance(value, (int, float)) or \
        not math.isfinite(value)
    if bad or (low is not None and value < low) or (above is not None and value <= above) or \
            (high is not None and value > high):
        parts = []
        if above is not None:
            parts.append('above %s' % _num(above))
        if low is not None:
            parts.append('at least %s' % _num(low))
        if high is not None:
            parts.append('at most %s' % _num(high))
        note = (' (%s)' % why) if why else ''
        raise KvpoolError('%s=%r must be a finite number %s%s' % (option, value, ' and '.join(parts), note))
    return value


def _num(value):
    return ('%d' % value) if float(value) == int(value) else ('%g' % value)


ENV_NAME = re.compile(r'^[A-Za-z_][A-Za-z0-9_]*$')


def env_names(names, option):
    """Names of environment variables as a shell and systemd take them (letters, digits, ``_``, not starting with
    a digit: never empty, never with ``=``); a KvpoolError names every bad one."""
    bad = [repr(str(name)) for name in names if not ENV_NAME.match(str(name))]
    if bad:
        raise KvpoolError('%s: not valid environment variable names: %s (use letters, digits and "_", not starting '
                          'with a digit; no "=", not empty)' % (option, ', '.join(bad)))


def environment(value, option):
    """An environment dict as the process gets it: names checked by :func:`env_names`, values as strings, a null
    value the empty string (never ``"None"``). A NUL byte in a value is refused (no environment can hold it)."""
    items = sorted((value or {}).items(), key=lambda kv: str(kv[0]))
    env_names([key for key, dummy in items], option)
    env = {}
    for key, item in items:
        name = str(key)
        if isinstance(item, (dict, list)):
            raise KvpoolError('%s.%s is a %s, not a value: give a string' % (option, name, type(item).__name__))
        text = '' if item is None else str(item)
        if '\0' in text:
            raise KvpoolError('%s.%s holds a NUL byte, which no environment can hold: remove it' % (option, name))
        env[name] = text
    return env


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


# Directories the system owns. A directory that a module writes or removes its own files in must not be one of them
# or below one, as given or through a symlink (a state_dir linked to /etc would put the collection's files there);
# the collection's own directory under /etc is the exception.
SYSTEM_DIRS = ('/etc', '/usr', '/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32', '/boot', '/dev', '/proc', '/sys')
OWN_SYSTEM_DIRS = ('/etc/ascend-kvpool',)


def _under(path, top):
    return path == top or path.startswith(top.rstrip('/') + '/')


def _label(option, path):
    return ('%s=%s' if re.match(r'^[A-Za-z_][A-Za-z0-9_.]*$', option) else '%s %s') % (option, path)


def os_reason(exc, path=None):
    """Why an OS call on ``path`` failed, in words an operator acts on."""
    code = getattr(exc, 'errno', None)
    if code == errno.EROFS:
        return 'it is on a read-only filesystem (remount it read-write, or choose a directory on a writable one)'
    if code in (errno.EACCES, errno.EPERM):
        return 'permission denied (run the task as root: become: true; or fix the mode of %s)' % (
            os.path.dirname(path) if path else 'its directory')
    if code == errno.ENOSPC:
        return 'no space left on its filesystem'
    if code == errno.ENOTDIR:
        return 'a part of the path is a file, not a directory'
    return getattr(exc, 'strerror', None) or str(exc)


def _file_above(path):
    """The nearest ancestor of ``path`` that exists and is not a directory, or None."""
    parent = os.path.dirname(path)
    while parent and parent != os.path.dirname(parent):
        if os.path.lexists(parent):
            return None if os.path.isdir(parent) else parent
        parent = os.path.dirname(parent)
    return None


def directory(path, option, create=False, mode=0o755, writable=False, system_ok=False,
              example='/var/lib/ascend-kvpool'):
    """A directory a module keeps its own files in, checked before anything is written or removed there.

    ``option`` names it in the messages (an option name, or words such as ``the secrets directory``). Refused with
    a :class:`KvpoolError` that names it and the path: a relative path; a path that resolves (as given or through a
    symlink) to ``/`` or into a system directory (``SYSTEM_DIRS``, unless ``system_ok``); a path that exists and is
    not a directory, or lies below a file; with ``create``, one that cannot be made (read-only filesystem,
    permission); with ``writable``, an existing one on a read-only filesystem or that cannot be written. Returns
    the path as given. A missing directory is fine without ``create`` (nothing of the module's is there).
    """
    text = '' if path is None else str(path)
    name = _label(option, text)
    if not os.path.isabs(text):
        raise KvpoolError('%s is not an absolute path: give the full path, for example %s' % (name, example))
    real = os.path.realpath(text)
    if not system_ok and (real == '/' or (any(_under(real, d) for d in SYSTEM_DIRS)
                                          and not any(_under(real, d) for d in OWN_SYSTEM_DIRS))):
        how = 'is' if real == os.path.normpath(text) else 'leads through a symlink to %s,' % real
        raise KvpoolError('%s %s a system directory: the module writes or removes its own files there, so it must '
                          'be a directory of its own (for example %s), not one of the system\'s nor a link into one'
                          % (name, how, example))
    try:
        info = os.stat(text)
    except OSError as exc:
        info = None
        if exc.errno == errno.ENOTDIR:
            above = _file_above(text)
            raise KvpoolError('%s is below %s, which is a file, not a directory: remove that file or choose another '
                              'directory' % (name, above or 'a file')) from exc
        if exc.errno != errno.ENOENT:
            raise KvpoolError('%s cannot be used: %s' % (name, os_reason(exc, text))) from exc
    if info is not None and not stat.S_ISDIR(info.st_mode):
        what = 'a file' if stat.S_ISREG(info.st_mode) else 'a FIFO, socket or device node'
        raise KvpoolError('%s is %s, not a directory: remove it or choose another directory' % (name, what))
    if info is None and create:
        try:
            os.makedirs(text, mode)
        except OSError as exc:
            if exc.errno != errno.EEXIST or not os.path.isdir(text):
                raise KvpoolError('%s cannot be created: %s' % (name, os_reason(exc, text))) from exc
    elif info is not None and writable:
        try:
            readonly = bool(os.statvfs(text).f_flag & getattr(os, 'ST_RDONLY', 1))
        except OSError:
            readonly = False
        if readonly:
            raise KvpoolError('%s cannot be written: %s' % (name, os_reason(OSError(errno.EROFS, 'read-only'), text)))
        if not os.access(text, os.W_OK | os.X_OK):
            raise KvpoolError('%s cannot be written: %s' % (name, os_reason(OSError(errno.EACCES, 'denied'), text)))
    return text
