# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Pure parsers of the host facts the pre-flight checks read (``/proc/meminfo``, ``/proc/net/tcp{,6}``, the
ephemeral port range and its reserved ports).

Everything here takes text and returns data, so it is unit-tested over recorded outputs; the module
``preflight_facts`` does the reading.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ipaddress
import re

from ansible_collections.ascend.kvpool.plugins.module_utils._proc import PYTHON_NAME
from ansible_collections.ascend.kvpool.plugins.module_utils._shared import is_wildcard

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


def _net_tcp_rows(text):
    """The rows of ``/proc/net/tcp`` or ``/proc/net/tcp6``: local and remote address and port, the state's hex code,
    and ``uid`` and ``inode`` (None on a row too short to have them). Malformed rows are left out."""
    for line in (text or '').splitlines()[1:]:
        fields = line.split()
        if len(fields) < 4 or ':' not in fields[1] or ':' not in fields[2]:
            continue
        try:
            laddr, lport = fields[1].rsplit(':', 1)
            raddr, rport = fields[2].rsplit(':', 1)
            row = {'address': _hex_address(laddr), 'port': int(lport, 16), 'remote_address': _hex_address(raddr),
                   'remote_port': int(rport, 16), 'state': fields[3].upper(), 'uid': None, 'inode': None}
            if len(fields) >= 10:
                row['uid'], row['inode'] = int(fields[7]), int(fields[9])
        except ValueError:
            continue
        yield row


def parse_net_tcp(text):
    """``/proc/net/tcp`` or ``/proc/net/tcp6`` -> listening sockets [{'address', 'port', 'inode', 'uid'}]."""
    return [dict((k, row[k]) for k in ('address', 'port', 'inode', 'uid')) for row in _net_tcp_rows(text)
            if row['state'] == TCP_LISTEN and row['inode'] is not None]


def socket_inode(link):
    """The inode of a ``/proc/<pid>/fd/<n>`` link text ``socket:[12345]``, or None."""
    m = re.match(r'^socket:\[(\d+)\]$', link or '')
    return int(m.group(1)) if m else None


def wildcard(address):
    """Whether a listening socket's address is every interface (``0.0.0.0`` or ``::``: _shared's rule)."""
    return bool(address) and is_wildcard(address)


def parse_net_tcp_port(text, port):
    """``/proc/net/tcp{,6}`` -> every socket whose local port is ``port``, in any state:
    [{'local', 'remote', 'state'}] with ``state`` as ``ss`` names it (``LISTEN``, ``TIME-WAIT``, ``ESTAB``, ...).
    A listener cannot bind a port that an outgoing connection of the node holds, in any state but ``CLOSE``."""
    return [{'local': '%s:%d' % (row['address'], row['port']),
             'remote': '%s:%d' % (row['remote_address'], row['remote_port']),
             'state': TCP_STATES.get(row['state'], row['state'])}
            for row in _net_tcp_rows(text) if row['port'] == port]


# The states of include/net/tcp_states.h, as ss prints them.
TCP_STATES = {'01': 'ESTAB', '02': 'SYN-SENT', '03': 'SYN-RECV', '04': 'FIN-WAIT-1', '05': 'FIN-WAIT-2',
              '06': 'TIME-WAIT', '07': 'CLOSE', '08': 'CLOSE-WAIT', '09': 'LAST-ACK', '0A': 'LISTEN',
              '0B': 'CLOSING', '0C': 'NEW-SYN-RECV'}


# Where the kernel keeps the ephemeral port range and the ports reserved from it (read by the modules).
PORT_RANGE_PATH = '/proc/sys/net/ipv4/ip_local_port_range'
RESERVED_PORTS_PATH = '/proc/sys/net/ipv4/ip_local_reserved_ports'
_DIGITS = re.compile(r'^[0-9]+$')  # ASCII only: str.isdigit() takes '\u00b9', which int() refuses


