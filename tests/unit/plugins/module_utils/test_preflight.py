# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Unit tests for plugins/module_utils/_preflight.py over recorded /proc/meminfo and /proc/net/tcp{,6}.

fixtures/preflight/ holds real files of a Linux kernel (a container running mooncake_master on 50088/9003, a
vllm stand-in on 172.31.250.11:8002, sshd on 22); the expected addresses below are decoded by hand.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import io
import os

import pytest

from ansible_collections.ascend.kvpool.plugins.module_utils._preflight import (
    TCP_LISTEN,
    parse_meminfo,
    parse_net_tcp,
    socket_inode,
    wildcard,
)
from ansible_collections.ascend.kvpool.tests.unit.messages import assert_names
from ansible_collections.ascend.kvpool.tests.unit.plugins.module_utils.fixture_loader import FIXTURES_DIR

KIB = 1024


def recorded(name):
    with io.open(os.path.join(FIXTURES_DIR, 'preflight', name), 'r', encoding='utf-8', newline='') as handle:
        return handle.read()


HEADER6 = ('  sl  local_address                         remote_address                        st tx_queue rx_queue tr '
           'tm->when retrnsmt   uid  timeout inode\n')


def row6(sl, local, port, state='0A', uid=0, inode=1000):
    """One /proc/net/tcp6 row as the kernel prints it (remote all zeros)."""
    return ('  %2d: %s:%s %s:0000 %s 00000000:00000000 00:00000000 00000000 %5d        0 %d 1 0000000000000000 100 '
            '0 0 10 0\n' % (sl, local, port, '0' * 32, state, uid, inode))


# Hand-made /proc/net/tcp6 (the recording has only the :: wildcard). Each address is four 32-bit words, each
# printed little-endian: ::ffff:172.31.250.11 is 0000:0000 0000:0000 0000:ffff ac1f:fa0b on the wire, so the
# words print as 00000000 00000000 FFFF0000 0BFA1FAC.
HAND_MADE_TCP6 = HEADER6 + ''.join([
    row6(0, '0000000000000000FFFF00000BFA1FAC', '1F42', inode=3001),            # ::ffff:172.31.250.11:8002
    row6(1, '00000000000000000000000001000000', '232B', inode=3002),            # ::1:9003
    row6(2, 'B80D0120000000000000000001000000', 'C3A8', uid=1000, inode=3003),  # 2001:db8::1:50088
    row6(3, '000080FE000000000200010004000300', '0016', inode=3004),            # fe80::1:2:3:4:22
    row6(4, '00000000000001000100000003000200', '1F43', inode=3005),            # ::1:0:0:1:2:3 (two equal runs)
    row6(5, 'B80D0120000000000000000001000000', '1F44', state='01', inode=0),   # established: not a listener
    '   6: garbage\n',
    row6(7, 'ZZ0D0120000000000000000001000000', '1F45', inode=3007),            # not hex: skipped
])


# --- /proc/meminfo ----------------------------------------------------------------------------------------------

def test_meminfo_values_are_bytes():
    mem = parse_meminfo(recorded('meminfo.txt'))
    assert mem['MemTotal'] == 24684096 * KIB == 25276514304
    assert mem['MemAvailable'] == 23941912 * KIB
    assert mem['Hugepagesize'] == 2048 * KIB
    assert mem['VmallocTotal'] == 34359738367 * KIB


def test_meminfo_counts_without_unit_stay_counts():
    mem = parse_meminfo(recorded('meminfo.txt'))
    assert mem['HugePages_Total'] == 0 and mem['HugePages_Free'] == 0
    assert parse_meminfo('HugePages_Total:     512\n')['HugePages_Total'] == 512


def test_meminfo_keys_with_parentheses_are_kept():
    mem = parse_meminfo(recorded('meminfo.txt'))
    assert mem['Active(anon)'] == 1568 * KIB
    assert mem['Inactive(file)'] == 706524 * KIB
    assert len(mem) == len(recorded('meminfo.txt').splitlines())


@pytest.mark.parametrize('text', [None, '', 'not meminfo\n', 'MemTotal: lots kB\n',
                                  'MemTotal: 5 MB\n'])  # only kB is converted: another unit is not read as bytes
def test_meminfo_of_nothing_is_empty(text):
    assert parse_meminfo(text) == {}


