# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""preflight_facts (module) and its action plugin's clock math, on this host.

Listeners are real loopback sockets opened by the test (their owner is this test process), model directories
are temporary directories, and connections go to loopback ports; the container runtime is a fake executor.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from contextlib import closing

import pytest
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args
from ansible.plugins.action import ActionBase

from ansible_collections.ascend.kvpool.plugins.action import preflight_facts as action
from ansible_collections.ascend.kvpool.plugins.modules import preflight_facts
from ansible_collections.ascend.kvpool.tests.unit.messages import assert_names
from ansible_collections.ascend.kvpool.tests.unit.plugins.modules.process_helpers import free_port


def listener(host='127.0.0.1', port=0, family=socket.AF_INET):
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if family == socket.AF_INET6:
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    sock.bind((host, port))
    sock.listen(1)
    return sock


def own_cmdline():
    with open('/proc/self/cmdline') as handle:
        return [a for a in handle.read().split('\0') if a]


def ipv6_loopback():
    try:
        with closing(listener('::1', 0, socket.AF_INET6)):
            return True
    except (OSError, socket.error):
        return False


@pytest.fixture
def server():
    sock = listener()
    yield sock
    sock.close()


def run_main(args, monkeypatch, capsys, bins=None, execute=None):
    bins = bins or {}
    monkeypatch.setattr(basic.AnsibleModule, 'get_bin_path', lambda self, name, *a, **kw: bins.get(name))
    if execute is not None:
        monkeypatch.setattr(preflight_facts, 'execute', execute)
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            preflight_facts.main()
    return json.loads(capsys.readouterr().out)


# --- targets ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize('target, expected', [
    ('172.31.250.11:50088', ('172.31.250.11', 50088)),
    ('node1:22', ('node1', 22)),
    ('[fe80::1]:8002', ('fe80::1', 8002)),
    ('[::1]:1', ('::1', 1)),
    ('localhost:65535', ('localhost', 65535)),
])
def test_split_target(target, expected):
    assert preflight_facts.split_target(target) == expected
    assert preflight_facts._valid_target(target)


@pytest.mark.parametrize('target', ['node1', ':50088', 'node1:', 'node1:http', 'node1:-1', 'node1:0', 'node1:65536',
                                    'node1:70000', '[::1]:', ''])
def test_malformed_targets_are_refused(target):
    with pytest.raises(ValueError):
        preflight_facts.split_target(target)
    assert not preflight_facts._valid_target(target)


def test_connect_to_a_listening_port(server):
    res = preflight_facts.try_connect('127.0.0.1:%d' % server.getsockname()[1], 1.0)
    assert res['ok'] is True and res['error'] == '' and res['ms'] >= 0


def test_connect_to_a_closed_port_names_the_error():
    res = preflight_facts.try_connect('127.0.0.1:%d' % free_port(), 1.0)
    assert res['ok'] is False and 'refused' in res['error'].lower()


@pytest.mark.parametrize('target', ['no-port', '127.0.0.1:70000'])
def test_connect_to_a_malformed_target_does_not_try(target):
    res = preflight_facts.try_connect(target, 1.0)
    assert res['ok'] is False and res['error'] == 'not host:port' and res['ms'] < 100


def test_connect_over_ipv6_loopback():
    if not ipv6_loopback():
        pytest.skip('no IPv6 loopback here')
    with closing(listener('::1', 0, socket.AF_INET6)) as sock:
        assert preflight_facts.try_connect('[::1]:%d' % sock.getsockname()[1], 1.0)['ok'] is True


# --- model directories -----------------------------------------------------------------------------------------

def make_model(root, weights=1000):
    root.mkdir()
    (root / 'config.json').write_text('{}')
    (root / 'sub').mkdir()
    (root / 'sub' / 'model-00001.safetensors').write_bytes(b'x' * weights)
    return root


def test_model_directory_with_config_and_sizes(tmp_path):
    model = make_model(tmp_path / 'Qwen2.5-7B')
    info = preflight_facts.inspect_path(str(model), True)
    assert info == {'exists': True, 'is_dir': True, 'config': True, 'size_bytes': 1002, 'files': 2}


def test_sizes_are_not_summed_when_not_asked(tmp_path):
    model = make_model(tmp_path / 'm')
    info = preflight_facts.inspect_path(str(model), False)
    assert info['config'] is True and info['size_bytes'] is None and info['files'] is None


