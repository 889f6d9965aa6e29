# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Bad input to the service modules (vllm_server, mooncake_master, mooncake_store_probe) and to their engine
(module_utils/_service.py), as an operator with a typo or a broken node gives it: a clear failure that names the
option (or directory) and the value, before anything is written, started or removed; never a traceback, a hang, a
wrong success or a file outside the module's own directories (docs/bad-input.md lists them).

Runs on localhost, without systemd: the modules run over the in-memory service manager of
service_harness.py, the engine's systemd backend over a recorded systemctl with its unit and secrets
directories under tmp. A read-only filesystem is SIMULATED (``os.statvfs`` reports ``ST_RDONLY``, ``mkdir`` fails
with EROFS): the tests run as root, and root can write anywhere else.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import json
import os
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.ascend.kvpool.plugins.module_utils import _service, _validate
from ansible_collections.ascend.kvpool.plugins.module_utils._errors import KvpoolError
from ansible_collections.ascend.kvpool.plugins.modules import mooncake_store_probe
from ansible_collections.ascend.kvpool.tests.unit.messages import assert_names
from ansible_collections.ascend.kvpool.tests.unit.plugins.module_utils import service_fakes as engine_tests
from ansible_collections.ascend.kvpool.tests.unit.plugins.modules import service_harness as svc
from ansible_collections.ascend.kvpool.tests.unit.plugins.modules.process_helpers import free_port


# The in-memory service manager of service_harness, patched in for both service modules.
mgr = svc.manager


def vllm(capsys, **args):
    args.setdefault('wait', False)  # launched, not waited for: the input checks come before any of that
    return svc.vllm(capsys, **args)


master = svc.master


def simulate_read_only(monkeypatch, top):
    """SIMULATED: the filesystem under ``top`` is mounted read-only (statvfs says so, mkdir and unlink fail)."""
    real_statvfs, real_makedirs, real_unlink = os.statvfs, os.makedirs, os.unlink
    top = str(top)

    class ReadOnly(object):
        def __init__(self, res):
            self.f_flag = res.f_flag | os.ST_RDONLY

    def statvfs(path):
        res = real_statvfs(path)
        return ReadOnly(res) if str(path).startswith(top) else res

    def makedirs(path, *a, **kw):
        if str(path).startswith(top):
            raise OSError(errno.EROFS, 'Read-only file system', str(path))
        return real_makedirs(path, *a, **kw)

    def unlink(path, *a, **kw):
        if str(path).startswith(top):
            raise OSError(errno.EROFS, 'Read-only file system', str(path))
        return real_unlink(path, *a, **kw)

    monkeypatch.setattr(os, 'statvfs', statvfs)
    monkeypatch.setattr(os, 'makedirs', makedirs)
    monkeypatch.setattr(os, 'unlink', unlink)


# --- the shared validators, over arbitrary input -------------------------------------------------------------------
VALUES = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=20),
                   st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(max_size=12), VALUES, max_size=5))
def test_environment_gives_strings_under_valid_names_or_the_collections_error(env):
    try:
        out = _validate.environment(env, 'env')
    except KvpoolError as exc:
        assert str(exc).startswith('env')
        return
    assert all(_validate.ENV_NAME.match(k) and isinstance(v, str) and '\0' not in v for k, v in out.items())
    assert sorted(out) == sorted(str(k) for k in env) and 'None' not in [out[str(k)] for k in env if env[k] is None]


@settings(max_examples=200, deadline=None)
@given(VALUES, st.integers(-5, 5), st.one_of(st.none(), st.integers(5, 10)))
def test_range_checks_give_the_value_or_the_collections_error_naming_the_option(value, low, high):
    for check in (lambda: _validate.int_range(value, 'opt', low, high),
                  lambda: _validate.number_range(value, 'opt', low=low, high=high)):
        try:
            assert check() is value
        except KvpoolError as exc:
            assert str(exc).startswith('opt=')