def parse_port_range(text):
    """``/proc/sys/net/ipv4/ip_local_port_range`` (``32768<TAB>60999``) -> [first, last], or None when unreadable."""
    parts = (text or '').split()
    if len(parts) != 2 or not all(_DIGITS.match(p) for p in parts):
        return None
    first, last = int(parts[0]), int(parts[1])
    return [first, last] if 0 < first <= last <= 65535 else None


def parse_reserved_ports(text):
    """``/proc/sys/net/ipv4/ip_local_reserved_ports`` (``50088,8000-8010`` or empty) -> [[first, last], ...];
    the parts that are not a port or a range are left out."""
    out = []
    for part in (text or '').strip().split(','):
        first, dash, last = part.strip().partition('-')
        last = last if dash else first
        if _DIGITS.match(first) and _DIGITS.match(last) and 0 < int(first) <= int(last) <= 65535:
            out.append([int(first), int(last)])
    return out


def ephemeral_unreserved(port, port_range, reserved):
    """Whether ``port`` lies in the ephemeral range and no reserved range holds it: then any outgoing connection
    of the node may take it as its local port (and keep it through TIME-WAIT), and a service binding it fails."""
    if not port_range or not port_range[0] <= port <= port_range[1]:
        return False
    return not any(first <= port <= last for first, last in reserved or [])


def reserved_ports_text(reserved, ports):
    """The value of ``net.ipv4.ip_local_reserved_ports`` that keeps ``reserved`` and adds ``ports``
    (``8000-8010,50088``)."""
    ranges = sorted([list(r) for r in reserved or []] + [[p, p] for p in ports])
    merged = []
    for first, last in ranges:
        if merged and first <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], last)
        else:
            merged.append([first, last])
    return ','.join(str(a) if a == b else '%d-%d' % (a, b) for a, b in merged)


def _remote_port(sock):
    port = str(sock.get('remote') or '').rpartition(':')[2]
    return int(port) if _DIGITS.match(port) else 0


def port_held_hint(port, sockets, port_range=None, reserved=None):
    """What a failed start adds when connections that the node opened hold the service's ``port`` (``sockets`` as
    :func:`parse_net_tcp_port` gives them): '' when none does. Listeners are left to the port checks, and so are
    connections the service itself accepted before (their remote port is a client's, inside the ephemeral range:
    they share the listener's SO_REUSEADDR and do not keep a restart from binding)."""
    held = [s for s in sockets or [] if s.get('state') not in ('LISTEN', 'CLOSE')
            and not (port_range and port_range[0] <= _remote_port(s) <= port_range[1])]
    if not held:
        return ''
    shown = ', '.join('%s %s -> %s' % (s['state'], s['local'], s['remote']) for s in held[:3])
    more = ' and %d more' % (len(held) - 3) if len(held) > 3 else ''
    text = ('port %d is held by %d connection(s) of this node (%s%s), so the service cannot bind it'
            % (port, len(held), shown, more))
    if ephemeral_unreserved(port, port_range, reserved):
        value = reserved_ports_text(reserved, [port])
        text += ('; the port is inside the ephemeral port range %d-%d and not reserved. Fix: sysctl -w '
                 'net.ipv4.ip_local_reserved_ports=%s (and the same in a file of /etc/sysctl.d/), then start it '
                 'again once those connections are gone (TIME-WAIT lasts 60 s)' % (port_range[0], port_range[1], value))
    else:
        text += '. Fix: start it again once those connections are gone (TIME-WAIT lasts 60 s), or choose another port'
    return text


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


# --- the Mooncake master's shared libraries -----------------------------------------------------------------------
# The PyPI wheels put the real mooncake_master in <site-packages>/mooncake/ and a pip console script of
# ``mooncake.cli:main`` on PATH, which runs it (subprocess in 0.3.12, exec from 0.3.13); ldd must read the real
# binary. mooncake-transfer-engine-non-cuda 0.3.12.post1 links libcudart.so.12 and does not ship it: its master
# stops at once with ``error while loading shared libraries: libcudart.so.12: cannot open shared object file``.
# Where the service module looks for a bare name besides PATH (as mooncake_master's BINARY_DIRS).
MASTER_BINARY_DIRS = ('/usr/local/bin', '/usr/local/python3*/bin', '/opt/*/bin')
MOONCAKE_CLI_IMPORT = 'from mooncake.cli import main'
# Run by the wrapper's own interpreter: where it finds the package ``mooncake``, one directory a line, without
# importing it (find_spec of a top-level name runs none of the package's code, so a broken install still answers).
MOONCAKE_LOCATE_CODE = ("import importlib.util\n"
                        "s = importlib.util.find_spec('mooncake')\n"
                        "print('\\n'.join(s.submodule_search_locations or []) if s else '')\n")