def test_directory_without_config_json(tmp_path):
    (tmp_path / 'weights.bin').write_bytes(b'y' * 10)
    info = preflight_facts.inspect_path(str(tmp_path), True)
    assert info['exists'] and info['is_dir'] and info['config'] is False
    assert info['size_bytes'] == 10 and info['files'] == 1


def test_missing_path_and_plain_file(tmp_path):
    assert preflight_facts.inspect_path(str(tmp_path / 'gone'), True) == {
        'exists': False, 'is_dir': False, 'config': False, 'size_bytes': None, 'files': None}
    (tmp_path / 'file').write_text('x')
    info = preflight_facts.inspect_path(str(tmp_path / 'file'), True)
    assert info['exists'] and not info['is_dir'] and info['config'] is False and info['size_bytes'] is None


def test_symlinked_files_count_their_target_and_broken_links_are_skipped(tmp_path):
    # The Hugging Face cache layout: snapshot files are links to blobs elsewhere.
    blobs = tmp_path / 'blobs'
    blobs.mkdir()
    (blobs / 'abc').write_bytes(b'z' * 500)
    model = tmp_path / 'snapshot'
    model.mkdir()
    (model / 'config.json').symlink_to(blobs / 'abc')
    (model / 'dangling.safetensors').symlink_to(tmp_path / 'nowhere')
    link = tmp_path / 'link-to-snapshot'
    link.symlink_to(model)
    info = preflight_facts.inspect_path(str(link), True)
    assert info == {'exists': True, 'is_dir': True, 'config': True, 'size_bytes': 500, 'files': 1}


# --- port listeners --------------------------------------------------------------------------------------------

def test_listener_is_this_process_with_its_command_line(server):
    port = server.getsockname()[1]
    closed = free_port()
    got = preflight_facts.port_listeners([port, closed])
    assert got[str(closed)] == {'listening': False}
    mine = got[str(port)]
    assert mine['listening'] is True and mine['address'] == '127.0.0.1' and mine['addresses'] == ['127.0.0.1']
    assert mine['pid'] == os.getpid()
    with open('/proc/%d/cmdline' % os.getppid(), 'rb') as handle:
        parent = [a.decode() for a in handle.read().split(b'\0') if a]
    if os.getppid() > 1:
        assert mine['ancestors'][0] == parent                    # the parent's command line comes first
    assert mine['cmdline'] == own_cmdline() and mine['cmdline']


def test_listener_on_ipv4_and_ipv6_lists_both_addresses(server):
    if not ipv6_loopback():
        pytest.skip('no IPv6 loopback here')
    port = server.getsockname()[1]
    try:
        six = listener('::1', port, socket.AF_INET6)
    except (OSError, socket.error):
        pytest.skip('port %d is taken on ::1' % port)
    with closing(six):
        mine = preflight_facts.port_listeners([port])[str(port)]
    assert mine['addresses'] == ['127.0.0.1', '::1'] and mine['pid'] == os.getpid()


def test_connected_sockets_are_not_listeners(server):
    port = server.getsockname()[1]
    with closing(socket.create_connection(('127.0.0.1', port), timeout=1)) as client:
        client_port = client.getsockname()[1]
        got = preflight_facts.port_listeners([client_port])
    assert got == {str(client_port): {'listening': False}}


def test_unreadable_owner_leaves_pid_and_cmdline_null(server, monkeypatch):
    monkeypatch.setattr(preflight_facts, 'socket_owners', lambda inodes: {})
    port = server.getsockname()[1]
    mine = preflight_facts.port_listeners([port])[str(port)]
    assert mine['listening'] is True and mine['pid'] is None and mine['cmdline'] is None


def test_socket_owners_of_nothing_scans_nothing(monkeypatch):
    monkeypatch.setattr(preflight_facts.os, 'listdir', lambda path: pytest.fail('scanned %s' % path))
    assert preflight_facts.socket_owners(set()) == {}


def test_read_text_of_a_missing_file_is_empty(tmp_path):
    assert preflight_facts.read_text(str(tmp_path / 'nope')) == ''


# --- container -------------------------------------------------------------------------------------------------

class FakeModule(object):
    def __init__(self, bins):
        self.bins = bins

    def get_bin_path(self, name, *args, **kwargs):
        return self.bins.get(name)


