# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The values and address rules that the modules (on the nodes) and the controller plans (``plugin_utils``) share,
defined once (Python 3.8+, standard library only).

- :data:`MAX_DEVICE_ID`: the NPU ids of one node. :data:`NAME_RE`: the names that name a unit (an instance, an
  etcd member, the etcd cluster token). :func:`is_port`: a TCP port.
- :data:`WILDCARD_ADDRESSES`, :func:`is_wildcard`, :func:`is_loopback`: what a listen address means.
- :func:`address_problem`: what a listen or peer address carries that is not a host (a port, a scheme, ...).
- :func:`probe_host` (where a server is polled from its own host) and :func:`reach_address` (where another host
  reaches it): the two address rules. :func:`format_host_port` and :func:`base_url` write an endpoint.
- The default ports of the services whose modules have one (:data:`ROUTER_PORT`, :data:`ROUTER_PROMETHEUS_PORT`,
  :data:`MASTER_PORT`, :data:`MASTER_METRICS_PORT`, :data:`ETCD_CLIENT_PORT`, :data:`ETCD_PEER_PORT`): the modules'
  argument specs use them; the roles take theirs from role ``kvpool_defaults`` (``kvpool_defaults_router_port``,
  ...), and a unit test holds the two equal.

Group names and the other ports reach the controller plans from role ``kvpool_defaults`` through their settings
(``settings['defaults']``): they are not repeated here.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ipaddress
import re

# NPU ids of one node: 0-7 on an Atlas A2 (8 NPUs), 0-15 on an A3 (16 dies), as hccn_tool -i takes them.
MAX_DEVICE_ID = 15

# A name that names a unit, a container or an etcd member: 1-63 letters, digits, '.', '_' or '-', starting with a
# letter or digit.
NAME_RE = re.compile(r'^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$')


def is_port(value):
    """Whether ``value`` is a TCP port, 1-65535: a whole number, or its digits as text (a templated value); never
    a bool or a fraction."""
    if isinstance(value, str):
        value = value.strip()
        if not value.isdigit():
            return False
        value = int(value)
    return isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 65535


# Listen addresses that mean "every interface" ('' = none given: the server's own default, every interface).
WILDCARD_ADDRESSES = ('', '0.0.0.0', '::', '[::]', '*')

# Host names that resolve to the loopback interface on the distributions the collection supports (/etc/hosts).
LOOPBACK_NAMES = ('localhost', 'localhost.localdomain', 'localhost6', 'localhost6.localdomain6', 'ip6-localhost',
                  'ip6-loopback')

# vllm-router's OpenAI API and Prometheus ports (role kvpool_defaults: kvpool_defaults_router_port and
# kvpool_defaults_router_prometheus_port; module vllm_router's defaults).
ROUTER_PORT = 30000
ROUTER_PROMETHEUS_PORT = 29000

# The Mooncake master's RPC port (the guide's; Mooncake's own default is 50051) and metrics port (role
# kvpool_defaults: kvpool_defaults_master_port and kvpool_defaults_master_metrics_port; module mooncake_master's
# defaults).
MASTER_PORT = 50088
MASTER_METRICS_PORT = 9003

# etcd's client and peer ports (kvpool_defaults_etcd_client_port; module etcd_member's defaults).
ETCD_CLIENT_PORT = 2379
ETCD_PEER_PORT = 2380

# What a server is probed at on its own host when it listens on every interface.
LOCAL_PROBE_ADDRESS = '127.0.0.1'


def _bare(address):
    """The address without surrounding blanks and IPv6 brackets."""
    return str('' if address is None else address).strip().strip('[]')


def is_wildcard(address):
    """Whether a listen address means every interface (``''``, ``0.0.0.0``, ``::``, ``[::]``, ``*``; None too)."""
    return str('' if address is None else address).strip() in WILDCARD_ADDRESSES