# --- /proc/net/tcp ---------------------------------------------------------------------------------------------

def test_recorded_tcp_listeners_decoded():
    # 00000000:232B = 0.0.0.0:9003 (mooncake_master metrics), 0BFA1FAC:1F42 = bytes 0B FA 1F AC reversed =
    # 172.31.250.11, 0x1F42 = 8002 (vllm stand-in), 0B00007F:876D = 127.0.0.11:34669 (Docker's DNS),
    # 00000000:3E05 = 0.0.0.0:15877, 00000000:C3A8 = 0.0.0.0:50088 (mooncake_master RPC), 00000000:0016 = :22.
    got = [(s['address'], s['port'], s['inode'], s['uid']) for s in parse_net_tcp(recorded('node1-net-tcp.txt'))]
    assert got == [
        ('0.0.0.0', 9003, 2152444, 0),
        ('172.31.250.11', 8002, 2154774, 0),
        ('127.0.0.11', 34669, 2147687, 0),
        ('0.0.0.0', 15877, 2154797, 0),
        ('0.0.0.0', 50088, 2151297, 0),
        ('0.0.0.0', 22, 2147765, 0),
    ]


def test_recorded_tcp_connections_are_not_listeners():
    text = recorded('node1-net-tcp.txt')
    rows = [line.split() for line in text.splitlines()[1:]]
    assert len(rows) == 46 and sum(1 for r in rows if r[3] == TCP_LISTEN) == 6
    # 0BFA1FAC:C3A8 (172.31.250.11:50088) appears as ESTABLISHED (01) rows only: the listener is 0.0.0.0:50088.
    assert [s['address'] for s in parse_net_tcp(text) if s['port'] == 50088] == ['0.0.0.0']
    assert all(s['inode'] > 0 for s in parse_net_tcp(text))


def test_recorded_tcp6_wildcard_listeners():
    # 32 zeros is ::, 0x411D = 16669, 0x0016 = 22.
    got = [(s['address'], s['port'], s['inode']) for s in parse_net_tcp(recorded('node1-net-tcp6.txt'))]
    assert got == [('::', 16669, 2154799), ('::', 22, 2147766)]
    assert all(wildcard(s['address']) for s in parse_net_tcp(recorded('node1-net-tcp6.txt')))


def test_hand_made_tcp6_mapped_and_real_v6_addresses():
    got = [(s['address'], s['port'], s['inode'], s['uid']) for s in parse_net_tcp(HAND_MADE_TCP6)]
    assert got == [
        ('172.31.250.11', 8002, 3001, 0),  # v4-mapped is shown as the IPv4 address
        ('::1', 9003, 3002, 0),
        ('2001:db8::1', 50088, 3003, 1000),
        ('fe80::1:2:3:4', 22, 3004, 0),
        ('::1:0:0:1:2:3', 8003, 3005, 0),  # RFC 5952: the first of two equally long zero runs is shortened
    ]


@pytest.mark.parametrize('text', [None, '', '  sl  local_address rem_address   st\n'])
def test_net_tcp_of_nothing_is_empty(text):
    assert parse_net_tcp(text) == []


def test_first_line_is_always_the_header():
    line = recorded('node1-net-tcp.txt').splitlines()[1]
    assert parse_net_tcp(line) == []
    assert [s['port'] for s in parse_net_tcp('header\n' + line)] == [9003]


# --- helpers ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize('link, inode', [
    ('socket:[2154774]', 2154774),
    ('socket:[0]', 0),
    ('pipe:[2154774]', None),
    ('anon_inode:[eventpoll]', None),
    ('/dev/null', None),
    ('socket:[12a]', None),
    ('', None),
    (None, None),
])
def test_socket_inode(link, inode):
    assert socket_inode(link) == inode


@pytest.mark.parametrize('address, expected', [
    ('0.0.0.0', True), ('::', True), ('127.0.0.1', False), ('::1', False), ('172.31.250.11', False),
    ('::ffff:0.0.0.0', False),
])
def test_wildcard(address, expected):
    assert wildcard(address) is expected