def fake_inspect(present, calls):
    def execute(argv, timeout=None):
        calls.append(list(argv))
        return (0, 'sha256:1\n', '') if argv[-1] in present else (1, '', 'Error: No such image: %s' % argv[-1])
    return execute


def test_container_images_present_and_missing(monkeypatch):
    calls = []
    monkeypatch.setattr(preflight_facts, 'execute', fake_inspect({'vllm-ascend:v0.11'}, calls))
    got = preflight_facts.container_facts(FakeModule({'docker': '/usr/bin/docker'}), 'docker',
                                          ['vllm-ascend:v0.11', 'other:latest'])
    assert got == {'runtime': '/usr/bin/docker', 'images': {'vllm-ascend:v0.11': True, 'other:latest': False}}
    assert ['/usr/bin/docker', 'image', 'inspect', '--format', '{{.Id}}', 'vllm-ascend:v0.11'] in calls


def test_container_runtime_absent(monkeypatch):
    monkeypatch.setattr(preflight_facts, 'execute', lambda argv, timeout=None: pytest.fail('ran %s' % argv))
    got = preflight_facts.container_facts(FakeModule({}), 'podman', ['img'])
    assert got == {'runtime': None, 'images': {'img': None}}


def test_container_runtime_is_looked_up_without_images(monkeypatch):
    monkeypatch.setattr(preflight_facts, 'execute', lambda argv, timeout=None: pytest.fail('ran %s' % argv))
    assert preflight_facts.container_facts(FakeModule({'docker': '/usr/bin/docker'}), 'docker', []) == {
        'runtime': '/usr/bin/docker', 'images': {}}
    assert preflight_facts.container_facts(FakeModule({}), 'docker', []) == {'runtime': None, 'images': {}}


# --- the module ------------------------------------------------------------------------------------------------

def test_module_reads_everything_in_one_round_trip(tmp_path, server, monkeypatch, capsys):
    port = server.getsockname()[1]
    closed = free_port()
    model = make_model(tmp_path / 'model')
    calls = []
    before = time.time()
    res = run_main({'ports': [port, closed, port], 'paths': [str(model), str(tmp_path / 'gone')],
                    'connect': ['127.0.0.1:%d' % port, '127.0.0.1:%d' % closed], 'connect_timeout': 1.0,
                    'images': ['vllm-ascend:v0.11']},
                   monkeypatch, capsys, bins={'docker': '/usr/bin/docker'},
                   execute=fake_inspect({'vllm-ascend:v0.11'}, calls))
    assert res['changed'] is False and not res.get('failed')
    assert before <= res['epoch'] <= time.time()
    assert res['hostname'] == socket.gethostname()
    assert res['memory']['MemTotal'] > 0
    assert sorted(res['ports']) == sorted([str(port), str(closed)])
    assert res['ports'][str(port)]['pid'] == os.getpid() and res['ports'][str(closed)] == {'listening': False}
    assert res['paths'][str(model)]['config'] is True and res['paths'][str(model)]['size_bytes'] == 1002
    assert res['paths'][str(tmp_path / 'gone')]['exists'] is False
    assert res['connect']['127.0.0.1:%d' % port]['ok'] is True
    assert res['connect']['127.0.0.1:%d' % closed]['ok'] is False
    assert res['container'] == {'runtime': '/usr/bin/docker', 'images': {'vllm-ascend:v0.11': True}}
    assert 'clock' not in res  # the action plugin adds it


def test_module_reads_the_npus_with_npu_smi_in_the_same_round_trip(tmp_path, monkeypatch, capsys):
    # A recorded npu-smi answer (8x 910B2, a vLLM worker on every NPU) behind a script at npu_smi_path.
    fixtures = os.path.join(os.path.dirname(__file__), '..', 'module_utils', 'fixtures')
    table = tmp_path / 'info.txt'
    with open(os.path.join(fixtures, 'npu_smi_info_910b2_running.txt')) as fh:
        table.write_text(''.join(line for line in fh if not line.startswith('#@ ')))
    tool = tmp_path / 'npu-smi'
    tool.write_text('#!/bin/sh\n[ "$2" = -l ] && { echo "Total Count : 8"; exit 0; }\ncat %s\n' % table)
    tool.chmod(0o755)
    res = run_main({'npu_smi': True, 'npu_smi_path': str(tool)}, monkeypatch, capsys)
    assert res['npu']['driver_loaded'] is True and res['npu']['count'] == 8
    assert res['npu']['busy_npus'] == list(range(8))


