# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Controller-side logic of the vLLM-Ascend instances: what each release reads and needs, the release-aware
rendering of kv-transfer-config, environment and LD_LIBRARY_PATH, and the per-host plan of the ``vllm_instance``
role (ports, NPUs, names, collisions).

Pure functions of plain data, run on the controller only (the ``vllm_instance_plan`` filter, the pre-flight
judgement); the node-side pieces of ``vllm_server`` stay in ``module_utils/_vllm.py``.

What each vllm-ascend release reads (``docs/vllm-ascend-kvpool-facts.md``, checked against the
vllm-ascend sources):

=====================================  ==================  ===============================================
setting                                read by             what the plan does
=====================================  ==================  ===============================================
``kv_connector`` name                  v0.11: ``MooncakeConnectorStoreV1``; v0.12+: ``AscendStoreConnector``
                                       (same class; the old name logs a deprecation warning from v0.13)
``mooncake_rpc_port``                  v0.11 only key; v0.12+ deprecated alias of ``lookup_rpc_port``
``lookup_rpc_port``                    v0.12+ (an IPC path name, unique per instance on a host)
``register_buffer``                    v0.11 only          rendered for v0.11 (guide: true), else warned
``ASCEND_BUFFER_POOL`` (env)           Mooncake's Ascend   passed on at every release when the operator sets
                                       transport, never    it; the default is the guide's ``4:8`` on A2 for
                                       vllm-ascend         v0.22 only (``RELEASE_READS``)
``ASCEND_ENABLE_USE_FABRIC_MEM``       vllm-ascend (every  ``1`` on A3 at every line (not with the operator's
                                       line) and Mooncake  buffer pool on v0.22: Mooncake 0.3.9 refuses both)
``HCCL_INTRA_ROCE_ENABLE``             Mooncake >= 0.3.10  ``1`` on A2 from v0.23
                                       .post1, CANN HCCL
``VLLM_HOST_IP`` (env)                 vLLM's get_ip(),    the node's data-plane address
                                       every line          (:func:`data_plane_address`)
``MC_STORE_CLUSTER_ID`` (env)          Mooncake's store    the pool's cluster id (``kvpool_cluster_id``)
                                       client (HA leader   with HA masters; none without
                                       lookup), every line
``local_hostname`` (mooncake.json)     no line (v0.11.0rc0 not written (role mooncake_config)
                                       only)