# --- vllm_server arguments ---------------------------------------------------------------------------------------
@pytest.mark.parametrize('args, expected', [
    ({'visible_devices': [16]}, 'visible_devices=[16]: NPU ids are whole numbers 0-15, got 16'),
    ({'visible_devices': [0, -1]}, 'NPU ids are whole numbers 0-15, got -1'),
    ({'visible_devices': []}, 'an empty list hides every NPU from it'),
    ({'visible_devices': [2, 3, 2]}, 'visible_devices=[2, 3, 2] lists NPU 2 more than once'),
    ({'tensor_parallel_size': -2}, 'tensor_parallel_size=-2 must be at least 1'),
    ({'tensor_parallel_size': 0}, 'tensor_parallel_size=0 must be at least 1'),
    ({'serve_flags': {'max_model_len': 0}}, 'serve_flags.max_model_len=0 must be at least 1'),
    ({'serve_flags': {'max_model_len': -25600}}, 'serve_flags.max_model_len=-25600 must be at least 1'),
    ({'serve_flags': {'max_num_batched_tokens': 0}}, 'serve_flags.max_num_batched_tokens=0 must be at least 1'),
    ({'serve_flags': {'gpu_memory_utilization': 0}},
     'serve_flags.gpu_memory_utilization=0.0 must be a finite number above 0 and at most 1'),
    ({'ready_timeout': 'nan'}, 'ready_timeout=nan must be a finite number above 0 (seconds)'),
    ({'poll_interval': 0}, 'poll_interval=0.0 must be a finite number above 0'),
    ({'stop_timeout': -1}, 'stop_timeout=-1.0 must be a finite number above 0'),
    ({'port': 0}, 'port=0 is out of range 1-65535 (a TCP port)'),
    ({'env': {'A=B': '1'}}, "env: not valid environment variable names: 'A=B'"),
    ({'env': {'': '1'}}, "env: not valid environment variable names: ''"),
    ({'env': {'X': {'nested': 1}}}, 'env.X is a dict, not a value: give a string'),
    ({'path_prepend': {'LD-PATH': ['/x']}}, "path_prepend: not valid environment variable names: 'LD-PATH'"),
])
def test_vllm_server_arguments_out_of_range_fail_naming_the_option_and_value(mgr, capsys, args, expected):
    res = vllm(capsys, **args)
    assert res['failed'] and expected in res['msg'], res['msg']
    assert 'Traceback' not in res['msg'] and mgr.calls == [] and mgr.text is None


def test_an_environment_value_of_null_is_empty_never_none(mgr, capsys):
    res = vllm(capsys, env={'EMPTY': None, 'PYTHONHASHSEED': 0})
    assert res['changed'], res.get('msg')
    assert res['env']['EMPTY'] == '' and res['env']['PYTHONHASHSEED'] == '0'
    assert 'Environment="EMPTY="' in mgr.text and 'None' not in mgr.text


def test_the_visible_devices_of_an_a3_node_are_accepted(mgr, capsys):
    res = vllm(capsys, visible_devices=[12, 13, 14, 15], tensor_parallel_size=4)
    assert res['changed'] and res['env']['ASCEND_RT_VISIBLE_DEVICES'] == '12,13,14,15', res.get('msg')


# --- mooncake_master arguments -----------------------------------------------------------------------------------
@pytest.mark.parametrize('args, expected', [
    ({'env': {'LD_LIBRARY_PATH': None}}, None),
    ({'env': {'A=B': '1'}}, "env: not valid environment variable names: 'A=B'"),
    ({'env': {'': 'x'}}, "env: not valid environment variable names: ''"),
    ({'eviction_ratio': 'nan'}, 'eviction_ratio=nan must be a finite number at least 0 and at most 1'),
    ({'max_threads': 0}, 'max_threads=0 must be at least 1'),
    ({'ready_timeout': 0}, 'ready_timeout=0.0 must be a finite number above 0 (seconds)'),
    ({'stop_timeout': 'inf'}, 'stop_timeout=inf must be a finite number above 0'),
    ({'restart_limit_interval': 0}, 'restart_limit_interval=0 must be at least 1 (seconds)'),
    ({'metrics_port': 70000}, 'metrics_port=70000 is out of range 1-65535 (a TCP port)'),
])
def test_mooncake_master_arguments(mgr, capsys, args, expected):
    res = master(mgr, capsys, check=True, diff=True, **args)
    if expected is None:  # a null value is the empty string in the unit, never "None"
        assert res['changed'] and 'Environment="LD_LIBRARY_PATH="' in res['diff']['after'], res.get('msg')
        assert 'None' not in res['diff']['after']
        return
    assert res['failed'] and expected in res['msg'], res['msg']
    assert mgr.calls == [] and mgr.text is None