def test_module_names_a_missing_npu_smi_without_failing(monkeypatch, capsys):
    res = run_main({'npu_smi': True}, monkeypatch, capsys, bins={})
    assert not res.get('failed') and res['npu']['failed'] is True
    assert_names(res['npu']['msg'], 'npu-smi not found', 'this host')
    assert 'npu' not in run_main({}, monkeypatch, capsys)


def test_module_without_arguments(monkeypatch, capsys):
    res = run_main({}, monkeypatch, capsys)
    assert res['ports'] == {} and res['paths'] == {} and res['connect'] == {}
    assert res['container'] == {'runtime': None, 'images': {}}


@pytest.mark.parametrize('args, text', [
    ({'ports': [8002, 0, 70000]}, 'ports must be TCP ports 1-65535, got [0, 70000]'),
    ({'connect': ['ok:1', 'node1', 'node1:99999']},
     "connect targets must be host:port (or [v6]:port), got ['node1', 'node1:99999']"),
])
def test_module_refuses_bad_ports_and_targets(args, text, monkeypatch, capsys):
    res = run_main(args, monkeypatch, capsys)
    assert res['failed'] is True and res['msg'] == text


# --- the Mooncake master's libraries ----------------------------------------------------------------------------
# Hermetic: a console script run by this test's python, which finds a package "mooncake" made in tmp_path through
# PYTHONPATH given as the master's environment, and an ldd stand-in that prints a recorded answer. Real: the PyPI
# wheels in the venvs of `make mooncake-matrix` ($KVPOOL_MOONCAKE_MATRIX/<version>, which that target sets and runs
# these tests with; skipped without it, failed when it is set and a venv is missing), with the node's own ldd.
FIXTURES = os.path.join(os.path.dirname(__file__), '..', 'module_utils', 'fixtures', 'preflight')
REAL_VENVS = os.environ.get('KVPOOL_MOONCAKE_MATRIX', '')


def fake_ldd(tmp_path, fixture):
    tool = tmp_path / 'ldd'
    tool.write_text('#!/bin/sh\necho "$1" > %s/ldd.arg\necho "LD_LIBRARY_PATH=$LD_LIBRARY_PATH" >> %s/ldd.arg\n'
                    'cat %s\n' % (tmp_path, tmp_path, os.path.join(FIXTURES, fixture)))
    tool.chmod(0o755)
    return str(tool)


def fake_wheel(tmp_path, interpreter=None, init='raise RuntimeError("the package must not be imported")\n'):
    """bin/mooncake_master (pip's console script) and site/mooncake/mooncake_master beside a dist-info."""
    site = tmp_path / 'site'
    (site / 'mooncake').mkdir(parents=True)
    (site / 'mooncake' / '__init__.py').write_text(init)
    (site / 'mooncake' / 'mooncake_master').write_bytes(b'\x7fELF\x02\x01\x01')
    (site / 'mooncake_transfer_engine_non_cuda-0.3.12.post1.dist-info').mkdir()
    (tmp_path / 'bin').mkdir()
    script = tmp_path / 'bin' / 'mooncake_master'
    with open(os.path.join(FIXTURES, 'mooncake_master_console_script.txt')) as handle:
        text = handle.read().split('\n', 1)[1]
    script.write_text('#!%s\n%s' % (interpreter or sys.executable, text))
    script.chmod(0o755)
    return str(script), str(site)


def test_a_console_script_is_followed_to_the_binary_and_its_missing_library_named(tmp_path, monkeypatch, capsys):
    script, site = fake_wheel(tmp_path)
    ldd = fake_ldd(tmp_path, 'ldd_mooncake_master_0.3.12.post1.txt')
    res = run_main({'mooncake_binary': script, 'mooncake_environment': {'PYTHONPATH': site, 'LD_LIBRARY_PATH': '/x'}},
                   monkeypatch, capsys, bins={'ldd': ldd})
    libs = res['mooncake_libraries']
    assert libs['binary'] == os.path.join(site, 'mooncake', 'mooncake_master') and libs['wrapper'] == script
    assert libs['missing'] == ['libcudart.so.12'] and libs['raw'] == ['libcudart.so.12 => not found']
    assert libs['wheels'] == ['mooncake-transfer-engine-non-cuda 0.3.12.post1'] and libs['error'] == ''
    # ldd read the real binary, with the master's environment.
    assert (tmp_path / 'ldd.arg').read_text() == '%s\nLD_LIBRARY_PATH=/x\n' % libs['binary']