# --- Ascend version files and glibc ------------------------------------------------------------------------------
# ldd_debian12.txt: `ldd --version` of the development machine (Debian 12). The three Ascend files are in the key=value
# format the vendor's own scripts read (/etc/ascend_install.info sourced by the driver's device_boot_init and
# setenv scripts, which take Driver_Install_Path_Param; driver/version.info with Version= and package_version=;
# ascend_toolkit_install.info with version=, as CANN's install guides `cat` it). They are reconstructed from those
# scripts and guides, not captured from a host: no Ascend host is available to this project.
from hypothesis import given, settings, strategies as st  # noqa: E402

from ansible_collections.ascend.kvpool.plugins.module_utils._preflight import (  # noqa: E402
    DEFAULT_DRIVER_INSTALL_PATH,
    driver_install_path,
    driver_version,
    glibc_version,
    parse_key_values,
    toolkit_version,
)


def test_ascend_files_give_the_driver_path_and_the_versions():
    assert driver_install_path(recorded('ascend_install.info')) == '/usr/local/Ascend'
    assert driver_version(recorded('driver_version.info')) == '24.1.rc2'
    assert toolkit_version(recorded('ascend_toolkit_install.info')) == '8.0.RC2'
    assert parse_key_values(recorded('ascend_install.info'))['UserName'] == 'HwHiAiUser'


@pytest.mark.parametrize('text, path', [
    ('', DEFAULT_DRIVER_INSTALL_PATH),
    ('Driver_Install_Path_Param=/opt/Ascend/\n', '/opt/Ascend'),
    ('driver_install_path_param="/data/Ascend"\n', '/data/Ascend'),
    ('# Driver_Install_Path_Param=/commented\nDriver_Install_Path_Param=/usr/local/Ascend\n', '/usr/local/Ascend'),
    ('Driver_Install_Path_Param=\n', DEFAULT_DRIVER_INSTALL_PATH),
])
def test_driver_install_path(text, path):
    assert driver_install_path(text) == path


@pytest.mark.parametrize('text, version', [
    ('Version=25.5.0\n', '25.5.0'),
    ('package_version=26.0.rc1\n', '26.0.rc1'),
    ('Innerversion=V100R001C19\n', None),
    ('', None),
])
def test_driver_version(text, version):
    assert driver_version(text) == version


@pytest.mark.parametrize('text, version', [
    (None, None), ('', None),
    ('ldd (Ubuntu GLIBC 2.35-0ubuntu3.8) 2.35\nCopyright ...\n', '2.35'),
    ('ldd (GNU libc) 2.34\n', '2.34'),
    ('glibc 2.36', '2.36'),
    ('musl libc (x86_64)\nVersion 1.2.4\n', None),
])
def test_glibc_version(text, version):
    assert glibc_version(text) == version


def test_glibc_version_of_this_machine():
    assert glibc_version(recorded('ldd_debian12.txt')) == '2.36'


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=400))
def test_version_file_parsers_never_raise(text):
    assert isinstance(parse_key_values(text), dict)
    assert driver_install_path(text).startswith('/') or driver_install_path(text)
    for value in (driver_version(text), toolkit_version(text), glibc_version(text)):
        assert value is None or isinstance(value, str)


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(st.from_regex(r'[A-Za-z_][A-Za-z0-9_]{0,12}', fullmatch=True),
                       st.from_regex(r'[A-Za-z0-9./\[\],-]{0,20}', fullmatch=True), max_size=8))
def test_key_values_round_trip(values):
    text = ''.join('%s=%s\n' % kv for kv in values.items())
    assert parse_key_values(text) == values


# --- the ephemeral port range, reserved ports, and who holds a port ---------------------------------------------
from ansible_collections.ascend.kvpool.plugins.module_utils._preflight import (  # noqa: E402
    ephemeral_unreserved,
    parse_net_tcp_port,
    parse_port_range,
    parse_reserved_ports,
    reserved_ports_text,
)


def test_recorded_time_wait_on_the_master_port_is_found():
    # Recorded on a mock node (a real kernel): an outgoing connection from local port 50088 to node2:22, closed
    # first by this side, then the master unit started: it exited with status 1 while this row lasted.
    got = parse_net_tcp_port(recorded('node1-net-tcp-time-wait-50088.txt'), 50088)
    assert {'local': '172.31.250.11:50088', 'remote': '172.31.250.12:22', 'state': 'TIME-WAIT'} in got, got
    assert all(s['local'].endswith(':50088') for s in got)
    assert parse_net_tcp_port(recorded('node1-net-tcp.txt'), 50088)[0]['state'] in ('LISTEN', 'ESTAB')


