# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Pure Mooncake helpers: mooncake.json sizes, master address, master argv and fingerprint, logs."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.ascend.kvpool.plugins.module_utils import _mooncake as mc
from ansible_collections.ascend.kvpool.tests.unit.messages import assert_names

GIB = 1024 ** 3


# --- sizes ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize('value,expected', [
    (107374182400, 100 * GIB),            # the guide's global_segment_size
    ('107374182400', 100 * GIB),
    ('100GB', 100 * GIB),
    ('100 GB', 100 * GIB),
    ('100gb', 100 * GIB),
    ('100GiB', 100 * GIB),
    ('100G', 100 * GIB),
    (' 1TB ', 1024 * GIB),
    ('512MB', 512 * 1024 ** 2),
    ('1.5GB', 1536 * 1024 ** 2),
    ('4KB', 4096),
    ('10B', 10),
    (0, 0),
    (2.0, 2),
])
def test_parse_size(value, expected):
    assert mc.parse_size(value) == expected


@pytest.mark.parametrize('value', ['', 'GB', '100 XB', '-1GB', 'ten', '1.0000000001B', True, None, -5, 1.5, [1]])
def test_parse_size_rejects(value):
    with pytest.raises(ValueError):
        mc.parse_size(value)


# --- master address --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize('address,expected', [
    ('172.31.250.11:50088', ('172.31.250.11', 50088)),
    ('[fd00::1]:50088', ('fd00::1', 50088)),
    ('etcd://a:2379;b:2379', None),
])
def test_parse_master_address(address, expected):
    assert mc.parse_master_address(address) == expected


def test_parse_master_address_rejects():
    with pytest.raises(ValueError, match='not host:port'):
        mc.parse_master_address('node1')


# --- argv and fingerprint --------------------------------------------------------------------------------------------
GUIDE = dict(port=50088, rpc_address=None, metrics_port=9003, metrics_address=None,
             eviction_high_watermark_ratio=0.95, eviction_ratio=0.05,
             max_threads=None, client_ttl=None, default_kv_lease_ttl=None, enable_ha=False, etcd_endpoints=[],
             enable_http_metadata_server=False)


def argv_of(**changes):
    params = dict(GUIDE, **changes)
    return mc.build_master_argv('/usr/local/bin/mooncake_master', mc.master_settings(params),
                                params.get('extra_args'))


def test_guide_argv():
    assert argv_of() == ['/usr/local/bin/mooncake_master', '--port=50088', '--metrics_port=9003',
                         '--eviction_high_watermark_ratio=0.95', '--eviction_ratio=0.05']


def test_every_flag_in_a_stable_order():
    argv = argv_of(rpc_address='10.0.0.5', max_threads=32, client_ttl=120, default_kv_lease_ttl=30000,
                   enable_ha=True, etcd_endpoints=['e1:2379', 'e2:2379'], enable_http_metadata_server=True,
                   extra_args=['--allocation_strategy=free_ratio_first'])
    assert argv[1:] == ['--port=50088', '--rpc_address=10.0.0.5', '--metrics_port=9003',
                        '--eviction_high_watermark_ratio=0.95', '--eviction_ratio=0.05', '--rpc_thread_num=32',
                        '--client_ttl=120', '--default_kv_lease_ttl=30000', '--enable_ha=true',
                        '--etcd_endpoints=e1:2379;e2:2379', '--enable_http_metadata_server=true',
                        '--allocation_strategy=free_ratio_first']


def test_off_switches_and_blank_address_are_left_out():
    argv = argv_of(rpc_address='  ', metrics_address='', etcd_endpoints=['e1:2379'])  # no endpoints without HA
    assert argv == argv_of()


def test_metrics_address_is_metrics_host_after_the_port():
    argv = argv_of(rpc_address='10.0.0.5', metrics_address='10.0.0.5')
    assert argv[1:5] == ['--port=50088', '--rpc_address=10.0.0.5', '--metrics_port=9003', '--metrics_host=10.0.0.5']
    assert mc.fingerprint(argv) != mc.fingerprint(argv_of(rpc_address='10.0.0.5'))


@pytest.mark.parametrize('value,text', [(0.95, '0.95'), (1.0, '1'), (0.0, '0'), (0.1 + 0.2, '0.3'), (True, 'true'),
                                        (False, 'false'), (50088, '50088'), (['a', 'b'], 'a;b')])
def test_format_flag_value(value, text):
    assert mc.format_flag_value(value) == text


def test_fingerprint_changes_only_when_settings_change():
    base = mc.fingerprint(argv_of())
    assert base == mc.fingerprint(argv_of())
    assert base == mc.fingerprint(argv_of(eviction_ratio=0.05000000001))  # same flag text, same master
    assert len(base) == 64
    different = [
        argv_of(eviction_ratio=0.1),
        argv_of(eviction_high_watermark_ratio=0.9),
        argv_of(port=50051),
        argv_of(metrics_port=9004),
        argv_of(max_threads=8),
        argv_of(extra_args=['--x=1']),
        ['/opt/other/mooncake_master'] + argv_of()[1:],
    ]
    prints = set(mc.fingerprint(a) for a in different)
    assert base not in prints and len(prints) == len(different)
    assert mc.fingerprint(argv_of(extra_args=['--a', '--b'])) != mc.fingerprint(argv_of(extra_args=['--b', '--a']))