def test_a_binary_that_is_no_console_script_is_read_itself(tmp_path, monkeypatch, capsys):
    ldd = fake_ldd(tmp_path, 'ldd_mooncake_master_0.3.13.post1.txt')
    res = run_main({'mooncake_binary': sys.executable}, monkeypatch, capsys, bins={'ldd': ldd})
    assert res['mooncake_libraries'] == {'binary': os.path.realpath(sys.executable), 'wrapper': None, 'missing': [],
                                         'raw': [], 'wheels': [], 'error': ''}


def test_a_master_that_is_not_there_is_null_without_an_error(tmp_path, monkeypatch, capsys):
    for name in ('mooncake_master', str(tmp_path / 'gone')):
        libs = run_main({'mooncake_binary': name}, monkeypatch, capsys, bins={})['mooncake_libraries']
        assert libs['binary'] is None and libs['wrapper'] is None and libs['missing'] == [] and libs['error'] == ''
    assert 'mooncake_libraries' not in run_main({}, monkeypatch, capsys)


@pytest.mark.parametrize('case, needle', [
    ('interpreter gone', 'No such file or directory'),
    ('no package', 'its interpreter does not find the package mooncake'),
    ('no binary', 'no mooncake_master in '),
])
def test_a_console_script_that_leads_nowhere_names_why(case, needle, tmp_path, monkeypatch, capsys):
    # "no package": -S keeps site-packages (the project venv has a mooncake) off the interpreter's path.
    interpreter = {'interpreter gone': str(tmp_path / 'gone' / 'python3'), 'no package': sys.executable + ' -S'}
    script, site = fake_wheel(tmp_path, interpreter.get(case))
    if case == 'no binary':
        os.remove(os.path.join(site, 'mooncake', 'mooncake_master'))
    env = {} if case == 'no package' else {'PYTHONPATH': site}
    libs = run_main({'mooncake_binary': script, 'mooncake_environment': env}, monkeypatch, capsys,
                    bins={'ldd': fake_ldd(tmp_path, 'ldd_mooncake_master_0.3.12.post1.txt')})['mooncake_libraries']
    assert libs['binary'] is None and libs['wrapper'] == script and libs['missing'] == []
    assert libs['error'].startswith('the console script %s (' % script) and needle in libs['error'], libs['error']


def test_without_ldd_the_libraries_are_not_read(tmp_path, monkeypatch, capsys):
    libs = run_main({'mooncake_binary': sys.executable}, monkeypatch, capsys, bins={})['mooncake_libraries']
    assert libs['binary'] == os.path.realpath(sys.executable) and libs['error'] == 'ldd not found on this node'


@pytest.mark.parametrize('env, text', [
    ({'LD LIBRARY': '/x'}, "mooncake_environment: not valid environment variable names: 'LD LIBRARY'"),
    ({'LD_LIBRARY_PATH': 'a\0b'}, 'mooncake_environment.LD_LIBRARY_PATH holds a NUL byte'),
])
def test_a_bad_master_environment_is_refused_naming_it(env, text, monkeypatch, capsys):
    res = run_main({'mooncake_binary': 'mooncake_master', 'mooncake_environment': env}, monkeypatch, capsys)
    assert res['failed'] is True and res['msg'].startswith(text), res['msg']


def real_wheel(version):
    if not REAL_VENVS:
        pytest.skip('KVPOOL_MOONCAKE_MATRIX is unset: make mooncake-matrix runs these with the real wheels')
    script = os.path.join(REAL_VENVS, version, 'bin', 'mooncake_master')
    ldd = shutil.which('ldd')
    assert os.path.isfile(script) and ldd, ('PyPI mooncake-transfer-engine-non-cuda==%s is not installed in %s '
                                            '(or no ldd here): run make mooncake-matrix'
                                            % (version, os.path.dirname(os.path.dirname(script))))
    return script, ldd


