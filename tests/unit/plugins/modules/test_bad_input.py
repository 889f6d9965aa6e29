# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Bad input, as an operator with a typo or a broken node gives it: each case ends in a clear failure that names
the option or file and the fix, or in a finding, never in a traceback, a wrong success, or a file touched outside
the module's own directories (docs/bad-input.md lists them). Runs on localhost; nothing listens at the URLs."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import socket

import pytest
from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.testing import patch_module_args

from ansible_collections.ascend.kvpool.plugins.module_utils import _errors, _validate, _vllm
from ansible_collections.ascend.kvpool.plugins.module_utils._errors import KvpoolError
from ansible_collections.ascend.kvpool.plugins.modules import kvpool_benchmark, vllm_server
from ansible_collections.ascend.kvpool.tests.unit.messages import assert_names


def closed_url():
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        return 'http://127.0.0.1:%d' % sock.getsockname()[1]


def run_module(capsys, main, params):
    with patch_module_args(params):
        with pytest.raises(SystemExit):
            main()
    return json.loads(capsys.readouterr().out)


# SIMULATED ais_bench: starts (--help answers), then fails every run without results.
FAKE_AIS_BENCH = ('#!/bin/sh\n[ "$1" = --help ] && { echo "usage: ais_bench"; exit 0; }\n'
                  'echo "ais_bench (stand-in): no results" >&2\nexit 3\n')


def aisbench(capsys, tmp_path, name, **extra):
    fake = tmp_path / 'ais_bench'
    fake.write_text(FAKE_AIS_BENCH)
    fake.chmod(0o755)
    params = dict(name=name, url=closed_url(), dataset_seed=1, model='qwen', tokenize='words', tool='aisbench',
                  aisbench_command=str(fake), aisbench_work_dir=str(tmp_path / 'work'), num_requests=2,
                  input_tokens=16, aisbench_model_path=str(tmp_path))
    params.update(extra)
    return run_module(capsys, kvpool_benchmark.main, params)


# --- names used as paths ------------------------------------------------------------------------------------------
@pytest.mark.parametrize('name', ['../victim', '..', '.', '', '/abs', 'a/b', '-x', 'x' * 65, 'sp ace'])
def test_a_step_name_that_is_not_one_directory_name_is_refused_and_nothing_is_removed(capsys, tmp_path, name):
    victim = tmp_path / 'victim'
    victim.mkdir()
    (victim / 'data').write_text('keep me')
    (tmp_path / 'work').mkdir()
    res = aisbench(capsys, tmp_path, name)
    assert res['failed']
    assert_names(res['msg'], 'name=%r' % name, 'cannot be used', 'directory name')
    assert (victim / 'data').read_text() == 'keep me'
    assert os.listdir(str(tmp_path / 'work')) == []


def test_a_step_directory_the_module_did_not_make_is_never_removed(capsys, tmp_path):
    mine = tmp_path / 'work' / 'step1'
    mine.mkdir(parents=True)
    (mine / 'results.txt').write_text('an operator\'s file')
    res = aisbench(capsys, tmp_path, 'step1')
    assert res['failed']
    assert_names(res['msg'], 'not made by', 'kvpool_benchmark', str(mine))
    assert (mine / 'results.txt').read_text() == 'an operator\'s file'


def test_a_step_directory_of_an_earlier_run_is_replaced(capsys, tmp_path):
    first = aisbench(capsys, tmp_path, 'step1')
    assert 'ais_bench' in first['msg'] and 'rc 3' in first['msg']
    stale = tmp_path / 'work' / 'step1' / 'stale'
    stale.write_text('x')
    second = aisbench(capsys, tmp_path, 'step1')
    assert 'rc 3' in second['msg'] and not stale.exists()


def test_a_step_path_that_is_a_link_is_refused(capsys, tmp_path):
    target = tmp_path / 'elsewhere'
    target.mkdir()
    (target / kvpool_benchmark.STEP_MARKER).write_text('forged')
    (tmp_path / 'work').mkdir()
    os.symlink(str(target), str(tmp_path / 'work' / 'step1'))
    res = aisbench(capsys, tmp_path, 'step1')
    assert res['failed']
    assert_names(res['msg'], 'not a directory', 'this module made')
    assert (target / kvpool_benchmark.STEP_MARKER).exists()


