# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Pure parsers of the host facts the pre-flight checks read (``/proc/meminfo``, ``/proc/net/tcp{,6}``).

Everything here takes text and returns data, so it is unit-tested over recorded outputs; the module
``preflight_facts`` does the reading.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ipaddress
import re

TCP_LISTEN = '0A'
# Keys include parentheses: Active(anon), Inactive(file)...
_MEM_RE = re.compile(r'^([\w()]+):\s+(\d+)(?:\s+kB)?\s*$')


def parse_meminfo(text):
    """``/proc/meminfo`` -> {'MemTotal': bytes, 'MemAvailable': bytes, ...} (kB values converted to bytes)."""
    out = {}
    for line in (text or '').splitlines():
        m = _MEM_RE.match(line.strip())
        if m:
            value = int(m.group(2))
            out[m.group(1)] = value * 1024 if line.rstrip().endswith('kB') else value
    return out


def _hex_address(text):
    """Address of a /proc/net/tcp{,6} ``local_address`` field (little-endian hex words) as text."""
    if len(text) == 8:
        raw = bytes.fromhex(text)[::-1]
        return '.'.join(str(b) for b in raw)
    if len(text) == 32:
        words = [bytes.fromhex(text[i:i + 8])[::-1] for i in range(0, 32, 8)]
        raw = b''.join(words)
        if raw[:12] == b'\x00' * 10 + b'\xff\xff':  # IPv4-mapped
            return '.'.join(str(b) for b in raw[12:])
        return ipaddress.IPv6Address(raw).compressed  # RFC 5952: the first longest run of zeros is '::'
    return text


def parse_net_tcp(text):
    """``/proc/net/tcp`` or ``/proc/net/tcp6`` -> listening sockets [{'address', 'port', 'inode', 'uid'}]."""
    out = []
    for line in (text or '').splitlines()[1:]:
        fields = line.split()
        if len(fields) < 10 or fields[3] != TCP_LISTEN or ':' not in fields[1]:
            continue
        addr, port = fields[1].rsplit(':', 1)
        try:
            out.append({'address': _hex_address(addr), 'port': int(port, 16), 'inode': int(fields[9]),
                        'uid': int(fields[7])})
        except ValueError:
            continue
    return out


def socket_inode(link):
    """The inode of a ``/proc/<pid>/fd/<n>`` link text ``socket:[12345]``, or None."""
    m = re.match(r'^socket:\[(\d+)\]$', link or '')
    return int(m.group(1)) if m else None


def wildcard(address):
    """Whether a listen address is every interface (``0.0.0.0`` or ``::``)."""
    return address in ('0.0.0.0', '::')


# --- Ascend software versions, glibc ------------------------------------------------------------------------------
# The files the guide mounts into the vllm-ascend container, and the toolkit's install record:
# - /etc/ascend_install.info: the driver's install record, shell key=value lines (Driver_Install_Type=full,
#   UserName=HwHiAiUser, Driver_Install_Path_Param=/usr/local/Ascend, Driver_Install_Mode=normal, ...); the driver's
#   own scripts source it and read Driver_Install_Path_Param to find <path>/driver/version.info.
# - <driver path>/driver/version.info: Version=<HDK driver version> (24.1.rc2, 25.5.0, ...), package_version=...,
#   ascendhal_version=..., Innerversion=V100R001C..., compatible_version=[...].
# - the CANN toolkit's <arch>-linux/ascend_toolkit_install.info: package_name=Ascend-cann-toolkit, version=8.0.RC2
#   (or 9.1.0), innerversion=..., arch=..., path=...; under /usr/local/Ascend/ascend-toolkit/latest (CANN < 8.5 and
#   the vllm-ascend images) or /usr/local/Ascend/cann (8.5+), or a versioned cann-<v> directory.
ASCEND_INSTALL_INFO = '/etc/ascend_install.info'
DEFAULT_DRIVER_INSTALL_PATH = '/usr/local/Ascend'
TOOLKIT_INFO_GLOBS = (
    '/usr/local/Ascend/ascend-toolkit/latest/*-linux/ascend_toolkit_install.info',
    '/usr/local/Ascend/cann/*-linux/ascend_toolkit_install.info',
    '/usr/local/Ascend/cann-*/*-linux/ascend_toolkit_install.info',
)
_KV_RE = re.compile(r'^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_.-]*)\s*=\s*(.*?)\s*$')


def parse_key_values(text):
    """``key=value`` lines (the Ascend install and version files) -> dict; quotes around a value dropped, comments,
    blank and other lines ignored; the first of a repeated key wins (as ``grep -m1`` in the vendor scripts)."""
    out = {}
    for line in (text or '').splitlines():
        if line.lstrip().startswith('#'):
            continue
        m = _KV_RE.match(line)
        if not m:
            continue
        value = m.group(2)
        if len(value) >= 2 and value[0] == value[-1] and value[0] in '"\'':
            value = value[1:-1]
        out.setdefault(m.group(1), value)
    return out


def driver_install_path(install_info_text):
    """The driver's install path of an ``/etc/ascend_install.info`` text (its ``Driver_Install_Path_Param``, any
    case of the key as the vendor scripts' ``grep -i``), else the vendor default ``/usr/local/Ascend``."""
    for key, value in parse_key_values(install_info_text).items():
        if key.lower() == 'driver_install_path_param' and value.strip():
            return value.strip().rstrip('/') or '/'
    return DEFAULT_DRIVER_INSTALL_PATH


def driver_version(version_info_text):
    """The driver (HDK) version of a ``driver/version.info`` text (``Version=``, else ``package_version=``), or
    None."""
    values = dict((k.lower(), v) for k, v in parse_key_values(version_info_text).items())
    return values.get('version') or values.get('package_version') or None


def toolkit_version(info_text):
    """The CANN version of an ``ascend_toolkit_install.info`` text (``version=``), or None."""
    values = dict((k.lower(), v) for k, v in parse_key_values(info_text).items())
    return values.get('version') or None


_LDD_RE = re.compile(r'^ldd \(.*\)\s+(\d+\.\d+)\s*$')
_CONFSTR_RE = re.compile(r'^glibc\s+(\d+\.\d+)')


def glibc_version(ldd_output):
    """The glibc version of ``ldd --version`` output (first line ``ldd (Debian GLIBC 2.36-9+deb12u10) 2.36`` or
    ``ldd (GNU libc) 2.34``) or of ``os.confstr('CS_GNU_LIBC_VERSION')`` (``glibc 2.36``); None otherwise
    (musl's ldd prints no such line)."""
    lines = (ldd_output or '').strip().splitlines()
    if not lines:
        return None
    m = _LDD_RE.match(lines[0].strip()) or _CONFSTR_RE.match(lines[0].strip())
    return m.group(1) if m else None