``kv_load_failure_policy`` (top)       every release       rendered when set (``recompute`` or ``fail``,
                                                           vLLM's default); ``recompute`` avoids failed
                                                           requests on ``-704`` (vllm-ascend #15060)
``use_layerwise``                      v0.23+: prefill     warned from v0.23 unless ``backend: memcache``
                                       side, memcache
``LD_LIBRARY_PATH``                    the loader          image: the toolkit's python site-packages; wheel
                                                           (v0.23+ default): ``<site-packages>/mooncake``,
                                                           then ``<site-packages>`` where the tag's docs
                                                           give it (before v0.26); source: ``/usr/local/lib``
=====================================  ==================  ===============================================

What each release needs on the node (pre-flight check ``versions``, :func:`release_requirements`): see
``RELEASES`` below and docs/releases.md.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

from ansible_collections.ascend.kvpool.plugins.module_utils import _validate, _vllm
from ansible_collections.ascend.kvpool.plugins.module_utils._errors import KvpoolError
from ansible_collections.ascend.kvpool.plugins.module_utils._shared import (
    base_url, is_loopback, is_wildcard, probe_host, reach_address,
)
from ansible_collections.ascend.kvpool.plugins.module_utils._vllm import API_KEY_ENV, drop_api_key_args

# --- versions ----------------------------------------------------------------------------------------------

GUIDE_VERSION = '0.22.1rc1'
# The release the collection renders for when none is declared: the newest final vllm-ascend (the guide's v0.22.1rc1
# stays supported: declare it). roles/vllm_instance and roles/kvpool_router default to the same text, and
# tests/unit/plugins/plugin_utils/test_release_matrix.py holds them equal.
DEFAULT_VERSION = 'v0.23.0'
# Lines vllm-ascend's maintainers call previews: 0.24 and 0.25 are "silent releases ... not ready for production",
# wait for 0.26 (vllm-ascend #14757). The plan warns once per host (plan_instances), the pre-flight check 'upgrade'
# shows the same text (preflight.check_upgrade).
PREVIEW_LINES = ((0, 24), (0, 25))
PREVIEW_ISSUE = 'vllm-ascend #14757'
NEW_CONNECTOR_SINCE = (0, 12)
OLD_CONNECTOR_DEPRECATED_SINCE = (0, 13)
LOOKUP_RPC_PORT_SINCE = (0, 12)
REGISTER_BUFFER_BEFORE = (0, 12)
# The guide's ASCEND_BUFFER_POOL=4:8 is the default on A2 before v0.23 (the A2 tutorial of v0.22.1rc1, whose Mooncake
# v0.3.9 does not read HCCL_INTRA_ROCE_ENABLE); from v0.23 A2 gets HCCL_INTRA_ROCE_ENABLE=1 (the tags' kv_pool.md).
GUIDE_BUFFER_POOL_BEFORE = (0, 23)
ROCE_DIRECT_SINCE = (0, 23)
# vllm-ascend's docs export <site-packages>/mooncake from v0.26.0rc (#14551, #14681); v0.23.0 to v0.25.1rc1 plain
# <site-packages>.
DOCS_LD_MOONCAKE_SINCE = (0, 26)
OLDEST_KNOWN = (0, 11)
LAYERWISE_NEEDS_MEMCACHE_SINCE = (0, 23)
MOONCAKE_WHEEL_SINCE = (0, 23)
KV_LOAD_FAILURE_POLICIES = ('recompute', 'fail')
MOONCAKE_INSTALLS = ('image', 'wheel', 'source')
SOURCE_LD_LIBRARY_PATH = '/usr/local/lib'

# What the node needs for each release line (the newest line at or below the declared version applies), from the
# vllm-ascend docs of that release (installation.md, user_guide/feature_guide/kv_pool.md) and release notes:
# cann: the CANN toolkit the release is built against (installation.md: "CANN == 9.0.0" up to v0.22, 9.1.0 for
#   v0.23+); hdk: the driver (Ascend HDK) floor per NPU generation (kv_pool.md "Hardware Dependency Quick
#   Reference": 25.5 for HCCL_INTRA_ROCE_ENABLE on A2 and for FabricMem with Mooncake >= 0.3.11 on A3; none
#   published for v0.22); mooncake: the Mooncake floor (kv_pool.md: >= 0.3.9, from v0.23 >= 0.3.11.post1) and how
#   it is installed; glibc: what the mooncake-transfer-engine-npu wheel needs (kv_pool.md: glibc >= 2.35).
RELEASES = (
    ((0, 22), {'line': 'v0.22', 'cann': '9.0.0', 'hdk': {}, 'mooncake': '0.3.9', 'mooncake_install': 'image',
               'glibc': None}),
    ((0, 23), {'line': 'v0.23', 'cann': '9.1.0', 'hdk': {'a2': '25.5', 'a3': '25.5'}, 'mooncake': '0.3.11.post1',
               'mooncake_install': 'wheel', 'glibc': '2.35'}),
    ((0, 25), {'line': 'v0.25', 'cann': '9.1.0', 'hdk': {'a2': '25.5', 'a3': '25.5'}, 'mooncake': '0.3.11.post1',
               'mooncake_install': 'wheel', 'glibc': '2.35'}),
)

# --- who reads what we render, per release line (docs/releases.md "Who reads what we render" holds the same rows,
# tests/unit/plugins/plugin_utils/test_release_reads.py compares them) ---------------------------------------------
# Each line is checked at one tag of vllm-ascend and the Mooncake its image ships (vllm-ascend Dockerfile
# MOONCAKE_TAG: v0.3.9 at v0.22.1rc1, 0.3.11.post1 at v0.23.0 and v0.25.1rc1).
RELEASE_TAGS = {'v0.22': ('v0.22.1rc1', 'v0.3.9'), 'v0.23': ('v0.23.0', 'v0.3.11.post1'),
                'v0.25': ('v0.25.1rc1', 'v0.3.11.post1')}
_BE = 'vllm_ascend/distributed/kv_transfer/kv_pool/ascend_store/backend/mooncake_backend.py'
_DOC = 'docs/source/user_guide/feature_guide/kv_pool.md'
_TUTORIAL = 'docs/source/tutorials/features/pd_colocated_mooncake_multi_instance.md'
_ADT = 'mooncake-transfer-engine/src/transport/ascend_transport/ascend_direct_transport'
_CLIENT = 'mooncake-store/src/client_service.cpp'
# Where the store client reads MC_STORE_CLUSTER_ID for its HA leader key, per Mooncake tag (v0.3.9: MasterViewHelper;
# from v0.3.10 the etcd leader coordinator's ResolveClusterNamespace, the client passing no namespace of its own).
_CLUSTER_ID_READ = {'v0.3.9': 'mooncake-store/src/ha_helper.cpp:9',
                    'v0.3.11.post1': 'mooncake-store/src/ha/leadership/backends/etcd/etcd_leader_coordinator.cpp:368'}
# The line number of each read in mooncake_backend.py per line (v0.22, v0.23, v0.25).
_BE_LINES = {
    'metadata_server': (296, 306, 299), 'global_segment_size': (300, 310, 303), 'local_buffer_size': (302, 312, 305),
    'protocol': (303, 313, 306), 'device_name': (304, 314, 307), 'master_server_address': (307, 317, 310),
    'MOONCAKE_CONFIG_PATH': (316, 326, 319), 'get_ip': (102, 104, 104), 'fabric': (70, 71, 71),
    'fabric_buffer_0': (137, 148, 141),
}
_LINES = ('v0.22', 'v0.23', 'v0.25')
_JSON_RENDERED = {
    'metadata_server': 'mooncake_config_metadata_server (P2PHANDSHAKE)',
    'global_segment_size': 'mooncake_config_global_segment_size, in bytes',
    'local_buffer_size': 'mooncake_config_local_buffer_size, in bytes (the release sets 0 with '
                         'ASCEND_ENABLE_USE_FABRIC_MEM=1: %s:%s)',
    'protocol': 'mooncake_config_protocol (ascend)',
    'device_name': 'mooncake_config_device_name ("")',
    'master_server_address': "the master host's mooncake_config_node_address:mooncake_config_master_port, or "
                             'etcd://... with HA',
}


def _release_reads():
    rows = []
    for n, line in enumerate(_LINES):
        tag, mooncake = RELEASE_TAGS[line]
        vllm = 'vllm-ascend@%s:' % tag
        for key in ('metadata_server', 'global_segment_size', 'local_buffer_size', 'protocol', 'device_name',
                    'master_server_address'):
            rendered = _JSON_RENDERED[key]
            if key == 'local_buffer_size':
                rendered = rendered % (_BE, _BE_LINES['fabric_buffer_0'][n])
            rows.append((key, line, 'mooncake.json', 'vllm-ascend', '%s%s:%d' % (vllm, _BE, _BE_LINES[key][n]),
                         rendered))
        rows.append(('local_hostname', line, 'mooncake.json', 'nobody (the address is get_ip(), i.e. VLLM_HOST_IP)',
                     '%s%s:%d' % (vllm, _BE, _BE_LINES['get_ip'][n]),
                     'not written (mooncake_config_write_local_hostname: false)'))
        rows.append(('MOONCAKE_CONFIG_PATH', line, 'environment', 'vllm-ascend',
                     '%s%s:%d' % (vllm, _BE, _BE_LINES['MOONCAKE_CONFIG_PATH'][n]),
                     'vllm_instance_mooncake_config_path'))
        rows.append(('VLLM_HOST_IP', line, 'environment', "vLLM's get_ip(), called by vllm-ascend",
                     '%s%s:%d' % (vllm, _BE, _BE_LINES['get_ip'][n]),
                     "the node's data-plane address, mooncake_config_node_address (vllm_instance_host_ip, when "
                     'set, must equal it)'))
        if line == 'v0.22':
            pool_source = 'Mooncake@%s:%s/ascend_direct_transport.cpp:259' % (mooncake, _ADT)
            pool_rendered = ("the operator's value (vllm_instance_ascend_buffer_pool or the environment), else 4:8 "
                             'on A2 (vllm-ascend@v0.22.1rc1:%s:219)' % _TUTORIAL)
            roce_reader = 'CANN (HCCL); not Mooncake v0.3.9'
            roce_source = 'vllm-ascend@v0.22.1rc1:%s:119' % _DOC
            roce_rendered = "not rendered (the guide's A2 path is the buffer pool, which Mooncake v0.3.9 reads)"
            fabric_rendered = "1 on A3, unless the operator sets ASCEND_BUFFER_POOL (Mooncake v0.3.9 refuses both)"
            ld_source = 'vllm-ascend@v0.22.1rc1:%s:369' % _DOC
            ld_rendered = '`<site-packages>` (image)'
            fabric_client = 279
        else:
            pool_source = 'Mooncake@%s:%s/transfer_executor_base.cpp:105' % (mooncake, _ADT)
            pool_rendered = "the operator's value only (vllm_instance_ascend_buffer_pool or the environment)"
            roce_reader = 'Mooncake, and CANN (HCCL)'
            roce_source = 'Mooncake@%s:%s/ascend_direct_transport.cpp:152' % (mooncake, _ADT)
            roce_rendered = '1 on A2'
            fabric_rendered = '1 on A3'
            ld_source = 'vllm-ascend@%s:%s:%d' % (tag, _DOC, 356 if line == 'v0.23' else 354)
            ld_rendered = ('`<site-packages>/mooncake` (our choice: the wheel\'s libraries), then `<site-packages>` '
                           '(the tag\'s docs) (wheel)')
            fabric_client = 451
        rows.append(('ASCEND_BUFFER_POOL', line, 'environment', 'Mooncake (Ascend transport); never vllm-ascend',
                     pool_source, pool_rendered))
        rows.append(('HCCL_INTRA_ROCE_ENABLE', line, 'environment', roce_reader, roce_source, roce_rendered))
        rows.append(('ASCEND_ENABLE_USE_FABRIC_MEM', line, 'environment', 'vllm-ascend and Mooncake (store client)',
                     '%s%s:%d; Mooncake@%s:%s:%d' % (vllm, _BE, _BE_LINES['fabric'][n], mooncake, _CLIENT,
                                                     fabric_client), fabric_rendered))
        rows.append(('LD_LIBRARY_PATH', line, 'environment', 'the dynamic loader (documented by the tag)', ld_source,
                     ld_rendered))
        rows.append(('MC_STORE_CLUSTER_ID', line, 'environment', 'Mooncake (store client, its HA leader lookup)',
                     'Mooncake@%s:%s' % (mooncake, _CLUSTER_ID_READ[mooncake]),
                     "the pool's cluster id, kvpool_cluster_id (vllm_instance_mooncake_cluster_id), with HA masters "
                     '(kvpool_master_ha); none without'))
    return tuple(rows)


# (key or variable, release line, file, read by, source tag:path:line, what the collection renders).
RELEASE_READS = _release_reads()
# mooncake.json's local_hostname: read by no release line (only by v0.11.0rc0; v0.11.0rc1 on use get_ip()).
READS_LOCAL_HOSTNAME = False

OLD_CONNECTOR = 'MooncakeConnectorStoreV1'
NEW_CONNECTOR = 'AscendStoreConnector'
BACKENDS = ('mooncake', 'memcache', 'yuanrong')
KV_ROLES = ('kv_both', 'kv_producer', 'kv_consumer')
NPU_TYPES = ('a2', 'a3')
GUIDE_ASCEND_BUFFER_POOL = '4:8'
# The store client's cluster id in etcd (HA masters): Mooncake reads the leader at mooncake-store/<id>/master_view.
CLUSTER_ID_ENV = 'MC_STORE_CLUSTER_ID'
ASCEND_LD_LIBRARY_PATH = '/usr/local/Ascend/ascend-toolkit/latest/python/site-packages'

VERSION_RE = re.compile(r'^\s*v?(\d+)\.(\d+)(?:\.(\d+))?([A-Za-z0-9.+-]*)\s*$')


def parse_version(text):
    """(major, minor, patch, suffix) of a vllm-ascend version such as ``v0.22.1rc1``; None when unparsable."""
    if text is None:
        return None
    m = VERSION_RE.match(str(text))
    if not m:
        return None
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0), m.group(4) or ''


def version_text(parsed):
    major, minor, patch, suffix = parsed
    return 'v%d.%d.%d%s' % (major, minor, patch, suffix)


def version_profile(version, npu_type='a2'):
    """What the declared vllm-ascend version reads. Raises ValueError for an unparsable version."""
    parsed = parse_version(version)
    if parsed is None:
        raise ValueError('not a vllm-ascend version: %r (expected e.g. v0.22.1rc1)' % (version,))
    mm = parsed[:2]
    profile = {
        'version': version_text(parsed),
        'connector': NEW_CONNECTOR if mm >= NEW_CONNECTOR_SINCE else OLD_CONNECTOR,
        'knows_new_connector': mm >= NEW_CONNECTOR_SINCE,
        'old_connector_deprecated': mm >= OLD_CONNECTOR_DEPRECATED_SINCE,
        'rpc_port_key': 'lookup_rpc_port' if mm >= LOOKUP_RPC_PORT_SINCE else 'mooncake_rpc_port',
        'reads_register_buffer': mm < REGISTER_BUFFER_BEFORE,
        'older_than_known': mm < OLDEST_KNOWN,
        # ASCEND_BUFFER_POOL rendered without the operator's value (Mooncake reads a value set at every release).
        'default_buffer_pool': GUIDE_ASCEND_BUFFER_POOL if mm < GUIDE_BUFFER_POOL_BEFORE and npu_type != 'a3' else None,
        'roce_direct': mm >= ROCE_DIRECT_SINCE,
        'docs_ld_plain_site': mm < DOCS_LD_MOONCAKE_SINCE,
        # A3: fabric memory at every line (vllm-ascend reads ASCEND_ENABLE_USE_FABRIC_MEM from v0.22.1rc1); A2 from
        # v0.23: the direct RoCE transfer.
        'transfer_env': ({'ASCEND_ENABLE_USE_FABRIC_MEM': '1'} if npu_type == 'a3'
                         else {'HCCL_INTRA_ROCE_ENABLE': '1'} if mm >= ROCE_DIRECT_SINCE else {}),
    }
    profile['npu_type'] = npu_type
    profile['layerwise_needs_memcache'] = mm >= LAYERWISE_NEEDS_MEMCACHE_SINCE
    profile['requirements'] = release_requirements(mm, npu_type)
    profile['release'] = profile['requirements']['line']
    profile['preview'] = preview_warning(version)
    return profile


def preview_warning(version):
    """The warning for a preview release (``PREVIEW_LINES``: 0.24, 0.25), '' for any other or an unparsable one.
    One text for the plan's warning and the pre-flight's ``upgrade`` finding."""
    parsed = parse_version(version)
    if parsed is None or parsed[:2] not in PREVIEW_LINES:
        return ''
    return ('vllm-ascend %s is a preview: its maintainers call 0.24 and 0.25 "silent releases" that are not ready for '
            'production and advise waiting for 0.26 (%s); the newest final release is %s'
            % (version_text(parsed), PREVIEW_ISSUE, DEFAULT_VERSION))


def release_requirements(major_minor, npu_type='a2'):
    """What the node needs for a release (``(major, minor)``): the newest line of ``RELEASES`` at or below it
    (the oldest line for older releases), with ``hdk`` resolved for ``npu_type``; ``known`` says whether the
    release is one of the lines or newer (False below v0.22: the floors are the guide's, unchecked upstream)."""
    chosen = RELEASES[0]
    for since, req in RELEASES:
        if tuple(major_minor) >= since:
            chosen = (since, req)
    out = dict(chosen[1])
    out['hdk'] = chosen[1]['hdk'].get(npu_type)
    out['known'] = tuple(major_minor) >= RELEASES[0][0]
    return out


def compare_versions(text, floor):
    """-1, 0 or 1 as a dotted version text is below, at or above ``floor``; None when either is unreadable.

    Reads the spellings of the Ascend version files: ``25.5.0``, ``24.1.rc2``, ``8.0.RC2``, ``9.1.0.alpha001``,
    Mooncake's ``0.3.11.post1`` and glibc's ``2.36``. A release candidate (``rcN``), alpha or beta of a version
    sorts before the version itself; ``postN`` after it."""
    a, b = version_key(text), version_key(floor)
    if a is None or b is None:
        return None
    return (a > b) - (a < b)


_VSUFFIX_RE = re.compile(r'^(rc|alpha|beta|a|b|t|post|spc)(\d*)', re.IGNORECASE)


def version_key(text):
    """A sortable key of a dotted version text (see :func:`compare_versions`), or None: the numbers without
    trailing zeros (``9.1.0`` is ``9.1``), then 0 for a pre-release (``rc2``, ``alpha001``, ``b060``), 1 for the
    version itself, 2 for a post release (``post1``, ``SPC``), then the marker's number."""
    if text is None:
        return None
    text = str(text).strip().lstrip('vV')
    m = re.match(r'^(\d+(?:\.\d+)*)(?:[.\-_]?([A-Za-z][A-Za-z0-9]*))?', text)
    if not m:
        return None
    numbers = [int(n) for n in m.group(1).split('.')]
    while len(numbers) > 1 and numbers[-1] == 0:
        numbers.pop()
    rank, number = 1, 0
    if m.group(2):
        suffix = _VSUFFIX_RE.match(m.group(2))
        if not suffix:
            return None
        rank = 2 if suffix.group(1).lower() in ('post', 'spc') else 0
        number = int(suffix.group(2) or 0)
    return tuple(numbers), rank, number


def render_ld_library_path(profile, install='', site_packages=ASCEND_LD_LIBRARY_PATH, extra=None):
    """(LD_LIBRARY_PATH entries to prepend, warnings, errors) for where Mooncake comes from.

    ``install``: ``image`` (the toolkit python's site-packages, the guide), ``wheel`` (the
    mooncake-transfer-engine-npu wheel: its ``<site-packages>/mooncake`` directory holds the transport libraries),
    ``source`` (``make install`` to ``/usr/local/lib``), or '' for the declared release's way (wheel from v0.23).
    ``extra`` entries follow, without duplicates.

    The wheel's ``<site-packages>/mooncake`` is the collection's choice: vllm-ascend's docs export it from v0.26.0rc
    only; the docs of v0.23.0 to v0.25.1rc1 export plain ``<site-packages>`` (kv_pool.md), which follows it there."""
    warnings, errors = [], []
    install = install or profile['requirements']['mooncake_install']
    if install not in MOONCAKE_INSTALLS:
        errors.append('vllm_instance_mooncake_install must be one of %s (or empty for the release\'s way), got %r'
                      % (', '.join(MOONCAKE_INSTALLS), install))
        install = profile['requirements']['mooncake_install']
    site = str(site_packages or ASCEND_LD_LIBRARY_PATH).rstrip('/')
    out = {'image': [site], 'wheel': [site + '/mooncake'], 'source': [SOURCE_LD_LIBRARY_PATH]}[install]
    if install == 'wheel' and profile.get('docs_ld_plain_site'):
        out.append(site)
    for entry in extra or []:
        entry = str(entry)
        if entry and entry not in out:
            out.append(entry)
    return out, warnings, errors


# --- kv-transfer-config and environment ---------------------------------------------------------------------

def render_kv_transfer_config(profile, lookup_rpc_port=0, connector='', kv_role='kv_both', extra_config=None,
                              register_buffer=None, top_level=None, where='vllm_instance',
                              kv_load_failure_policy=''):
    """(kv_transfer_config dict, warnings, errors) for one instance, as the declared version reads it.

    ``extra_config`` is passed on as ``kv_connector_extra_config`` except the keys this version ignores (warned
    and left out) and the port keys (an error: the port is per instance). ``register_buffer`` None means "the
    guide's value where it is read".
    """
    warnings, errors = [], []
    version = profile['version']
    name = connector or profile['connector']
    if connector:
        if connector == NEW_CONNECTOR and not profile['knows_new_connector']:
            errors.append('%s: kv_connector %s is unknown to vllm-ascend %s (it was named %s before v0.12); '
                          'set it to %s or leave it empty' % (where, connector, version, OLD_CONNECTOR, OLD_CONNECTOR))
        elif connector == OLD_CONNECTOR and profile['old_connector_deprecated']:
            warnings.append('%s: kv_connector %s is deprecated in vllm-ascend %s (logs a deprecation warning; '
                            '%s is the same class); leave it empty to render %s'
                            % (where, connector, version, NEW_CONNECTOR, NEW_CONNECTOR))
    extra = dict(extra_config or {})
    for key in ('lookup_rpc_port', 'mooncake_rpc_port'):
        if key in extra:
            errors.append('%s: kv_connector_extra_config.%s must not be set there: it names an IPC path that must be '
                          'unique per instance on a host; set lookup_rpc_port in the instance entry instead'
                          % (where, key))
            extra.pop(key)
    if 'register_buffer' in extra:
        if register_buffer is None:
            register_buffer = extra['register_buffer']
        extra.pop('register_buffer')
    if profile['reads_register_buffer']:
        extra['register_buffer'] = True if register_buffer is None else bool(register_buffer)
    elif register_buffer is not None:
        warnings.append('%s: register_buffer: %s (vllm_instance_register_buffer or kv_connector_extra_config) is '
                        'ignored by vllm-ascend %s (only v0.11 reads it); not rendered'
                        % (where, json.dumps(register_buffer), version))
    backend = extra.get('backend')
    if backend is not None and backend not in BACKENDS:
        errors.append('%s: kv_connector_extra_config.backend %r is not one of %s (vllm-ascend fails at start)'
                      % (where, backend, ', '.join(BACKENDS)))
    if extra.get('use_layerwise') and extra.get('load_async'):
        warnings.append('%s: load_async is ignored when use_layerwise is on' % where)
    if (extra.get('use_layerwise') and profile.get('layerwise_needs_memcache')
            and (extra.get('backend') or 'mooncake') != 'memcache'):
        warnings.append('%s: use_layerwise: true needs the memcache backend in vllm-ascend %s and works only on the '
                        'prefill side (kv_role %s, backend %s); set use_layerwise: false, or backend: memcache on '
                        'the prefill instances' % (where, version, kv_role, extra.get('backend') or 'mooncake'))
    if kv_role not in KV_ROLES:
        errors.append('%s: kv_role %r is not one of %s (PD co-located instances use kv_both)'
                      % (where, kv_role, ', '.join(KV_ROLES)))
    extra[profile['rpc_port_key']] = lookup_rpc_port
    config = {'kv_connector': name, 'kv_role': kv_role, 'kv_connector_extra_config': extra}
    if kv_load_failure_policy:
        if kv_load_failure_policy not in KV_LOAD_FAILURE_POLICIES:
            errors.append('%s: kv_load_failure_policy must be recompute or fail (vLLM\'s default), got %r'
                          % (where, kv_load_failure_policy))
        else:
            config['kv_load_failure_policy'] = kv_load_failure_policy
    for key, value in sorted((top_level or {}).items()):
        if key in config:
            errors.append('%s: kv_transfer_extra.%s clashes with a rendered key; use the dedicated variable'
                          % (where, key))
            continue
        config[key] = value
    return config, warnings, errors


def render_env(profile, devices, mooncake_config_path, python_hash_seed, host_ip='', ascend_buffer_pool=None,
               extra_env=None, where='vllm_instance', cluster_id=''):
    """(environment dict, warnings, errors) of one instance for the declared version.

    ``cluster_id`` is the pool's cluster id in etcd (HA masters; '' renders none): ``MC_STORE_CLUSTER_ID``, under
    which Mooncake's store client looks up the leading master (``mooncake-store/<id>/master_view``)."""
    warnings, errors = [], []
    env = {}
    if not mooncake_config_path:
        errors.append('%s: MOONCAKE_CONFIG_PATH is empty: vLLM fails at start without it; set '
                      'vllm_instance_mooncake_config_path to the mooncake.json of the node' % where)
    else:
        env['MOONCAKE_CONFIG_PATH'] = str(mooncake_config_path)
    if python_hash_seed is None or str(python_hash_seed).strip() == '':
        errors.append('%s: PYTHONHASHSEED is empty: prefix block hashes then differ between processes and no '
                      'cross-node hit ever happens; set vllm_instance_python_hash_seed (e.g. 0) on every node' % where)
    else:
        env['PYTHONHASHSEED'] = str(python_hash_seed)
    if host_ip:
        env['VLLM_HOST_IP'] = str(host_ip)
    env['ASCEND_RT_VISIBLE_DEVICES'] = ','.join(str(d) for d in devices)
    user = _rule(errors, where, _validate.environment, extra_env, 'environment') or {}
    if 'ASCEND_RT_VISIBLE_DEVICES' in user:
        errors.append('%s: set the NPUs with the instance\'s devices list, not ASCEND_RT_VISIBLE_DEVICES in the '
                      'environment' % where)
        user.pop('ASCEND_RT_VISIBLE_DEVICES')
    # A key in the environment is an error (check_key_placement says where it goes), and it is dropped from the
    # plan at once either way: the plan is a fact, shown with -v.
    _rule(errors, where, _vllm.check_key_placement, user, [], 'vllm_instance_api_key')
    user.pop(API_KEY_ENV, None)
    if 'ASCEND_BUFFER_POOL' in user:
        if ascend_buffer_pool in (None, ''):
            ascend_buffer_pool = user['ASCEND_BUFFER_POOL']
        user.pop('ASCEND_BUFFER_POOL')
    fabric = user.get('ASCEND_ENABLE_USE_FABRIC_MEM')
    if fabric is not None and str(fabric) != '1':
        errors.append('%s: ASCEND_ENABLE_USE_FABRIC_MEM=%s in the environment turns fabric memory on in Mooncake\'s '
                      'store client, which tests only that the variable is set (client_service.cpp), and off in '
                      'vllm-ascend, which tests for 1 (mooncake_backend.py): the two disagree. Remove it from '
                      'vllm_instance_environment (A2 and v0.22 A3 with ASCEND_BUFFER_POOL render none); for an A3 '
                      'pool over RoCE declare vllm_instance_npu_type: a2, which renders HCCL_INTRA_ROCE_ENABLE=1 as '
                      'kv_pool.md gives it for A3 RoCE' % (where, fabric))
        user.pop('ASCEND_ENABLE_USE_FABRIC_MEM')
    theirs = user.get(CLUSTER_ID_ENV)
    if cluster_id and theirs is not None and str(theirs) != str(cluster_id):
        errors.append('%s: %s=%s in the environment differs from the pool\'s cluster id %s (the HA masters\' '
                      '--cluster_id): the store clients would look up the leading master under '
                      'mooncake-store/%s/master_view, which no master of the pool writes, and fail their setup ("No '
                      'master is available"). Remove %s from vllm_instance_environment and the instance\'s '
                      'environment, and set kvpool_cluster_id instead (the masters, the instances and the pool '
                      'probe all take it from there)'
                      % (where, CLUSTER_ID_ENV, theirs, cluster_id, theirs, CLUSTER_ID_ENV))
        user.pop(CLUSTER_ID_ENV)
    for name, key in (('MOONCAKE_MASTER', 'master_server_address'),
                      ('MOONCAKE_GLOBAL_SEGMENT_SIZE', 'global_segment_size')):
        if name in user:
            warnings.append('%s: %s=%s in the environment replaces mooncake.json\'s %s for this instance '
                            '(vllm-ascend reads the variable first, mooncake_backend.py), so the master, the pool '
                            'probe and the memory checks of the collection do not see it; set the mooncake_config '
                            'variable instead and remove %s from the environment'
                            % (where, name, user[name], key, name))
    # Mooncake's Ascend transport reads ASCEND_BUFFER_POOL at every release (vllm-ascend never did): the operator's
    # value always reaches the instance; without one, the line's default (the guide's 4:8 on A2 before v0.23).
    transfer = dict(profile['transfer_env'])
    if ascend_buffer_pool not in (None, ''):
        env['ASCEND_BUFFER_POOL'] = str(ascend_buffer_pool)
        if not profile.get('roce_direct') and 'ASCEND_ENABLE_USE_FABRIC_MEM' in transfer:
            # v0.22 on A3: the buffer pool is kv_pool.md's fallback to fabric memory, and Mooncake v0.3.9 (the
            # line's) fails to start with both.
            transfer.pop('ASCEND_ENABLE_USE_FABRIC_MEM')
    elif profile.get('default_buffer_pool'):
        env['ASCEND_BUFFER_POOL'] = profile['default_buffer_pool']
    env.update(transfer)
    if cluster_id:
        env[CLUSTER_ID_ENV] = str(cluster_id)
    env.update(user)
    return env, warnings, errors


def uses_local_buffer(env):
    """Whether the instance's store clients register mooncake.json's local_buffer_size: not with fabric memory
    (``ASCEND_ENABLE_USE_FABRIC_MEM=1``: every release passes ``local_buffer_size=0``, mooncake_backend.py)."""
    return str((env or {}).get('ASCEND_ENABLE_USE_FABRIC_MEM')) != '1'


# --- per-host plan of the vllm_instance role ----------------------------------------------------------------

# The role's variables are prefixed with its name.
ROLE_PREFIX = 'vllm_instance_'
# The flags of the table (module_utils/_vllm.py SERVE_FLAGS) that the plan derives from an instance's entry (its
# devices, listen_host and port); every other flag is a role variable vllm_instance_<name>, passed to the plan in
# settings['serve_flags'], which an instance's entry may override with the key <name>.
DERIVED_FLAGS = ('tensor_parallel_size', 'host', 'port')
ROLE_FLAGS = tuple(f.name for f in _vllm.SERVE_FLAGS if f.name not in DERIVED_FLAGS)
ROLE_FLAG_VARS = tuple(ROLE_PREFIX + name for name in ROLE_FLAGS)

INSTANCE_KEYS = (
    'name', 'devices', 'port', 'tensor_parallel_size', 'lookup_rpc_port', 'model_path', 'listen_host',
    'kv_connector_extra_config', 'environment', 'extra_args', 'state',
) + ROLE_FLAGS
INSTANCE_STATES = ('started', 'stopped')


def _rule(errors, where, check, *args):
    """A rule of ``module_utils/_vllm.py`` (or ``_validate.py``), the one vllm_server applies to its options:
    its value, or None with its message (after ``where``) added to ``errors``."""
    try:
        return check(*args)
    except KvpoolError as exc:
        errors.append('%s: %s' % (where, exc))
        return None


def _ranges(devices):
    """[0, 1, 2, 3, 6] -> '0-3,6' (for summaries)."""
    runs = []
    for d in sorted(devices):
        if runs and d == runs[-1][1] + 1:
            runs[-1][1] = d
        else:
            runs.append([d, d])
    return ','.join('%d-%d' % (a, b) if a != b else '%d' % a for a, b in runs)


def find_collisions(instances, reserved_ports=None, host='this host'):
    """Errors for ports, devices, lookup_rpc_ports and names used twice on one host.

    ``instances`` are dicts with ``name``, ``port``, ``devices``, ``lookup_rpc_port``; ``reserved_ports`` maps a
    port to what else uses it on the host (e.g. the master's RPC port).
    """
    errors = []
    seen = {'name': {}, 'port': {}, 'lookup_rpc_port': {}}
    device_owner = {}
    for inst in instances:
        label = inst.get('name') or '#%s' % inst.get('index')
        for key in ('name', 'port', 'lookup_rpc_port'):
            value = inst.get(key)
            if value is None:
                continue
            if value in seen[key]:
                errors.append('%s: %s %s is used by both instance %s and instance %s%s'
                              % (host, key, value, seen[key][value], label,
                                 ' (it names an IPC path that must be unique per instance on a host)'
                                 if key == 'lookup_rpc_port' else ''))
            else:
                seen[key][value] = label
        port = inst.get('port')
        if port is not None and reserved_ports and (port in reserved_ports or str(port) in reserved_ports):
            owner = reserved_ports.get(port, reserved_ports.get(str(port)))
            errors.append('%s: port %s of instance %s is already used by %s' % (host, port, label, owner))
        for dev in inst.get('devices') or []:
            owner = device_owner.get(dev)
            if owner is not None and owner[0] != id(inst):
                errors.append('%s: NPU %s is given to both instance %s and instance %s'
                              % (host, dev, owner[1], label))
            else:
                device_owner[dev] = (id(inst), label)
    return errors


def instance_name(port):
    """The name of an instance that has none: ``vllm-<port>`` (its unit is ``kvpool-vllm-<name>.service``)."""
    return 'vllm-%s' % port


def instance_where(listen_host, port, node_address):
    """Where an instance bound to ``listen_host`` (None or a wildcard: every address) on ``port`` answers:
    ``address`` and ``url`` (``http://address:port``) as another host reaches it (a wildcard at the node's own
    address), ``endpoint`` as its own host polls it (a wildcard at loopback), and ``loopback`` (it is bound to a
    loopback address, so it answers its own host only and no router or Prometheus elsewhere can use ``url``). A
    wildcard bind is never loopback only, whatever the node's address: a router on a node reached at 127.0.0.1
    (a one-node lab) reaches it there. The one copy of this rule: the plan's instances carry its result, and the
    router, monitoring and benchmark plans read them."""
    address = reach_address(listen_host, node_address)
    return {'address': address, 'url': base_url(address, port), 'endpoint': base_url(probe_host(listen_host), port),
            'loopback': not is_wildcard(listen_host) and is_loopback(listen_host)}


def loopback_only(host, inst, reader):
    """The refusal of an instance bound to a loopback address (``inst['loopback']`` of the plan) by ``reader``, a
    server on another host that would use it (the router, Prometheus): the one wording of this rule."""
    return ('%s: instance %s listens on the loopback address %s only, which %s on another host cannot reach. Bind it '
            'to an address of %s, or leave its listen address empty (every address), with vllm_instance_listen_host '
            'or the instance\'s listen_host, and run site.yml --tags instances'
            % (host, inst.get('name') or inst.get('port'), inst.get('address'), reader, host))


def _bare_address(address):
    return str(address or '').strip().strip('[]').lower()


def data_plane_address(host_ip, data_address, node_address, host='this host'):
    """(the node's one data-plane address, error or ''): what every instance's ``VLLM_HOST_IP`` is (vLLM's
    ``get_ip()``, where vllm-ascend registers the Mooncake segments), the same address mooncake.json's master, the
    pool probe and the monitoring targets use for this node.

    ``data_address`` is ``mooncake_config_node_address`` (the one variable; its default, ``ansible_host``, comes in
    when it is unset), ``host_ip`` is ``vllm_instance_host_ip`` (empty: the data-plane address). A
    ``vllm_instance_host_ip`` set to another address is refused: the segments would register where nothing else of
    the collection looks."""
    data = str(data_address or '') or str(node_address or host)
    if not host_ip:
        return data, ''
    if data_address and _bare_address(host_ip) != _bare_address(data_address):
        return str(host_ip), (
            '%s: vllm_instance_host_ip is %s but the node\'s data-plane address, mooncake_config_node_address, is %s: '
            'vLLM registers the Mooncake segments at VLLM_HOST_IP (vllm_instance_host_ip), while mooncake.json\'s '
            'master address, the pool probe and the monitoring targets use mooncake_config_node_address. Set '
            'mooncake_config_node_address: %s for %s (the one data-plane address of the node) and remove '
            'vllm_instance_host_ip, or set it equal' % (host, host_ip, data_address, host_ip, host))
    return str(host_ip), ''


def plan_instances(instances, settings, host='this host'):
    """The full plan of one host's instances: rendered config, environment, argv inputs, where each answers,
    warnings and errors.

    ``settings`` carries the role-level values (keys without the ``vllm_instance_`` prefix): state (the role's:
    stopped checks no flag's role variable), version, npu_type, model_path, serve_flags (the role variables of
    the flags of ``_vllm.SERVE_FLAGS``, by their names: ``{'vllm_instance_dtype': 'bfloat16', ...}``,
    :data:`ROLE_FLAG_VARS`), listen_host, host_ip, kv_connector, kv_role, kv_connector_extra_config,
    register_buffer, ascend_buffer_pool, kv_transfer_extra, kv_load_failure_policy, environment, python_hash_seed,
    ld_library_path, mooncake_install, mooncake_site_packages, mooncake_config_path, mooncake_cluster_id (the
    pool's cluster id with HA masters: every instance's ``MC_STORE_CLUSTER_ID``), extra_args, reserved_ports;
    node_address (where other hosts reach the node: its ``ansible_host``, else ``host``); and data_address (the
    node's data-plane address, ``mooncake_config_node_address``, else ``ansible_host``: :func:`data_plane_address`,
    the plan's ``data_address`` and every instance's ``VLLM_HOST_IP``).

    Each planned instance has ``name``, ``port``, ``host`` (its listen address, None for every address) and, from
    :func:`instance_where`, ``address``, ``url``, ``endpoint`` and ``loopback``.
    """
    errors, warnings = [], []
    node_address = str(settings.get('node_address') or host) if isinstance(settings, dict) else str(host)
    plan = {'host': host, 'node_address': node_address, 'data_address': node_address, 'instances': [], 'devices': [],
            'ports': [], 'total_tp': 0, 'local_buffer_tp': 0,
            'warnings': warnings, 'errors': errors}
    try:
        profile = version_profile(settings.get('version'), settings.get('npu_type') or 'a2')
    except ValueError as exc:
        errors.append('%s: vllm_instance_vllm_ascend_version: %s' % (host, exc))
        return plan
    plan['profile'] = profile
    plan['version'] = profile['version']
    if settings.get('npu_type', 'a2') not in NPU_TYPES:
        errors.append('%s: vllm_instance_npu_type must be one of %s, got %r'
                      % (host, ', '.join(NPU_TYPES), settings.get('npu_type')))
    if profile['preview']:
        warnings.append('%s: %s' % (host, profile['preview']))
    if profile['older_than_known']:
        warnings.append('%s: vllm-ascend %s is older than v0.11, the first release with the KV pool connector; '
                        'rendering as for v0.11' % (host, profile['version']))
    if not isinstance(instances, list):
        errors.append('%s: vllm_instance_instances must be a list of instances, got %s'
                      % (host, type(instances).__name__))
        return plan
    planned = []
    raw_warnings = []
    # A flag given among the settings (the layout before the table) would be ignored: a wrong success.
    misplaced = sorted(k for k in settings if k in ROLE_FLAGS or k in ROLE_FLAG_VARS)
    if misplaced:
        errors.append('%s: the settings carry the vllm serve flag(s) %s, which the plan reads from '
                      'settings.serve_flags only: pass them there under their role variables (%s)'
                      % (host, ', '.join(misplaced),
                         ', '.join(k if k.startswith(ROLE_PREFIX) else ROLE_PREFIX + k for k in misplaced)))
    # The flags' role variables, checked once per host (an instance's own value is checked with the instance), and
    # only when an instance is to start with them: a teardown, a prune or a stop (no instance, or the role's state
    # stopped) never fails on a flag's value.
    role_flags = settings.get('serve_flags') or {}
    role_stopped = settings.get('state') == 'stopped'
    role_values = {}

    def role_value(key):
        if key not in role_values:
            role_values[key] = _rule(errors, host, _vllm.check_serve_flag, key, role_flags.get(ROLE_PREFIX + key),
                                     ROLE_PREFIX + key, _vllm.UNSET_ROLE)
        return role_values[key]
    if settings.get('host_ip') and not role_stopped:  # VLLM_HOST_IP: an address, never host:port
        _rule(errors, host, _validate.host_address, settings.get('host_ip'), 'vllm_instance_host_ip', None,
              '172.31.250.11')
    if settings.get('data_address') and not role_stopped:  # the node's data-plane address becomes VLLM_HOST_IP too
        _rule(errors, host, _validate.host_address, settings.get('data_address'), 'mooncake_config_node_address',
              None, '172.31.250.11')
    host_ip, data_error = data_plane_address(settings.get('host_ip'), settings.get('data_address'), node_address,
                                             host)
    if data_error and not role_stopped:
        errors.append(data_error)
    plan['data_address'] = host_ip
    ld, warn, err = render_ld_library_path(profile, settings.get('mooncake_install') or '',
                                           settings.get('mooncake_site_packages') or ASCEND_LD_LIBRARY_PATH,
                                           settings.get('ld_library_path'))
    warnings.extend('%s: %s' % (host, w) for w in warn)
    errors.extend('%s: %s' % (host, e) for e in err)
    plan['ld_library_path'] = ld
    for index, raw in enumerate(instances):
        if not isinstance(raw, dict):
            errors.append('%s: vllm_instance_instances[%d] must be a dict (devices, port, ...), got %r'
                          % (host, index, raw))
            continue
        where = '%s: vllm_instance_instances[%d]' % (host, index)
        unknown = sorted(set(raw) - set(INSTANCE_KEYS))
        if unknown:
            errors.append('%s: unknown key(s) %s; allowed: %s' % (where, ', '.join(unknown), ', '.join(INSTANCE_KEYS)))
        inst = {'index': index}
        # The rules are vllm_server's (module_utils/_vllm.py): the same message for the same bad value.
        name = _rule(errors, where, _vllm.check_name, raw['name'], 'name') if raw.get('name') else None
        if name:
            where = '%s: instance %s' % (host, name)
        port = _rule(errors, where, _vllm.check_serve_flag, 'port', raw.get('port'))
        if raw.get('port') in (None, ''):
            errors.append('%s: port is not set: give the instance its API port (1-65535)' % where)
        inst['port'] = port
        if not raw.get('name') and port:
            name = instance_name(port)
            where = '%s: instance %s' % (host, name)
        inst['name'] = name
        devices = _rule(errors, where, _vllm.check_devices, raw.get('devices'), 'devices') or []
        inst['devices'] = devices
        tp = _rule(errors, where, _vllm.check_serve_flag, 'tensor_parallel_size', raw.get('tensor_parallel_size'),
                   'tensor_parallel_size', 'omit it for one worker per NPU of devices')
        if tp is not None:
            _rule(errors, where, _vllm.check_tensor_parallel, tp, devices, 'tensor_parallel_size', 'devices')
        inst['tensor_parallel_size'] = tp or len(devices)
        lookup = _rule(errors, where, _vllm.check_lookup_rpc_port, raw.get('lookup_rpc_port', index),
                       'lookup_rpc_port')
        inst['lookup_rpc_port'] = index if lookup is None else lookup
        state = raw.get('state', 'started')
        if state not in INSTANCE_STATES:
            errors.append('%s: state must be one of %s, got %r' % (where, ', '.join(INSTANCE_STATES), state))
        inst['state'] = state
        if raw.get('model_path'):
            inst['model'] = _rule(errors, where, _vllm.check_model, raw['model_path'], 'model_path')
        else:
            inst['model'] = _rule(errors, where, _vllm.check_model, settings.get('model_path'),
                                  'vllm_instance_model_path (or model_path of the instance)')
        # A flag of the instance's entry overrides the role variable; each is checked under the name it was given.
        # vllm_server's own options (served_model_name) stay top-level; the others go to its serve_flags.
        inst['serve_flags'] = {}
        starts = state != 'stopped' and not role_stopped
        for key in ROLE_FLAGS:
            if key in raw:
                value = _rule(errors, where, _vllm.check_serve_flag, key, raw[key], key, _vllm.UNSET_ROLE)
            elif starts:
                value = role_value(key)
            else:
                value = None  # a stopped instance's flags are never rendered
            if _vllm.FLAGS_BY_NAME[key].own:
                inst[key] = value
            elif value is not None:
                inst['serve_flags'][key] = value
        inst['host'] = raw.get('listen_host') or settings.get('listen_host') or None
        if inst['host'] is not None and starts:  # the rule of vllm_server's host (one address, no port)
            listen_option = 'listen_host' if raw.get('listen_host') else 'vllm_instance_listen_host'
            if _rule(errors, where, _vllm.check_serve_flag, 'host', inst['host'], listen_option) is None:
                inst['host'] = None
        if port:
            inst.update(instance_where(inst['host'], port, node_address))
        else:
            inst.update(address=None, url=None, endpoint=None, loopback=False)
        extra = dict(settings.get('kv_connector_extra_config') or {})
        extra.update(raw.get('kv_connector_extra_config') or {})
        config, warn, err = render_kv_transfer_config(
            profile, inst['lookup_rpc_port'], settings.get('kv_connector') or '', settings.get('kv_role') or 'kv_both',
            extra, settings.get('register_buffer'), settings.get('kv_transfer_extra'), where,
            settings.get('kv_load_failure_policy') or '')
        inst['kv_transfer_config'] = config
        raw_warnings.extend((where, w) for w in warn)
        errors.extend(err)
        user_env = dict(settings.get('environment') or {})
        user_env.update(raw.get('environment') or {})
        _rule(errors, where, _vllm.check_key_placement, {}, list(settings.get('extra_args') or []) +
              list(raw.get('extra_args') or []), 'vllm_instance_api_key')
        env, warn, err = render_env(profile, devices, settings.get('mooncake_config_path'),
                                    settings.get('python_hash_seed'), host_ip,
                                    settings.get('ascend_buffer_pool'), user_env, where,
                                    settings.get('mooncake_cluster_id') or '')
        inst['env'] = env
        inst['uses_local_buffer'] = uses_local_buffer(env)
        raw_warnings.extend((where, w) for w in warn)
        errors.extend(err)
        inst['path_prepend'] = {'LD_LIBRARY_PATH': ld}
        # The key never enters the plan (a fact, shown with -v): check_key_placement above said it was there.
        inst['extra_args'], dummy = drop_api_key_args([str(a) for a in (settings.get('extra_args') or [])] +
                                                      [str(a) for a in (raw.get('extra_args') or [])])
        inst['devices_text'] = _ranges(devices)
        planned.append(inst)
    errors.extend(find_collisions(planned, settings.get('reserved_ports'), host))
    # A role-level setting warns once per host, not once per instance.
    texts = [w[len(loc) + 2:] if w.startswith(loc + ': ') else w for loc, w in raw_warnings]
    for w, text in zip([item[1] for item in raw_warnings], texts):
        line = '%s: %s' % (host, text) if texts.count(text) > 1 else w
        if line not in warnings:
            warnings.append(line)
    plan['instances'] = planned
    started = [i for i in planned if i['state'] == 'started']
    plan['devices'] = sorted(set(d for i in started for d in i['devices']))
    plan['ports'] = [i['port'] for i in started if i['port']]
    plan['total_tp'] = sum(i['tensor_parallel_size'] for i in started)
    # TP ranks whose store clients register mooncake.json's local_buffer_size (none with fabric memory).
    plan['local_buffer_tp'] = sum(i['tensor_parallel_size'] for i in started if i['uses_local_buffer'])
    return plan


# --- status and summary of the instances (vllm_instance_status filter, vllm_instance_report action) ---------

def _by_name(results):
    out = {}
    for res in results or []:
        if not isinstance(res, dict) or res.get('skipped'):
            continue
        item = res.get('item') or {}
        if isinstance(item, dict) and item.get('name'):
            out[item['name']] = res
    return out


def _first_line(text):
    return (text or '').strip().split('\n')[0]


def vllm_instance_status(plan, launch_results=None, wait_results=None, wanted='started'):
    """Status of every planned instance of one host from the launch and wait results of vllm_server.

    Each status: ``name``, ``port``, ``endpoint``, ``health`` (healthy, starting, unknown, stopped, failed),
    ``ready_seconds``, ``devices_text``, ``served_model_name``, ``wanted`` (started or stopped), ``action``
    (what the run did), ``failed``, ``message`` (first line of the error) and ``error`` (the whole message, with
    the log tail).
    """
    launched = _by_name(launch_results)
    waited = _by_name(wait_results)
    out = []
    for inst in (plan or {}).get('instances') or []:
        name = inst.get('name')
        want = 'stopped' if wanted == 'stopped' or inst.get('state') == 'stopped' else 'started'
        st = {
            'name': name, 'port': inst.get('port'), 'devices_text': inst.get('devices_text'),
            'served_model_name': inst.get('served_model_name') or inst.get('model'), 'wanted': want,
            'endpoint': inst.get('endpoint'),
            'health': 'unknown', 'ready_seconds': None, 'action': 'none', 'failed': False, 'message': '',
            'error': '',
        }
        first = launched.get(name)
        second = waited.get(name)
        for res in (first, second):
            if not res:
                continue
            if res.get('action') and res.get('action') != 'none':
                st['action'] = res['action']
            if res.get('endpoint'):
                st['endpoint'] = res['endpoint']
            if res.get('health'):
                st['health'] = res['health']
            if res.get('ready_seconds') is not None:
                st['ready_seconds'] = res['ready_seconds']
            if res.get('failed'):
                st.update(failed=True, health='failed', message=_first_line(res.get('msg')),
                          error=res.get('msg') or '')
                break
        if want == 'stopped' and not st['failed']:
            st['health'] = 'stopped'
        out.append(st)
    return out


def vllm_instance_summary(status_by_host, hosts=None, label=''):
    """One summary of every instance of the play: endpoint, health, NPUs, and what went wrong.

    ``status_by_host`` maps a host to its list of instance statuses (``name``, ``endpoint``, ``health``,
    ``ready_seconds``, ``devices_text``, ``served_model_name``, ``action``, ``message``).
    Returns ``{'ok': bool, 'instances': n, 'healthy': n, 'lines': [...]}``.
    """
    hosts = list(hosts) if hosts else sorted(status_by_host or {})
    rows = []
    missing = []
    for host in hosts:
        if host not in (status_by_host or {}) or (status_by_host or {}).get(host) is None:
            missing.append(host)
            continue
        for st in (status_by_host or {}).get(host) or []:
            rows.append((host, st))
    healthy = [r for r in rows if r[1].get('health') == 'healthy']
    stopped = [r for r in rows if r[1].get('health') == 'stopped' and r[1].get('wanted') == 'stopped']
    problems = [r for r in rows if r not in healthy and r not in stopped
                and r[1].get('health') not in ('unknown', 'starting')]
    head = 'vLLM instances%s: %d instance(s) on %d node(s): %d healthy' % (
        (' [%s]' % label) if label else '', len(rows), len(set(h for h, _s in rows)), len(healthy))
    if stopped:
        head += ', %d stopped as wanted' % len(stopped)
    if problems or missing:
        head += ', %d problem(s)' % (len(problems) + len(missing))
    lines = [head]
    width = max([len(h) for h, _s in rows] + [4])
    name_width = max([len(str(s.get('name'))) for _h, s in rows] + [4])
    for host, st in rows:
        ready = st.get('ready_seconds')
        detail = []
        if st.get('served_model_name'):
            detail.append('serves %s' % st['served_model_name'])
        if st.get('devices_text'):
            detail.append('NPUs %s' % st['devices_text'])
        if ready is not None and st.get('health') == 'healthy' and st.get('action') in ('started', 'restarted'):
            detail.append('ready in %.1f s' % float(ready))
        if st.get('action') and st.get('action') != 'none':
            detail.append(st['action'])
        if st.get('message'):
            detail.append(st['message'])
        lines.append('%-*s  %-*s  %-28s  %-9s  %s' % (width, host, name_width, st.get('name'),
                                                      st.get('endpoint') or '-', st.get('health') or '?',
                                                      ', '.join(detail)))
    for host in missing:
        lines.append('%s  no status: the host failed or was unreachable before its instances were handled' % host)
    return {'ok': not problems and not missing, 'instances': len(rows), 'healthy': len(healthy), 'lines': lines,
            'problems': [dict(st, node=h) for h, st in problems], 'missing_hosts': missing}