# --- URLs ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize('url', ['file:///etc/passwd', '', 'ftp://h/metrics', 'http://', 'http://h:99999/'])
@pytest.mark.parametrize('check', [False, True])
def test_a_metrics_url_that_is_not_http_fails_before_any_traffic_naming_the_entry(capsys, url, check):
    params = dict(name='step1', url=closed_url(), dataset_seed=1, metrics_urls={'instance1': url})
    if check:
        params['_ansible_check_mode'] = True
    res = run_module(capsys, kvpool_benchmark.main, params)
    assert res['failed'] and 'metrics_urls.instance1=' in res['msg'] and 'http://HOST:PORT' in res['msg']
    assert 'Traceback' not in json.dumps(res)


def test_a_failed_scrape_is_reported_not_raised():
    text, error = kvpool_benchmark._loadgen.get_text('http://127.0.0.1:99999/metrics')
    assert text is None and '99999' in error


@pytest.mark.parametrize('option, value', [('request_timeout', 0), ('request_timeout', -1), ('temperature', -0.5)])
def test_numbers_out_of_range_are_refused(capsys, option, value):
    res = run_module(capsys, kvpool_benchmark.main, {'url': closed_url(), 'dataset_seed': 1, option: value})
    assert res['failed'] and res['msg'].startswith(option)


# --- secrets ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize('arg', ['--api-key', '--api_key', '--api-ke', '--api-k', '--api', '--api-key=K', '--api_k=K',
                                 '--a'])
def test_every_spelling_vllm_reads_as_the_api_key_is_caught(arg):
    args = [arg] if '=' in arg else [arg, 'K']
    assert _vllm.is_api_key_flag(arg)
    assert _vllm.forbidden_key_settings({}, args)
    assert _vllm.api_key_values(args) == ['K']
    kept, dropped = _vllm.drop_api_key_args(['--port', '1'] + args + ['--x'])
    assert dropped and kept == ['--port', '1', '--x']


@pytest.mark.parametrize('arg', ['--api-server-count', '--port', 'api-key', '-api-key', '--apikey', '--b'])
def test_other_arguments_are_not_taken_for_the_key(arg):
    assert not _vllm.is_api_key_flag(arg)


def test_vllm_server_refuses_an_abbreviated_key_flag_without_showing_the_key(capsys, tmp_path):
    res = run_module(capsys, vllm_server.main, {'name': 'i1', 'model': '/m', 'port': 8002,
                                                'extra_args': ['--api_ke', 'sk-secret']})
    assert res['failed'] and '--api_ke' in res['msg'] and 'sk-secret' not in json.dumps(res)


# --- the guard ----------------------------------------------------------------------------------------------------
def test_an_unexpected_exception_names_the_module_and_its_input_and_masks_secrets(capsys):
    def explode(mod):
        raise RuntimeError('boom %s' % mod.params['path'])

    with patch_module_args({'path': '/x', 'token': 'sk-hidden', '_ansible_module_name': 'demo'}):
        module = AnsibleModule(argument_spec={'path': {'type': 'str'}, 'token': {'type': 'str', 'no_log': True}})
        failed, res = _errors.outcome(module, explode, module)
        with pytest.raises(SystemExit):
            module.fail_json(**res)  # as main() does: masks the no_log values
    res = json.loads(capsys.readouterr().out)
    assert failed and res['failed'] and 'sk-hidden' not in json.dumps(res)
    assert_names(res['msg'], 'ascend.kvpool.demo', 'failed unexpectedly', 'RuntimeError: boom /x', "path='/x'")


def test_the_collections_own_error_is_a_plain_failure():
    def body():
        raise KvpoolError('option x: wrong, use y')

    with patch_module_args({}):
        module = AnsibleModule(argument_spec={})
        failed, res = _errors.outcome(module, body)
    assert failed and res['msg'] == 'option x: wrong, use y' and 'exception' not in res