def test_settings_text_for_the_diff():
    assert mc.settings_text(None) == 'state: stopped\n'
    text = mc.settings_text(argv_of())
    assert text.splitlines()[:2] == ['state: running', 'binary: /usr/local/bin/mooncake_master']
    assert '  --eviction_ratio=0.05' in text.splitlines()


# --- logs ------------------------------------------------------------------------------------------------------------
MASTER_LOG = """WARNING: Logging before InitGoogleLogging() is written to STDERR
W1129 17:37:04.280689  4682 master.cpp:744] port is deprecated, use rpc_port instead
I1129 17:37:04.280807  4682 master.cpp:1522] Master service started on port 50088, max_threads=2
E1129 17:37:04.290000  4682 rpc_service.cpp:88] Failed to bind port 50088: Address already in use
F1129 17:37:04.290100  4682 master.cpp:173] Mem eviction ratio must be between 0.0 and 1.0
*** Check failure stack trace: ***
"""


def test_tail_lines():
    assert mc.tail_lines(MASTER_LOG, 2) == 'F1129 17:37:04.290100  4682 master.cpp:173] Mem eviction ratio must be ' \
                                           'between 0.0 and 1.0\n*** Check failure stack trace: ***'
    assert mc.tail_lines(MASTER_LOG.encode(), 1) == '*** Check failure stack trace: ***'
    assert mc.tail_lines('', 5) == '' and mc.tail_lines(None, 5) == ''
    assert len(mc.tail_lines('x' * 10000, 5, max_chars=100)) == 100


def test_unknown_flag_hint():
    log = "WARNING: Logging before InitGoogleLogging() is written to STDERR\nERROR: unknown command line flag " \
          "'metrics_host'\n"
    assert mc.log_errors(log) == ["ERROR: unknown command line flag 'metrics_host'"]
    assert_names(mc.unknown_flag_hint(log), 'mooncake_master_metrics_address', 'metrics_address: ""')
    assert mc.unknown_flag_hint(log.encode()) == mc.unknown_flag_hint(log)
    assert mc.unknown_flag_hint("ERROR: unknown command line flag 'no_such_flag'") is None
    assert mc.unknown_flag_hint(MASTER_LOG) is None and mc.unknown_flag_hint(None) is None


def test_log_errors_and_excerpt():
    errors = mc.log_errors(MASTER_LOG)
    assert [e[:5] for e in errors] == ['E1129', 'F1129']
    excerpt = mc.log_excerpt(MASTER_LOG)
    assert 'Master service started' not in excerpt and 'InitGoogleLogging' not in excerpt
    assert 'W1129' in excerpt and 'Address already in use' in excerpt


def test_the_oplog_is_rendered_only_where_the_release_has_it():
    params = dict(enable_ha=True, etcd_endpoints=['e1:2379'], cluster_id='kvpool-1', enable_oplog=True)
    for version, oplog in (('0.3.13.post1', True), ('', True), ('0.3.12.post1', False), ('0.3.9', False)):
        argv = mc.build_master_argv('mooncake_master', mc.master_settings(params), None, version)
        assert ('--enable_oplog=true' in argv) is oplog and mc.has_oplog(version) is oplog
        assert '--cluster_id=kvpool-1' in argv
    alone = mc.master_settings(dict(params, enable_ha=False))
    assert 'cluster_id' not in alone and 'enable_oplog' not in alone
    assert 'cluster_id' not in mc.master_settings(dict(params, cluster_id=''))


def test_the_master_that_aborts_on_a_legacy_log_names_the_fix():
    # the real 0.3.13.post1 master's last lines on a namespace of the older format (both checks it makes)
    for line in ('E1206 03:57:53.854347 32723 oplog_batch_storage.cpp:495] Legacy OpLog latest key exists for '
                 'cluster=exp5; clear the legacy OpLog namespace before enabling batch-record OpLog',
                 'E1206 04:05:04.197358  3162 oplog_batch_storage.cpp:512] Legacy per-entry OpLog key exists for '
                 'cluster=exp8; clear the legacy OpLog namespace before enabling batch-record OpLog'):
        hint = mc.legacy_oplog_hint(line)
        assert_names(hint, '/oplog/exp', 'mooncake_master_oplog_reset_legacy: true', 'mooncake_master_oplog: false')
    assert mc.legacy_oplog_hint(MASTER_LOG) is None and mc.legacy_oplog_hint(None) is None
    assert_names(mc.unknown_flag_hint("ERROR: unknown command line flag 'enable_oplog'"), '0.3.13',
                 'mooncake_master_oplog: false')