def test_the_real_0_3_12_wheel_lacks_the_cuda_runtime(monkeypatch, capsys):
    script, ldd = real_wheel('0.3.12.post1')
    libs = run_main({'mooncake_binary': script}, monkeypatch, capsys, bins={'ldd': ldd})['mooncake_libraries']
    assert libs['wrapper'] == script and libs['error'] == ''
    assert libs['binary'].endswith('/site-packages/mooncake/mooncake_master') and os.path.isfile(libs['binary'])
    assert libs['missing'] == ['libcudart.so.12'] and libs['raw'] == ['libcudart.so.12 => not found']
    assert libs['wheels'] == ['mooncake-transfer-engine-non-cuda 0.3.12.post1']


def test_the_real_0_3_12_wheel_with_a_cuda_runtime_on_its_library_path(tmp_path, monkeypatch, capsys):
    # The fix the finding names: a directory holding libcudart.so.12 in mooncake_master_environment.LD_LIBRARY_PATH.
    # Stand-in for nvidia-cuda-runtime-cu12's lib directory: libc under that name (ldd only finds files by name).
    script, ldd = real_wheel('0.3.12.post1')
    python = os.path.join(os.path.dirname(script), 'python3')
    libc = [line.split()[2] for line in subprocess.check_output([ldd, python], universal_newlines=True).splitlines()
            if line.split()[:2] == ['libc.so.6', '=>']]
    (tmp_path / 'libcudart.so.12').symlink_to(libc[0])
    libs = run_main({'mooncake_binary': script, 'mooncake_environment': {'LD_LIBRARY_PATH': str(tmp_path)}},
                    monkeypatch, capsys, bins={'ldd': ldd})['mooncake_libraries']
    assert libs['missing'] == [], libs


def test_the_real_0_3_13_wheel_has_every_library(monkeypatch, capsys):
    script, ldd = real_wheel('0.3.13.post1')
    libs = run_main({'mooncake_binary': script}, monkeypatch, capsys, bins={'ldd': ldd})['mooncake_libraries']
    assert libs['wrapper'] == script and libs['binary'].endswith('/mooncake/mooncake_master')
    assert libs['missing'] == [] and libs['raw'] == [] and libs['error'] == ''
    assert libs['wheels'] == ['mooncake-transfer-engine-non-cuda 0.3.13.post1']


# --- the action plugin's clock ---------------------------------------------------------------------------------

class FakeTask(object):
    args = {'ports': [8002]}


def run_action(monkeypatch, controller_times, module_result):
    monkeypatch.setattr(ActionBase, 'run', lambda self, tmp=None, task_vars=None: {})
    times = iter(controller_times)
    monkeypatch.setattr(action.time, 'time', lambda: next(times))
    plugin = action.ActionModule.__new__(action.ActionModule)
    plugin._task = FakeTask()
    seen = {}

    def execute_module(module_name=None, module_args=None, task_vars=None):
        seen.update(module_name=module_name, module_args=module_args)
        return dict(module_result)

    plugin._execute_module = execute_module
    return plugin.run(task_vars={}), seen


def test_clock_offset_is_the_node_minus_the_round_trip_midpoint(monkeypatch):
    res, seen = run_action(monkeypatch, [1000.0, 1000.4], {'changed': False, 'epoch': 1030.25})
    assert seen == {'module_name': 'ascend.kvpool.preflight_facts', 'module_args': {'ports': [8002]}}
    assert res['clock'] == {'offset_s': 30.05, 'uncertainty_s': 0.2}
    assert res['epoch'] == 1030.25


def test_clock_behind_is_negative(monkeypatch):
    res = run_action(monkeypatch, [1000.0, 1000.1], {'epoch': 995.05})[0]
    assert res['clock'] == {'offset_s': -5.0, 'uncertainty_s': 0.05}


def test_failed_module_has_no_clock(monkeypatch):
    res = run_action(monkeypatch, [1000.0, 1000.1], {'failed': True, 'msg': 'boom'})[0]
    assert 'clock' not in res and res['msg'] == 'boom'


def test_probe_time_is_taken_out_of_the_round_trip(monkeypatch):
    # 4 s round trip, of which the module probed 3.6 s after reading its clock: 0.2 s of transport each way.
    res = run_action(monkeypatch, [1000.0, 1004.0], {'epoch': 1030.2, 'probe_s': 3.6})[0]
    assert res['clock'] == {'offset_s': 30.0, 'uncertainty_s': 0.2}