def test_the_collections_own_error_keeps_the_result_fields_it_carries():
    def body():
        raise KvpoolError('unit u: failed start', result=dict(unit='u.service', logs='journalctl -u u'))

    with patch_module_args({}):
        module = AnsibleModule(argument_spec={})
        assert _errors.outcome(module, body) == (True, dict(msg='unit u: failed start', unit='u.service',
                                                            logs='journalctl -u u'))
        assert _errors.outcome(module, lambda: dict(changed=False)) == (False, dict(changed=False))


@pytest.mark.parametrize('value', ['ok', 'a.b_c-1', '1'])
def test_path_components_that_are_fine(value):
    assert _validate.path_component(value, 'name') == value


GUARD_PARAMS = {
    'hccn_ping': {'targets': [{'device': 0, 'address': '10.0.0.1'}]},
    'vllm_server': {'name': 'i1', 'model': '/m', 'port': 8002, 'api_key': 'sk-guarded'},
    'mooncake_store_probe': {'mode': 'put', 'key': 'k1', 'local_hostname': '10.0.0.1'},
    'mooncake_config_file': {'path': '/etc/ascend-kvpool/mooncake.json', 'config': {'protocol': 'tcp'}},
}


@pytest.mark.parametrize('name', ['hccn_facts', 'hccn_ping', 'npu_smi_facts', 'preflight_facts', 'vllm_server',
                                  'mooncake_master', 'mooncake_store_probe', 'mooncake_config_file'])
def test_every_module_runs_under_the_guard(capsys, monkeypatch, name):
    import importlib
    mod = importlib.import_module('ansible_collections.ascend.kvpool.plugins.modules.%s' % name)

    def explode(module):
        raise ZeroDivisionError('simulated bug')

    monkeypatch.setattr(mod, '_run', explode)
    params = GUARD_PARAMS.get(name, {})
    res = run_module(capsys, mod.main, dict(params, _ansible_module_name=name))
    assert res['failed']
    assert_names(res['msg'], 'ascend.kvpool.%s' % name, 'failed unexpectedly', 'ZeroDivisionError')
    assert 'Traceback' not in res['msg'] and 'sk-guarded' not in json.dumps(res)
    for key, value in sorted(params.items()):  # the input is named (a no_log value masked)
        if key != 'api_key' and not isinstance(value, list):
            assert '%s=%r' % (key, value) in res['msg'], (key, res['msg'])


def _report_play(tmp_path, status):
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[4]
    (tmp_path / 'play.yml').write_text('''---
- name: Report
  hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: Set the status
      ansible.builtin.set_fact:
        some_status: %s
      when: %s
    - name: Report
      ascend.kvpool.vllm_instance_report:
        status_var: some_status
      register: written
      ignore_errors: true
    - name: Show
      ansible.builtin.debug:
        msg: "RESULT {{ written | to_json }}"
''' % (json.dumps(status), 'true' if status is not None else 'false'))
    argv = [str(Path(sys.executable).parent / 'ansible-playbook'), str(tmp_path / 'play.yml'), '-i', 'localhost,']
    env = dict(os.environ, ANSIBLE_CONFIG=str(repo / 'ansible.cfg'), ANSIBLE_NOCOLOR='1',
               ANSIBLE_STDOUT_CALLBACK='json')
    out = subprocess.run(argv, cwd=str(repo), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         universal_newlines=True, timeout=120, check=False).stdout
    play = json.loads(out[out.index('{'):])
    return play['plays'][0]['tasks'][1]['hosts']['localhost']


def test_a_status_that_is_not_a_list_is_named_and_no_status_is_no_success(tmp_path):
    res = _report_play(tmp_path, 12)
    assert res['failed']
    assert_names(res['msg'], 'some_status of localhost', 'not a list', 'instance statuses')
    res = _report_play(tmp_path, None)
    assert not res.get('failed') and res['ok'] is False
    assert_names(res['lines'][-1], 'no host of the play', 'some_status')
    res = _report_play(tmp_path, [])
    assert res['ok'] is True and res['instances'] == 0