@pytest.mark.parametrize('text', ['', 'garbage\n', '  sl  local_address rem_address st\n   0: 0100007F\n'])
def test_sockets_of_a_port_in_nothing_are_none(text):
    assert parse_net_tcp_port(text, 50088) == []


def test_recorded_port_range_and_reserved_ports():
    assert parse_port_range(recorded('ip_local_port_range.txt')) == [32768, 60999]
    assert parse_reserved_ports(recorded('ip_local_reserved_ports-empty.txt')) == []
    assert parse_reserved_ports(recorded('ip_local_reserved_ports.txt')) == [[50088, 50088]]


@pytest.mark.parametrize('text, expected', [
    ('1024 65535\n', [1024, 65535]), ('32768\t60999', [32768, 60999]), ('', None), ('60999 32768', None),
    ('0 100', None), ('1 2 3', None), ('a b', None), ('100 70000', None)])
def test_port_range(text, expected):
    assert parse_port_range(text) == expected


@pytest.mark.parametrize('text, expected', [
    ('', []), ('\n', []), ('50088\n', [[50088, 50088]]), ('8000-8010,50088', [[8000, 8010], [50088, 50088]]),
    ('x,50088,9-3,70000', [[50088, 50088]])])
def test_reserved_ports(text, expected):
    assert parse_reserved_ports(text) == expected


def test_a_port_is_exposed_only_inside_the_range_and_unreserved():
    assert ephemeral_unreserved(50088, [32768, 60999], [])
    assert not ephemeral_unreserved(50088, [32768, 60999], [[50000, 50100]])
    assert not ephemeral_unreserved(8002, [32768, 60999], [])
    assert not ephemeral_unreserved(50088, None, [])


@pytest.mark.parametrize('reserved, ports, expected', [
    ([], [50088], '50088'), ([[8000, 8010]], [50088], '8000-8010,50088'), ([[50087, 50087]], [50088], '50087-50088'),
    ([[50000, 50100]], [50088], '50000-50100'), ([], [50089, 50088], '50088-50089')])
def test_the_reserved_ports_value_keeps_what_is_there(reserved, ports, expected):
    assert reserved_ports_text(reserved, ports) == expected


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 65535), st.integers(0, 50)), max_size=6),
       st.lists(st.integers(1, 65535), max_size=4))
def test_the_reserved_value_reads_back_as_a_superset(ranges, ports):
    reserved = [[a, min(a + n, 65535)] for a, n in ranges]
    back = parse_reserved_ports(reserved_ports_text(reserved, ports))

    def covered(port):
        return any(a <= port <= b for a, b in back)
    assert all(covered(p) for p in ports) and all(covered(a) and covered(b) for a, b in reserved)
    assert all(back[i][1] + 1 < back[i + 1][0] for i in range(len(back) - 1))  # merged, sorted


@given(st.text(max_size=200))
def test_the_port_parsers_never_raise(text):
    parse_port_range(text)
    parse_reserved_ports(text)
    parse_net_tcp_port(text, 50088)


from ansible_collections.ascend.kvpool.plugins.module_utils._preflight import port_held_hint  # noqa: E402


def test_a_time_wait_on_the_port_is_named_with_the_sysctl_that_prevents_it():
    sockets = parse_net_tcp_port(recorded('node1-net-tcp-time-wait-50088.txt'), 50088)
    hint = port_held_hint(50088, sockets, [32768, 60999], [])
    assert_names(hint, 'port 50088', 'held by 1 connection(s)', 'TIME-WAIT 172.31.250.11:50088', '-> 172.31.250.12:22',
                 'cannot bind')
    assert_names(hint, 'Fix: sysctl -w', 'ip_local_reserved_ports=50088', '/etc/sysctl.d/')
    reserved = port_held_hint(50088, sockets, [32768, 60999], [[50088, 50088]])
    assert 'ip_local_reserved_ports' not in reserved and 'or choose another port' in reserved


def test_a_listener_or_nothing_on_the_port_adds_no_hint():
    assert port_held_hint(50088, [], [32768, 60999], []) == ''
    listener = [{'local': '0.0.0.0:50088', 'remote': '0.0.0.0:0', 'state': 'LISTEN'}]
    assert port_held_hint(50088, listener, [32768, 60999], []) == ''


