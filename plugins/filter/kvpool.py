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
- ``node_container_problem``: '' when role vllm_ascend_container may recreate or remove the container of its name
  (none there, or its label says the role made it), else the message naming the host, the container and the fix
  (``module_utils/_service.py``, next to the service containers' label rule).
- ``owned_file_problems``: the files a role is about to write that the collection did not write, each a message
  naming the file, its variable and the fix (``plugin_utils/ownership.py``; issue 32, ownership).
- ``teardown_dir_problems``: the directories teardown.yml must not remove as a whole (``/`` and those directly
  under it; one of the collection's whose name does not say kvpool), each a message naming it and the fix.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.ascend.kvpool.plugins.plugin_utils import lazy

_preflight = lazy.module('module_utils._preflight')
_preflight_rules = lazy.module('plugin_utils.preflight')
sizes = lazy.module('plugin_utils.sizes')
ownership = lazy.module('plugin_utils.ownership')
_errors = lazy.module('module_utils._errors')  # KvpoolError, read when an error is caught

_RAISE = object()


def size_bytes(value, invalid=_RAISE):
    """Bytes of ``value`` (:func:`sizes.size_bytes`); ``invalid`` instead when it is not a size, if given."""
    try:
        return sizes.size_bytes(value)
    except ValueError as exc:
        if invalid is _RAISE:
            raise AnsibleFilterError('size_bytes: %s' % exc) from exc
        return invalid


def owned_file_problems(entries, stats, reads=None, conffiles='', marks=()):
    """Messages of the files of ``entries`` that are not the collection's (:func:`ownership.file_problems`)."""
    try:
        return ownership.file_problems(entries, stats, reads, conffiles, marks)
    except ValueError as exc:
        raise AnsibleFilterError('owned_file_problems: %s' % exc) from exc


def teardown_dir_problems(paths, explicit=False, host=None):
    """Messages of the directories teardown.yml must not remove as a whole (:func:`ownership.teardown_dir_problems`)."""
    return ownership.teardown_dir_problems(paths, explicit, host)


def master_endpoint(*args, **kwargs):
    """mooncake.json's master_server_address (:func:`preflight.master_endpoint`); an address, port or etcd endpoint
    that is not one fails the template with the message naming its variable."""
    try:
        return _preflight_rules.master_endpoint(*args, **kwargs)
    except _errors.KvpoolError as exc:
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
            'node_container_problem': lazy.function('module_utils._service', 'node_container_problem'),
            'owned_file_problems': owned_file_problems,
            'teardown_dir_problems': teardown_dir_problems,
        }