_LDD_NOT_FOUND_RE = re.compile(r'^\s*(\S+)\s+=>\s+not found\s*$')
# pip's (distlib's) console script when the interpreter's path is too long for a shebang or has a blank:
#   #!/bin/sh
#   '''exec' /long/path/bin/python3 "$0" "$@"        (or '''exec' "/path with blanks/python3" "$0" "$@")
_SH_EXEC_RE = re.compile(r'''^'{3}exec' (?:"([^"]+)"|(\S+))((?: \S+)*?) "\$0" "\$@"\s*$''')


def ldd_not_found(text):
    """The lines of ``ldd <binary>`` output that name a library the dynamic loader cannot find
    (``\\tlibcudart.so.12 => not found``), stripped, in order, each once."""
    out = []
    for line in (text or '').splitlines():
        if _LDD_NOT_FOUND_RE.match(line) and line.strip() not in out:
            out.append(line.strip())
    return out


def parse_ldd_missing(text):
    """The libraries ``ldd <binary>`` reports ``=> not found`` (``['libcudart.so.12']``), in order, each once."""
    return [_LDD_NOT_FOUND_RE.match(line).group(1) for line in ldd_not_found(text)]


def _is_python(path):
    return bool(PYTHON_NAME.match(path.rstrip('/').rpartition('/')[2]))


def console_script_interpreter(text):
    """The interpreter argv of a pip console script of ``mooncake.cli`` (the text of a ``mooncake_master`` found on
    PATH), or None when the text is something else (the binary itself, a shell script, another program).

    The script is one when its shebang names a python (``#!/venv/bin/python3``, ``#!/usr/bin/env python3``, or
    pip's ``#!/bin/sh`` + ``'''exec' <python> "$0" "$@"`` for long paths) and it has ``from mooncake.cli import
    main``. The real binary is ``mooncake_master`` in the directory where that interpreter finds the package
    ``mooncake`` (:data:`MOONCAKE_LOCATE_CODE`, run by the module)."""
    lines = (text or '').splitlines()
    if not lines or not lines[0].startswith('#!'):
        return None
    if not any(line.strip() == MOONCAKE_CLI_IMPORT for line in lines[1:]):
        return None
    argv = lines[0][2:].split()
    if argv and argv[0].rpartition('/')[2] in ('sh', 'bash', 'dash') and len(lines) > 1:
        m = _SH_EXEC_RE.match(lines[1])
        if not m:
            return None
        argv = [m.group(1) or m.group(2)] + m.group(3).split()
    if not argv:
        return None
    if argv[0].rpartition('/')[2] == 'env':
        names = [a for a in argv[1:] if not a.startswith('-') and '=' not in a]
        return argv if names and _is_python(names[0]) else None
    return argv if _is_python(argv[0]) else None


def mooncake_locations(output):
    """The directories :data:`MOONCAKE_LOCATE_CODE` printed (absolute paths only), in order."""
    return [line.strip() for line in (output or '').splitlines() if line.strip().startswith('/')]


def wheel_of_dist_info(name):
    """``mooncake_transfer_engine_non_cuda-0.3.12.post1.dist-info`` -> ``mooncake-transfer-engine-non-cuda
    0.3.12.post1`` (the distribution and version pip installed), or None for another name."""
    m = re.match(r'^([A-Za-z0-9_.]+)-([^-/]+)\.dist-info$', (name or '').rstrip('/').rpartition('/')[2])
    return '%s %s' % (m.group(1).replace('_', '-').lower(), m.group(2)) if m else None