def is_loopback(address):
    """Whether an address (or host name) reaches only the host itself: ``127.0.0.0/8``, ``::1`` in any spelling
    (also bracketed, and ``::ffff:127.x.y.z``), and the loopback names of ``/etc/hosts`` (``localhost``, ...)."""
    bare = _bare(address).lower()
    if not bare:
        return False
    if bare in LOOPBACK_NAMES or bare.endswith('.localhost'):
        return True
    try:
        ip = ipaddress.ip_address(bare.split('%', 1)[0])
    except ValueError:
        return False
    mapped = getattr(ip, 'ipv4_mapped', None)
    return ip.is_loopback or bool(mapped is not None and mapped.is_loopback)


_HOST_NAME = re.compile(r'^[A-Za-z0-9_]([A-Za-z0-9_.-]{0,252})$')
_PORT_TAIL = re.compile(r'^(.*):(\d*)$')


def address_problem(address):
    """'' when ``address`` is one host: an IPv4 address, an IPv6 address (bare or in brackets, with a zone), a host
    name, or a wildcard of :data:`WILDCARD_ADDRESSES` (None and '' too: the caller decides whether none is
    allowed); else what it carries besides (``a port (:8000)``, ``a scheme``, ``a path``, ``a blank``, ...). The
    one rule of every listen or peer address option: a port there would be written into a command line (``--host
    127.0.0.1:8000``, ``http://[127.0.0.1:2380]:2380``) that the server refuses only at its start."""
    text = '' if address is None else str(address)
    if is_wildcard(text) and text == text.strip():
        return ''
    if not text.strip():
        return 'only blanks'
    if any(c.isspace() for c in text):
        return 'a blank'
    if '://' in text:
        return 'a scheme (%s://)' % text.split('://', 1)[0]
    if '/' in text:
        return 'a path or a prefix length (/%s)' % text.split('/', 1)[1]
    if text.startswith('['):
        inner, sep, rest = text[1:].partition(']')
        if not sep:
            return 'a "[" without its "]"'
        if rest:
            port = _PORT_TAIL.match(rest)
            return 'a port (%s)' % rest if port and not port.group(1) else 'text after its "]" (%s)' % rest
        return '' if _is_ipv6(inner) else 'a bracket around something that is not an IPv6 address'
    if ':' in text:
        if _is_ipv6(text):
            return ''
        port = _PORT_TAIL.match(text)
        if port and text.count(':') == 1:
            return 'a port (:%s)' % port.group(2)
        return 'a ":" (an address is an IPv4 address, an IPv6 address or a host name)'
    if text.startswith('-') or not _HOST_NAME.match(text):
        return 'characters no host name has'
    return ''


def _is_ipv6(text):
    try:
        return ipaddress.ip_address(text.split('%', 1)[0]).version == 6
    except ValueError:
        return False


def probe_host(address):
    """Where a server bound to ``address`` is polled from its own host: loopback for a wildcard, else the address
    (without IPv6 brackets)."""
    return LOCAL_PROBE_ADDRESS if is_wildcard(address) else _bare(address)


def reach_address(address, node_address):
    """Where another host reaches a server bound to ``address`` on a node whose own address is ``node_address``
    (its ``ansible_host``, else its inventory name): the node's address for a wildcard, else the address (without
    IPv6 brackets). A loopback address stays what it is: the caller decides whether it may use it
    (:func:`is_loopback`)."""
    return _bare(node_address) if is_wildcard(address) else _bare(address)


def format_host_port(host, port):
    """``host:port``, an IPv6 host in brackets (``[fd00::1]:50088``); the one rule for every endpoint the collection
    writes (master address, metrics and health URLs, vLLM endpoints, pre-flight's master endpoint)."""
    host = str(host).strip()
    if ':' in host and not host.startswith('['):
        host = '[%s]' % host
    return '%s:%d' % (host, int(port))


def base_url(host, port, scheme='http'):
    """``http://host:port`` (IPv6 in brackets)."""
    return '%s://%s' % (scheme, format_host_port(host, port))