# --- the engine's own directories (unit files, secrets) ------------------------------------------------------------
SHOW_LOADED = 'LoadState=loaded\nActiveState=inactive\nSubState=dead\nMainPID=0\nNRestarts=0\nUnitFileState=enabled\n'


class Systemctl(engine_tests.Recorder):
    """systemctl recorded, answering ``show`` with ``show`` (the unit unknown by default)."""

    def __init__(self, show=engine_tests.SHOW_MISSING):
        super(Systemctl, self).__init__()
        self.show = show

    def run_command(self, argv, environ_update=None, expand_user_and_vars=True):
        engine_tests.Recorder.run_command(self, argv, environ_update, expand_user_and_vars)
        return (0, self.show, '') if engine_tests.unbounded(argv)[0][1] == 'show' else (0, '', '')


def engine_start(secret=True, state='started', show=engine_tests.SHOW_MISSING):
    """The state machine's ensure (service_fakes') on the real systemd backend over a recorded systemctl; the unit and
    secrets directories are the test's."""
    systemctl = Systemctl(show)
    res = engine_tests.ensure(_service.SystemdBackend(systemctl), state=state,
                              secret_env={'VLLM_API_KEY': 'sk-dir-test'} if secret else None)
    return res, systemctl.calls


@pytest.mark.parametrize('case', ['a file', 'below a file', 'read-only', 'a link to /etc'])
def test_a_secrets_directory_that_cannot_hold_the_key_fails_naming_it(monkeypatch, capsys, tmp_path, case):
    monkeypatch.setattr(_service, 'UNIT_DIR', str(tmp_path / 'units'))
    secrets = tmp_path / 'secrets'
    if case == 'a file':
        secrets.write_text('')
        expected = ['is a file', 'not a directory']
    elif case == 'below a file':
        (tmp_path / 'afile').write_text('')
        secrets = tmp_path / 'afile' / 'secrets'
        expected = ['is below %s' % (tmp_path / 'afile'), 'which is a file']
    elif case == 'read-only':
        simulate_read_only(monkeypatch, secrets)
        expected = ['cannot be created', 'read-only filesystem']
    else:
        os.symlink('/etc', str(secrets))
        expected = ['symlink to /etc', 'a system directory']
    monkeypatch.setattr(_service, 'SECRET_DIR', str(secrets))
    res, calls = engine_start()
    assert res['failed']
    assert_names(res['msg'], 'could not start', 'vllm instance a', 'kvpool-vllm-a.service',
                 'secrets directory %s' % secrets, *expected)
    assert not any(c.startswith('start') for c in calls) and 'sk-dir-test' not in json.dumps(res)
    assert not os.path.exists('/etc/kvpool-vllm-a.env')


@pytest.mark.parametrize('case', ['a file', 'read-only'])
def test_a_unit_directory_that_cannot_be_written_fails_naming_it(monkeypatch, capsys, tmp_path, case):
    units = tmp_path / 'units'
    if case == 'a file':
        units.write_text('')
        expected = 'the directory of the unit\'s enable link %s/multi-user.target.wants is below %s, which is a file' \
            % (units, units)
    else:
        units.mkdir()
        simulate_read_only(monkeypatch, units)
        expected = 'the directory of the unit\'s enable link %s/multi-user.target.wants cannot be created: it is on ' \
            'a read-only filesystem' % units
    monkeypatch.setattr(_service, 'UNIT_DIR', str(units))
    monkeypatch.setattr(_service, 'SECRET_DIR', str(tmp_path / 'secrets'))
    res, calls = engine_start(secret=False)
    assert res['failed'] and expected in res['msg'], res['msg']
    assert not any(c.startswith('start') for c in calls)


