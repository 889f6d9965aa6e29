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