@pytest.mark.parametrize('text', ['\u00b9 2', '1 \u0662', '\u00b9', '5\u00b9-6'])
def test_digits_that_are_not_ascii_are_not_ports(text):
    assert parse_port_range(text) is None and parse_reserved_ports(text) == []


def test_connections_the_service_accepted_before_are_not_blamed():
    # A master that served clients leaves TIME-WAIT rows from 50088 to the clients' ephemeral ports; they share the
    # listener's SO_REUSEADDR and do not keep a restart from binding (the kill -9 drills restart it in about 1 s).
    accepted = [{'local': '172.31.250.11:50088', 'remote': '172.31.250.12:41234', 'state': 'TIME-WAIT'}]
    assert port_held_hint(50088, accepted, [32768, 60999], []) == ''
    opened = [{'local': '172.31.250.11:50088', 'remote': '172.31.250.12:22', 'state': 'TIME-WAIT'}]
    assert_names(port_held_hint(50088, accepted + opened, [32768, 60999], []), 'port 50088', 'held by 1 connection(s)',
                 'TIME-WAIT 172.31.250.11:50088', '-> 172.31.250.12:22')


# --- the Mooncake master's shared libraries ----------------------------------------------------------------------
# Recorded 2026-12-05 on the development machine (Debian 12, glibc 2.36) from PyPI's mooncake-transfer-engine-non-cuda
# installed in venvs under /tmp/mc (Python 3.11):
#   LANG=C ldd <venv>/lib/python3.11/site-packages/mooncake/mooncake_master
# of 0.3.12.post1 (links libcudart.so.12, not shipped: the master does not load) and of 0.3.13.post1 (every library
# found), stdout unchanged, exit status 0 and empty stderr for both. mooncake_master_console_script.txt is the venv's
# bin/mooncake_master that pip 23.2.1 wrote for the 0.3.12.post1 wheel (0.3.9 and 0.3.13.post1 have the same text);
# mooncake_master_console_script_long_path.txt is what pip 26.3 writes for the same entry point
# (mooncake_master = mooncake.cli:main) in a venv whose python's path is longer than a shebang allows.
from ansible_collections.ascend.kvpool.plugins.module_utils._preflight import (  # noqa: E402
    MOONCAKE_LOCATE_CODE,
    console_script_interpreter,
    ldd_not_found,
    mooncake_locations,
    parse_ldd_missing,
    wheel_of_dist_info,
)


def test_the_0_3_12_master_lacks_the_cuda_runtime():
    text = recorded('ldd_mooncake_master_0.3.12.post1.txt')
    assert parse_ldd_missing(text) == ['libcudart.so.12']
    assert ldd_not_found(text) == ['libcudart.so.12 => not found']
    assert 'libetcd_wrapper-79f7cae8.so =>' in text  # the libraries the wheel ships are found beside it


def test_the_0_3_13_master_has_every_library():
    assert parse_ldd_missing(recorded('ldd_mooncake_master_0.3.13.post1.txt')) == []
    assert ldd_not_found(recorded('ldd_mooncake_master_0.3.13.post1.txt')) == []


@pytest.mark.parametrize('text, missing', [
    ('', []), (None, []),
    ('\tlibfoo.so.1 => not found\n\tlibfoo.so.1 => not found\n\tlibbar.so => not found\n',
     ['libfoo.so.1', 'libbar.so']),
    ('\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f)\n', []),
    ('\tnot a dynamic executable\n', []),
    ('./x: /lib64/libc.so.6: version `GLIBC_2.38\' not found (required by ./x)\n', []),
    ('\tlibcudart.so.12 => not found\r\n', ['libcudart.so.12']),
])
def test_ldd_missing(text, missing):
    assert parse_ldd_missing(text) == missing


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400))
def test_the_ldd_parser_never_raises(text):
    missing, lines = parse_ldd_missing(text), ldd_not_found(text)
    assert len(missing) == len(lines) and all(line.startswith(lib) for lib, line in zip(missing, lines))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.from_regex(r'lib[a-z0-9_+-]{1,12}\.so(\.[0-9]{1,3}){0,2}', fullmatch=True), max_size=5, unique=True),
       st.lists(st.from_regex(r'lib[a-z]{1,8}\.so', fullmatch=True), max_size=5))