def test_a_link_planted_at_the_temporary_name_is_never_written_through(monkeypatch, tmp_path):
    monkeypatch.setattr(_service, 'SECRET_DIR', str(tmp_path / 'secrets'))
    target = tmp_path / 'victim'
    target.write_text('keep me')
    (tmp_path / 'secrets').mkdir()
    path = tmp_path / 'secrets' / 'kvpool-vllm-a.env'
    os.symlink(str(target), '%s.tmp.%d' % (path, os.getpid()))
    _service.write_file(str(path), 'VLLM_API_KEY=k\n', 0o600, 'secret environment file', option='the secrets directory')
    assert target.read_text() == 'keep me' and path.read_text() == 'VLLM_API_KEY=k\n'
    assert oct(path.stat().st_mode & 0o777) == '0o600' and sorted(os.listdir(str(tmp_path / 'secrets'))) == [
        'kvpool-vllm-a.env']


def test_a_unit_file_that_cannot_be_removed_is_no_success(monkeypatch, tmp_path):
    units = tmp_path / 'units'
    units.mkdir()
    (units / 'kvpool-vllm-a.service').write_text(_service.render_unit(engine_tests.spec()))  # the collection's
    simulate_read_only(monkeypatch, units)
    unit = units / 'kvpool-vllm-a.service'
    with pytest.raises(_service.ServiceError) as err:
        _service.remove_file(str(unit))
    assert_names(str(err.value), 'cannot remove %s' % unit, 'read-only filesystem')
    assert _service.remove_file(str(tmp_path / 'missing')) is False
    # Through the module's stop: a failure naming the file, not "stopped" with the unit left enabled for the boot.
    monkeypatch.setattr(_service, 'UNIT_DIR', str(units))
    monkeypatch.setattr(_service, 'SECRET_DIR', str(tmp_path / 'secrets'))
    res, calls = engine_start(secret=False, state='stopped', show=SHOW_LOADED)
    assert res['failed']
    assert_names(res['msg'], 'could not stop', 'vllm instance a', 'cannot remove %s/' % units,
                 'kvpool-vllm-a.service', 'read-only filesystem')
    assert unit.exists()


# --- mooncake_store_probe -----------------------------------------------------------------------------------------
@pytest.fixture
def probe_backend(monkeypatch):
    started = []

    class Nothing(object):
        kind = 'none'

        def check(self):
            pass

        def run_transient(self, name, argv, max_seconds, mounts=()):
            started.append(name)
            raise AssertionError('no client may start on bad input')

        def transient_alive(self, name):
            return False

        def stop_transient(self, name):
            pass

        def logs_hint(self, spec):
            return ''

    monkeypatch.setattr(mooncake_store_probe, 'backend_for', lambda module, container=None: Nothing())
    return started


def probe(capsys, tmp_path, **args):
    config = tmp_path / 'mooncake.json'
    if not config.exists():
        config.write_text(json.dumps({'master_server_address': '127.0.0.1:%d' % free_port(), 'protocol': 'tcp'}))
    params = dict(mode='put', key='probe-1', local_hostname='10.0.0.1', node_name='node1', config_path=str(config),
                  python=sys.executable, state_dir=str(tmp_path / 'state'), timeout=5, master_connect_timeout=0.5)
    params.update(args)
    return svc.run(mooncake_store_probe, capsys, **params)


