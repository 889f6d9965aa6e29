# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Rules several roles apply, each in one place (the logic lives in plugin_utils/sizes.py and preflight.py).

- ``size_bytes``: bytes of a size given as bytes or a string such as ``"100GB"`` (1024-based). A value that is not
  a size fails the template, or gives ``invalid`` when passed (``x | ascend.kvpool.size_bytes(invalid=-1)``), so a
  role's assert can name its own variable and the fix.
- ``memory_shortfall``: '' when instances x TP x (segment + buffer) + reserve fits in MemTotal, else what does not.
- ``hash_seed_mismatch``: ``host/instance=seed`` of every planned instance when their PYTHONHASHSEED values differ.
- ``master_host``, ``master_endpoint``: where the nodes reach the Mooncake master (``host:port``, or ``etcd://..``).
- ``glibc_version``: the glibc version of ``ldd --version`` output (``2.36``), '' when it has none (the same reading
  as the pre-flight's glibc check).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.ascend.kvpool.plugins.module_utils._errors import KvpoolError
from ansible_collections.ascend.kvpool.plugins.plugin_utils import lazy

_preflight = lazy.module('module_utils._preflight')
_preflight_rules = lazy.module('plugin_utils.preflight')
sizes = lazy.module('plugin_utils.sizes')

_RAISE = object()


def size_bytes(value, invalid=_RAISE):
    """Bytes of ``value`` (:func:`sizes.size_bytes`); ``invalid`` instead when it is not a size, if given."""
    try:
        return sizes.size_bytes(value)
    except ValueError as exc:
        if invalid is _RAISE:
            raise AnsibleFilterError('size_bytes: %s' % exc) from exc
        return invalid


def master_endpoint(*args, **kwargs):
    """mooncake.json's master_server_address (:func:`preflight.master_endpoint`); an address, port or etcd endpoint
    that is not one fails the template with the message naming its variable."""
    try:
        return _preflight_rules.master_endpoint(*args, **kwargs)
    except KvpoolError as exc:
        raise AnsibleFilterError('master_endpoint: %s' % exc) from exc


def glibc_version(ldd_output):
    """glibc version of ``ldd --version`` output, '' when unreadable."""
    return _preflight.glibc_version(ldd_output if isinstance(ldd_output, str) else '') or ''


class FilterModule(object):
    """ascend.kvpool filters shared by the roles."""

    def filters(self):
        return {
            'size_bytes': size_bytes,
            'memory_shortfall': lazy.function('plugin_utils.preflight', 'memory_shortfall'),
            'hash_seed_mismatch': lazy.function('plugin_utils.preflight', 'hash_seed_mismatch'),
            'master_host': lazy.function('plugin_utils.preflight', 'master_host'),
            'master_endpoint': master_endpoint,
            'glibc_version': glibc_version,
        }