def test_every_not_found_line_is_read_among_found_ones(missing, found):
    lines = ['\t%s => not found' % lib for lib in missing]
    lines[1:1] = ['\t%s => /usr/lib/%s (0x00007f0000000000)' % (lib, lib) for lib in found]
    assert parse_ldd_missing('\n'.join(lines) + '\n') == missing


def test_the_wheels_console_script_names_its_interpreter():
    assert console_script_interpreter(recorded('mooncake_master_console_script.txt')) == [
        '/tmp/mc/v0.3.12.post1/bin/python3']


def test_pips_long_path_console_script_names_its_interpreter():
    argv = console_script_interpreter(recorded('mooncake_master_console_script_long_path.txt'))
    assert argv == ['/tmp/kvp-longpath/%s/venv/bin/python3' % ('a' * 110)]


SCRIPT_BODY = '# -*- coding: utf-8 -*-\nimport sys\nfrom mooncake.cli import main\nsys.exit(main())\n'


@pytest.mark.parametrize('first, argv', [
    ('#!/usr/bin/python3', ['/usr/bin/python3']),
    ('#!/usr/local/python3.11.10/bin/python3.11 -E', ['/usr/local/python3.11.10/bin/python3.11', '-E']),
    ('#!/usr/bin/env python3', ['/usr/bin/env', 'python3']),
    ('#!/usr/bin/env -S python3 -s', ['/usr/bin/env', '-S', 'python3', '-s']),
    ('#!/bin/sh\n\'\'\'exec\' "/opt/my venv/bin/python3" "$0" "$@"\n\' \'\'\'', ['/opt/my venv/bin/python3']),
    ('#!/bin/sh\n\'\'\'exec\' /opt/venv/bin/python -E "$0" "$@"\n\' \'\'\'', ['/opt/venv/bin/python', '-E']),
])
def test_console_scripts_of_mooncake_cli(first, argv):
    assert console_script_interpreter(first + '\n' + SCRIPT_BODY) == argv


@pytest.mark.parametrize('text', [
    '', None, '\x7fELF\x02\x01\x01', SCRIPT_BODY,                          # the binary itself; no shebang
    '#!/bin/sh\nexec /opt/mooncake/bin/mooncake_master "$@"\n',           # a shell wrapper
    '#!/usr/bin/python3\nfrom vllm.entrypoints.cli.main import main\n',    # another program's console script
    '#!/usr/bin/perl\n' + SCRIPT_BODY, '#!/usr/bin/env node\n' + SCRIPT_BODY, '#!\n' + SCRIPT_BODY,
    '#!/bin/sh\n' + SCRIPT_BODY,
    '#!/usr/bin/python3\n# from mooncake.cli import main\n',
])
def test_other_executables_are_not_console_scripts(text):
    assert console_script_interpreter(text) is None


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_the_console_script_reader_never_raises(text):
    for candidate in (text, '#!' + text, '#!/usr/bin/python3\n' + text, '#!/bin/sh\n' + text + '\n' + SCRIPT_BODY):
        argv = console_script_interpreter(candidate)
        assert argv is None or (argv and all(isinstance(a, str) for a in argv))


def test_the_locate_code_and_its_answer():
    compile(MOONCAKE_LOCATE_CODE, '<locate>', 'exec')  # runs on the node's python: any Python 3
    assert 'import mooncake' not in MOONCAKE_LOCATE_CODE  # the package's own code must not run
    assert mooncake_locations('/opt/venv/lib/python3.11/site-packages/mooncake\n\nrelative\n') == [
        '/opt/venv/lib/python3.11/site-packages/mooncake']
    assert mooncake_locations('') == [] and mooncake_locations(None) == []


@pytest.mark.parametrize('name, wheel', [
    ('mooncake_transfer_engine_non_cuda-0.3.12.post1.dist-info', 'mooncake-transfer-engine-non-cuda 0.3.12.post1'),
    ('/x/site-packages/mooncake_transfer_engine_npu-0.3.13.dist-info/', 'mooncake-transfer-engine-npu 0.3.13'),
    ('mooncake', None), ('', None), (None, None),
])
def test_wheel_of_dist_info(name, wheel):
    assert wheel_of_dist_info(name) == wheel