@pytest.mark.parametrize('size, expected', [
    ('1e12', 'size_bytes=1000000000000 is out of range 1-1073741824'),
    (1e12, 'size_bytes=1000000000000 is out of range 1-1073741824'),
    (2 ** 30 + 1, 'size_bytes=1073741825 is out of range 1-1073741824'),
    (0, 'size_bytes=0 is out of range 1-1073741824'),
    (-1, 'size_bytes=-1 is out of range 1-1073741824'),
    (True, 'size_bytes=True is not a whole number'),
    ('1.5', "argument 'size_bytes' is of type str and we were unable to convert to int"),
    (1.5, "argument 'size_bytes' is of type float and we were unable to convert to int"),
    ('1MiB', "argument 'size_bytes' is of type str and we were unable to convert to int"),
])
def test_probe_size_bytes_out_of_range_or_not_a_whole_number_fails_naming_it(capsys, tmp_path, probe_backend, size,
                                                                             expected):
    res = probe(capsys, tmp_path, size_bytes=size)
    assert res['failed'] and expected in res['msg'], res['msg']
    if 'out of range' in expected:
        assert_names(res['msg'], 'at most 1 GiB', 'a put and a get')
    assert probe_backend == [] and not (tmp_path / 'state').exists()


@pytest.mark.parametrize('args, expected', [
    ({'expected_sha256': 'abc', 'mode': 'get'}, "expected_sha256='abc' is not a sha256 (64 hex digits)"),
    ({'key': ''}, 'key is empty'),
    ({'timeout': 0}, 'timeout=0.0 must be a finite number above 0 (seconds)'),
    ({'hold_seconds': 'inf'}, 'hold_seconds=inf must be a finite number above 0'),
    ({'poll_interval': -1}, 'poll_interval=-1.0 must be a finite number above 0'),
])
def test_probe_arguments(capsys, tmp_path, probe_backend, args, expected):
    res = probe(capsys, tmp_path, **args)
    assert res['failed'] and expected in res['msg'], res['msg']
    assert probe_backend == []


@pytest.mark.parametrize('case', ['a file', 'below a file', 'read-only', 'a link to /etc', 'relative'])
@pytest.mark.parametrize('mode', ['put', 'remove'])
def test_a_probe_state_dir_that_cannot_be_its_own_fails_naming_it(capsys, tmp_path, probe_backend, monkeypatch, case,
                                                                  mode):
    state = tmp_path / 'state'
    if case == 'a file':
        state.write_text('')
        expected = 'state_dir=%s is a file, not a directory' % state
    elif case == 'below a file':
        (tmp_path / 'afile').write_text('')
        state = tmp_path / 'afile' / 'state'
        expected = 'state_dir=%s is below %s, which is a file' % (state, tmp_path / 'afile')
    elif case == 'read-only':
        state.mkdir()
        simulate_read_only(monkeypatch, state)
        expected = 'state_dir=%s cannot be written: it is on a read-only filesystem' % state
    elif case == 'a link to /etc':
        os.symlink('/etc', str(state))
        expected = 'state_dir=%s leads through a symlink to /etc, a system directory' % state
    else:
        state = 'probe-results'
        expected = 'state_dir=probe-results is not an absolute path'
    res = probe(capsys, tmp_path, state_dir=str(state), mode=mode)
    assert res['failed'] and expected in res['msg'], res['msg']
    assert probe_backend == [] and not os.path.exists('/etc/%s.result' % mooncake_store_probe.safe_name('probe-1'))


def test_a_probe_state_dir_that_cannot_be_created_fails_naming_it(capsys, tmp_path, probe_backend, monkeypatch):
    simulate_read_only(monkeypatch, tmp_path / 'ro')
    state = tmp_path / 'ro' / 'state'
    res = probe(capsys, tmp_path, state_dir=str(state))
    assert res['failed']
    assert_names(res['msg'], 'state_dir=%s' % state, 'cannot be created', 'read-only filesystem')


def test_a_probe_config_that_is_a_fifo_fails_without_hanging(capsys, tmp_path, probe_backend):
    fifo = tmp_path / 'mooncake.fifo'
    os.mkfifo(str(fifo))
    res = probe(capsys, tmp_path, config_path=str(fifo))
    assert res['failed']
    assert_names(res['msg'], 'node1', 'config_path: %s' % fifo, 'not a regular file')
    assert probe_backend == []
