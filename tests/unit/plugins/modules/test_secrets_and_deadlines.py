# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Bad input, round two (issue 32), classes "Secrets" and "Hangs", per module, on localhost: the peers are fake
servers on loopback (one byte every 0.4 s, a redirect), the tools stubs, the FIFOs real ones in a temporary
directory. Each test holds a module to: no secret in its result or message, no wait past the option's bound, a
path that is not a regular file refused with a message before it is opened."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import subprocess
import sys
import time

import pytest
from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args

from ansible_collections.ascend.kvpool.plugins.module_utils import _aisbench, _preflight, _service
from ansible_collections.ascend.kvpool.plugins.module_utils._errors import ParseError
from ansible_collections.ascend.kvpool.plugins.module_utils._secrets import MASK, split_env
from ansible_collections.ascend.kvpool.plugins.modules import (
    etcd_member,
    kvpool_benchmark,
    mooncake_config_file,
    mooncake_master,
    preflight_facts,
    vllm_router,
    vllm_router_check,
    vllm_server,
)
from ansible_collections.ascend.kvpool.tests.unit.messages import assert_names
from ansible_collections.ascend.kvpool.tests.unit.plugins.module_utils import service_fakes as engine
from ansible_collections.ascend.kvpool.tests.unit.plugins.modules import service_harness as svc
from ansible_collections.ascend.kvpool.tests.unit.plugins.modules.process_helpers import free_port
from ansible_collections.ascend.kvpool.tests.unit.plugins.slow_peers import DripServer, Recorder, Redirect

KEY = 'K-SECRET-4f9a2c'


def run(module, capsys, **params):
    """The module's main() with ``params``; returns (result, the whole text it printed)."""
    with patch_module_args(params):
        with pytest.raises(SystemExit):
            module.main()
    out = capsys.readouterr().out
    return json.loads(out), out


@pytest.fixture
def drip():
    srv = DripServer(gap=0.4)
    yield srv
    srv.close()


@pytest.fixture
def fifo(tmp_path):
    path = tmp_path / 'pipe'
    os.mkfifo(str(path))
    return str(path)


# --- preflight_facts ----------------------------------------------------------------------------------------------
LISTENER = ('import os, socket, sys, time\n'
            's = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(1)\n'
            'print(s.getsockname()[1], os.getpid(), flush=True); time.sleep(60)\n')


def test_preflight_masks_the_command_lines_of_a_port_owner_and_its_parent(monkeypatch, capsys):
    """A process that holds a port with --api-key K on its command line, under a shell whose command (one word)
    holds --api-key K and whose arguments hold --token K: the result carries both command lines with the key
    masked, and the key nowhere."""
    script = '"$0" -c "$1" --api-key %s; true' % KEY
    parent = subprocess.Popen(['/bin/sh', '-c', script, sys.executable, LISTENER, '--token', KEY],
                              stdout=subprocess.PIPE)
    child = None
    try:
        port, child = [int(x) for x in parent.stdout.readline().split()]
        monkeypatch.setattr(basic.AnsibleModule, 'get_bin_path', lambda self, name, *a, **kw: None)
        res, out = run(preflight_facts, capsys, ports=[port])
        holder = res['ports'][str(port)]
        assert holder['listening'] and holder['pid'] == child
        assert holder['cmdline'][-2:] == ['--api-key', MASK], holder['cmdline']
        assert holder['ancestors'][0][-2:] == ['--token', MASK], holder['ancestors']
        assert '--api-key %s' % MASK in holder['ancestors'][0][2]
        assert KEY not in out
    finally:
        if child:
            os.kill(child, 9)
        parent.kill()
        parent.wait()
        parent.stdout.close()


def test_preflight_refuses_a_fifo_as_a_version_record_without_opening_it(fifo, monkeypatch, capsys):
    """A FIFO as a toolkit info path, or as /etc/ascend_install.info: named in the record's error at once (a
    blocking open() of a FIFO with no writer never returns)."""
    monkeypatch.setattr(_preflight, 'ASCEND_INSTALL_INFO', fifo)
    started = time.monotonic()
    res, dummy = run(preflight_facts, capsys, ascend_versions=True, toolkit_info_paths=[fifo])
    assert time.monotonic() - started < 10
    assert res['ascend']['toolkit']['path'] == fifo and res['ascend']['toolkit']['version'] is None
    for record in ('toolkit', 'install_info'):
        assert_names(res['ascend'][record]['error'], fifo, 'not a regular file', 'nothing can hang')


def test_preflight_cuts_an_http_answer_at_connect_timeout(drip, capsys):
    """A server that answers one byte every 0.4 s: no answer after connect_timeout (the whole request)."""
    started = time.monotonic()
    res, dummy = run(preflight_facts, capsys, http=[drip.url + '/health'], connect_timeout=1.0)
    assert time.monotonic() - started < 2.5
    assert res['http'][drip.url + '/health'] == {'status': None, 'body': ''}


def test_preflight_gives_every_command_its_command_timeout(monkeypatch, capsys):
    seen = []

    def execute(argv, timeout=None, env=None):
        seen.append((argv[1:3], timeout))
        return 1, '', 'no such image'
    monkeypatch.setattr(preflight_facts, 'execute', execute)
    monkeypatch.setattr(basic.AnsibleModule, 'get_bin_path', lambda self, name, *a, **kw: '/usr/bin/' + name)
    res, dummy = run(preflight_facts, capsys, images=['img:1'], glibc=True, command_timeout=7)
    assert not res.get('failed'), res
    assert sorted(seen) == sorted([(['--version'], 7), (['image', 'inspect'], 7)])


@pytest.mark.parametrize('option', ['connect_timeout', 'command_timeout'])
@pytest.mark.parametrize('value', [0, -1])
def test_preflight_refuses_a_deadline_that_is_no_deadline(option, value, capsys):
    res, dummy = run(preflight_facts, capsys, **{option: value})
    assert res['failed']
    assert_names(res['msg'], option, 'above 0')


# --- secret-named variables of a service's env ------------------------------------------------------------------
SECRET_ENV = {'HF_TOKEN': 'hf-' + KEY, 'MY_API_KEY': 'ak-' + KEY, 'DB_PASSWORD': 'pw-' + KEY, 'PYTHONHASHSEED': '0',
              'EMPTY_TOKEN': ''}


def test_a_secret_named_variable_is_split_from_the_others():
    plain, secret = split_env(SECRET_ENV)
    assert sorted(secret) == ['DB_PASSWORD', 'HF_TOKEN', 'MY_API_KEY']
    assert plain == {'PYTHONHASHSEED': '0', 'EMPTY_TOKEN': ''}  # an empty value holds no secret


@pytest.mark.parametrize('module', ['vllm_server', 'vllm_router', 'mooncake_master'])
def test_a_secret_named_variable_of_env_is_in_no_result_diff_or_unit(module, svc_manager, capsys):
    """A service given HF_TOKEN, MY_API_KEY, DB_PASSWORD in env: their values go into the 0600 secret file (the
    EnvironmentFile=), never into the world-readable unit, the diff, the result's env (vllm_server) or the task's
    echoed input; in check mode the same. The other variables stay in the unit."""
    params = {'vllm_server': dict(name='qwen-a', model='/models/qwen', served_model_name='qwen', host='127.0.0.1',
                                  binary=sys.executable, port=free_port(), wait=False),
              'vllm_router': router_params(svc_manager),
              'mooncake_master': dict(binary=str(svc_manager.tmp / 'vllm-router'), port=free_port(),
                                      metrics_port=free_port())}[module]
    params.update(env=dict(SECRET_ENV), ready_timeout=1, poll_interval=0.02, stop_timeout=5, _ansible_diff=True)
    mod = {'vllm_server': vllm_server, 'vllm_router': vllm_router, 'mooncake_master': mooncake_master}[module]
    for check in (True, False):
        res, out = run(mod, capsys, _ansible_check_mode=check, **params)
        assert KEY not in out, out
        if module == 'vllm_server':
            assert res['env']['HF_TOKEN'] == MASK and res['env']['PYTHONHASHSEED'] == '0'
        assert 'HF_TOKEN=<secret' in json.dumps(res.get('diff')), res.get('diff')
    assert svc_manager.text is not None and KEY not in svc_manager.text
    assert 'Environment="PYTHONHASHSEED=0"' in svc_manager.text or 'PYTHONHASHSEED=0' in svc_manager.text
    assert 'EnvironmentFile=' in svc_manager.text
    assert 'HF_TOKEN=hf-%s' % KEY in svc_manager.secret and 'DB_PASSWORD=pw-%s' % KEY in svc_manager.secret


@pytest.mark.parametrize('module', ['vllm_server', 'mooncake_master'])
def test_the_value_of_a_secret_named_flag_of_extra_args_is_in_no_result(module, svc_manager, capsys):
    """extra_args with --hf-token T (a flag whose name says secret): T is masked in the result's argv, the diff and
    the echoed input; a count of tokens and a tokenizer path are no secrets and stay readable."""
    params = {'vllm_server': dict(name='qwen-a', model='/models/qwen', served_model_name='qwen', host='127.0.0.1',
                                  binary=sys.executable, port=free_port(), wait=False),
              'mooncake_master': dict(binary=str(svc_manager.tmp / 'vllm-router'), port=free_port(),
                                      metrics_port=free_port())}[module]
    params.update(extra_args=['--hf-token', 'hf-' + KEY, '--tokenizer=/models/tok-7b', '--max-num-batched-tokens',
                              '8193'], ready_timeout=1, poll_interval=0.02, stop_timeout=5, _ansible_diff=True)
    mod = {'vllm_server': vllm_server, 'mooncake_master': mooncake_master}[module]
    res, out = run(mod, capsys, _ansible_check_mode=True, **params)
    assert KEY not in out, out
    assert '/models/tok-7b' in out and '8193' in out


# --- vllm_router / vllm_router_check ------------------------------------------------------------------------------
@pytest.fixture
def manager(monkeypatch, tmp_path):
    return svc.manager_behind(monkeypatch, tmp_path, (vllm_router,), 'vllm-router')


@pytest.fixture
def svc_manager(monkeypatch, manager):
    """The in-memory service manager of ``manager`` behind vllm_server and mooncake_master too."""
    for mod in (vllm_server, mooncake_master):
        monkeypatch.setattr(mod, 'backend_for', lambda module, container=None: manager)
    return manager


def router_params(manager, **args):
    params = dict(binary=str(manager.tmp / 'vllm-router'), port=free_port(), prometheus_port=free_port(),
                  worker_urls=['http://127.0.0.1:%d' % free_port()], ready_timeout=1, poll_interval=0.02)
    params.update(args)
    return params


@pytest.mark.parametrize('extra', [['--api-key=' + KEY], ['--api-key', KEY], ['--api_k=' + KEY]])
def test_router_refuses_a_key_in_extra_args_without_echoing_it(manager, capsys, extra):
    res, out = run(vllm_router, capsys, **router_params(manager, extra_args=extra))
    assert res['failed']
    assert_names(res['msg'], 'extra_args', '--api-key', 'use the module option')
    assert KEY not in out
    assert manager.text is None


def test_router_journal_tail_of_a_failed_start_is_masked(manager, capsys, monkeypatch):
    monkeypatch.setattr(manager, 'logs', lambda spec, lines: 'error: unrecognized arguments: --api-key %s\n' % KEY)
    res, out = run(vllm_router, capsys, **router_params(manager))
    assert res['failed'] and MASK in res['msg']
    assert KEY not in out


def test_router_gate_is_not_held_by_a_router_that_answers_one_byte_at_a_time(manager, capsys):
    """Every poll of the gate is a whole request: a router that drips its answers fails the task within about
    ready_timeout, not after the answers' length times 0.4 s."""
    port = free_port()
    state = {}

    def start():
        state.setdefault('srv', DripServer(gap=0.4, port=port))
    manager.on_start = start
    try:
        started = time.monotonic()
        res, dummy = run(vllm_router, capsys, **router_params(manager, port=port, ready_timeout=1.5))
        assert time.monotonic() - started < 6
        assert res['failed']
    finally:
        if 'srv' in state:
            state['srv'].close()


def test_router_check_render_probe_is_cut_at_its_timeout(drip, capsys):
    started = time.monotonic()
    res, dummy = run(vllm_router_check, capsys, workers=[drip.url], render=True, timeout=1.0)
    assert time.monotonic() - started < 3.5
    assert res['render'] == {drip.url: None}


def test_router_check_does_not_follow_a_redirect_with_the_key(capsys):
    """A worker that answers render with a 302 to another port: the probe takes 302 as the answer; nothing is sent
    there, so the Authorization header (the API key) goes nowhere else."""
    target = Recorder()
    redirect = Redirect(target.url)
    try:
        res, out = run(vllm_router_check, capsys, workers=[redirect.url], render=True, api_key=KEY, timeout=2)
        assert res['render'] == {redirect.url: 302}
        assert target.seen == []
        assert KEY not in out
    finally:
        redirect.close()
        target.close()


# --- etcd_member --------------------------------------------------------------------------------------------------
ETCD = dict(name='node1', address='127.0.0.1', members=[{'name': 'node1', 'address': '127.0.0.1'}])


def test_etcd_refuses_client_auth_in_extra_args_without_echoing_its_value(capsys):
    res, out = run(etcd_member, capsys, extra_args=['--auth-token=simple-%s' % KEY], **ETCD)
    assert res['failed']
    assert_names(res['msg'], 'extra_args', '--auth-token', 'use the module option')
    assert KEY not in out


def test_etcdctl_that_hangs_is_killed_at_our_timeout(tmp_path, monkeypatch):
    """An etcdctl that never answers (a stub that sleeps): killed after ETCDCTL_TIMEOUT. With no member accepting a
    connection either, that is "no other member answers" (a member that accepts one is the no-quorum failure of
    test_failed_stops_and_silent_peers)."""
    stub = tmp_path / 'etcdctl'
    stub.write_text('#!/bin/sh\nsleep 60\n')
    stub.chmod(0o755)
    monkeypatch.setattr(etcd_member, 'ETCDCTL_TIMEOUT', 1.0)
    started = time.monotonic()
    endpoint = '127.0.0.1:%d' % free_port()
    assert etcd_member._member_list(None, {'etcdctl': str(stub), 'name': 'etcd1'},  # pylint: disable=W0212
                                    [endpoint]) is None
    assert time.monotonic() - started < 5
    rc, dummy, err = etcd_member._etcdctl(None, {'etcdctl': str(stub)}, ['127.0.0.1:2379'], 'endpoint', 'health',
                                          timeout=0.5)  # pylint: disable=protected-access
    assert rc == -9 and 'timed out' in err


def test_a_member_list_asked_while_the_members_elect_is_asked_again(tmp_path):
    """A first deploy: the other members started in parallel accept connections but answer the member list only once
    they have elected a leader (refused once on the mock cluster when asked at that moment). The list is asked again
    for QUORUM_GRACE s, and the answer then read (one member list recorded from etcd 3.4.23)."""
    import socket
    fixtures = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'module_utils', 'fixtures', 'etcd')
    counter = tmp_path / 'asked'
    stub = tmp_path / 'etcdctl'
    stub.write_text('#!/bin/sh\ncase "$*" in *"endpoint status"*) cat %s; exit 0;; esac\n'
                    'echo x >> %s\nif [ "$(wc -l < %s)" -lt 3 ]; then\n'
                    '  echo "Error: context deadline exceeded" >&2; exit 1\nfi\ncat %s\n'
                    % (os.path.join(fixtures, 'endpoint_status_3.json'), counter, counter,
                       os.path.join(fixtures, 'member_list_3.json')))
    stub.chmod(0o755)
    server = socket.socket()
    server.bind(('127.0.0.1', 0))
    server.listen(8)
    try:
        members = etcd_member._member_list(None, {'etcdctl': str(stub), 'name': 'n1'},  # pylint: disable=W0212
                                           ['127.0.0.1:%d' % server.getsockname()[1]])
    finally:
        server.close()
    assert sorted(m['name'] for m in members) == ['n1', 'n2', 'n3']
    assert len(counter.read_text().split()) == 3


# --- mooncake_config_file -----------------------------------------------------------------------------------------
def test_config_file_refuses_a_fifo_at_its_path_before_reading_it(fifo, capsys):
    started = time.monotonic()
    res, dummy = run(mooncake_config_file, capsys, path=fifo, config={'protocol': 'ascend'})
    assert time.monotonic() - started < 10
    assert res['failed']
    assert_names(res['msg'], fifo, 'not a regular file', 'remove it')
    assert os.path.exists(fifo) and not os.path.isfile(fifo)  # neither read nor replaced


def test_config_file_ha_lookup_is_cut_at_connect_timeout(drip, tmp_path, capsys):
    """etcd members that answer one byte every 0.4 s: the HA master lookup fails within a few connect_timeouts,
    naming the quorum it lacks; nothing is written."""
    other = DripServer(gap=0.4)
    try:
        started = time.monotonic()
        res, dummy = run(mooncake_config_file, capsys, path=str(tmp_path / 'mooncake.json'), config={'a': 1},
                         master='etcd://127.0.0.1:%d;127.0.0.1:%d' % (drip.port, other.port), connect_timeout=1.0)
        assert time.monotonic() - started < 4.5
        assert res['failed'] and 'mooncake.json was not written' in res['msg']
        assert not (tmp_path / 'mooncake.json').exists()
    finally:
        other.close()


# --- the service engine: systemctl, journalctl, docker (every service module) ---------------------------------------
HANG = r"""#!/bin/sh
# A stub of %(tool)s: answers show (and stop, unless told to hang there) at once; hangs on the verbs in %(dir)s/hang.
echo "$*" >> "%(dir)s/calls"
for verb in $(cat "%(dir)s/hang" 2>/dev/null); do
    case " $* " in *" $verb "*) exec sleep 30;; esac
done
case " $* " in *" show "*) printf '%%s' "$SHOW";; esac
exit 0
"""


@pytest.fixture
def hung(tmp_path, monkeypatch):
    """Stub systemctl / journalctl / docker that hang (sleep 30) on the verbs listed in ``hang`` (a file), the unit
    directories under tmp, and the engine's deadline lowered to 0.5 s (its COMMAND_TIMEOUT is 120 s)."""
    stubs = tmp_path / 'stubs'
    stubs.mkdir()
    for tool in ('systemctl', 'journalctl', 'docker'):
        (stubs / tool).write_text(HANG % dict(tool=tool, dir=stubs))
        (stubs / tool).chmod(0o755)
    monkeypatch.setattr(_service, 'UNIT_DIR', str(tmp_path / 'units'))
    monkeypatch.setattr(_service, 'SECRET_DIR', str(tmp_path / 'secrets'))
    monkeypatch.setattr(_service._Backend, 'command_timeout', 0.5)  # pylint: disable=protected-access
    monkeypatch.setattr(_service._Backend, 'stop_margin', 0.2)  # pylint: disable=protected-access
    monkeypatch.setenv('SHOW', engine.SHOW_RUNNING)

    def hang(*verbs):
        (stubs / 'hang').write_text(' '.join(verbs))
    hang.dir = stubs
    return hang


def systemd(hung, module=None):
    """The real systemd backend of ``module`` (a module of service_fakes) over the stub tools of ``hung``."""
    be = _service.SystemdBackend(module or engine.fake_module()[0])
    be.systemctl, be.journalctl = str(hung.dir / 'systemctl'), str(hung.dir / 'journalctl')
    return be


def test_every_engine_command_runs_under_timeout_with_its_bound():
    """`timeout -s KILL N` before every command: 120 s for one that waits for nothing; twice the stop timeout plus
    30 s (at least 120) for systemctl stop / restart, which wait up to TimeoutStopSec after SIGTERM and SIGKILL."""
    assert _service.command_deadline() == _service.COMMAND_TIMEOUT == 120
    assert _service.command_deadline(10) == 120 and _service.command_deadline(60) == 150
    assert _service.command_deadline(100) == 230 and _service.command_deadline(2, floor=0.5, margin=0.2) == 4.2
    module = engine.Recorder()  # fails the test on a command without the prefix
    be = _service.SystemdBackend(module)
    s = engine.spec(stop_timeout=100)
    be.stop(s, remove=False)
    be.run([be.systemctl, 'daemon-reload'])
    be.logs(s, 5)
    assert module.calls == ['stop kvpool-vllm-a.service', 'daemon-reload', '-u kvpool-vllm-a -n 5 --no-pager -o cat']
    assert module.bounds == [230, 120, 120]


def test_a_hung_systemctl_show_is_killed_at_its_deadline_never_taken_for_not_running(hung):
    hung('show')
    be = systemd(hung)
    started = time.monotonic()
    with pytest.raises(_service.ReadError) as raised:
        be.current(engine.spec())
    assert time.monotonic() - started < 5
    assert isinstance(raised.value, _service.CommandTimeout)
    assert_names(str(raised.value), '`systemctl show kvpool-vllm-a.service', str(hung.dir / 'systemctl'),
                 'did not finish within 0.5 s', 'killed (timeout -s KILL 0.5', 'not taken as an answer', 'Fix',
                 'by hand on the node')
    # The state machine: a failure, never "stopped, nothing to do"; nothing was changed.
    res = engine.outcome(engine.machine(be.module, be), engine.spec(), 'stopped', dict(changed=False),
                         lambda: [])
    assert res['failed'] and not res.get('changed') and 'did not finish within 0.5 s' in res['msg']
    assert [c for c in (hung.dir / 'calls').read_text().splitlines() if not c.startswith('show')] == []


def test_a_hung_systemctl_stop_fails_the_stop_naming_its_bound(hung):
    """`systemctl stop` runs with check=False (a unit already gone is fine), but killed at its deadline it is a
    failure: the unit file is not removed as if the stop had worked."""
    hung('stop')
    be = systemd(hung)
    s = engine.spec(stop_timeout=0.25)
    unit = os.path.join(_service.UNIT_DIR, 'kvpool-vllm-a.service')
    os.makedirs(_service.UNIT_DIR)
    with open(unit, 'w') as f:
        f.write(_service.render_unit(s))
    res = engine.outcome(engine.machine(be.module, be), s, 'stopped', dict(changed=False), lambda: [])
    assert res['failed'], res
    assert_names(res['msg'], 'could not stop vllm instance a', '`systemctl stop kvpool-vllm-a.service',
                 'within 0.7 s', 'twice the stop timeout of 0.25 s', 'Fix', 'systemd')
    assert os.path.exists(unit)


def test_a_hung_journal_read_is_named_in_the_log_tail_and_a_hung_docker_is_never_no_container(hung):
    hung('-u', 'inspect', 'ps')
    assert_names(systemd(hung).logs(engine.spec(), 5), 'no log lines', '`journalctl -u kvpool-vllm-a',
                 'killed')
    docker = _service.DockerBackend(engine.fake_module()[0], 'vllm-ascend')
    docker.docker = str(hung.dir / 'docker')
    for call, named in ((lambda: docker.inspect('kvpool-vllm-a'), '`docker inspect kvpool-vllm-a`'),
                        (lambda: docker.list_units('kvpool-vllm-'), '`docker ps -a'),
                        (docker.template, '`docker inspect vllm-ascend`')):
        with pytest.raises(_service.CommandTimeout) as raised:
            call()
        assert_names(str(raised.value), named, 'did not finish within 0.5 s', 'Fix')


def test_a_command_killed_by_someone_else_before_its_deadline_is_its_own_failure(hung, tmp_path):
    """rc -9 / 137 long before the deadline (the OOM killer, an operator): the command's failure, not a timeout."""
    killed = tmp_path / 'killed'
    killed.write_text('#!/bin/sh\nkill -KILL $$\n')
    killed.chmod(0o755)
    be = systemd(hung)
    be.command_timeout = 30
    rc = be.run([str(killed), 'show'], check=False)[0]
    assert rc in (-9, 137)


def test_without_coreutils_timeout_nothing_runs_unbounded():
    class NoTimeout(engine.Recorder):
        def get_bin_path(self, name, required=False, opt_dirs=None):
            return None if name == 'timeout' else '/usr/bin/' + name
    module = NoTimeout()
    with pytest.raises(_service.ServiceError) as raised:
        _service.SystemdBackend(module).status(engine.spec())
    assert_names(str(raised.value), 'timeout (GNU coreutils) was not found', '`systemctl show kvpool-vllm-a.service',
                 'was not run', 'Fix: install coreutils')
    assert module.calls == []


def test_vllm_router_stopped_with_a_hung_systemctl_fails_instead_of_ok(hung, monkeypatch, capsys):
    hung('show')

    monkeypatch.setattr(vllm_router, 'backend_for', lambda module, container=None: systemd(hung, module))
    started = time.monotonic()
    res, dummy = run(vllm_router, capsys, state='stopped', binary=sys.executable, port=free_port(),
                     prometheus_port=free_port(), worker_urls=['http://127.0.0.1:%d' % free_port()])
    assert time.monotonic() - started < 10
    assert res['failed'], res
    assert_names(res['msg'], '`systemctl show kvpool-router.service', 'did not finish within 0.5 s', 'Fix')


# --- kvpool_benchmark (tool=aisbench) -----------------------------------------------------------------------------
def test_an_aisbench_result_that_is_a_fifo_is_named_not_opened(tmp_path):
    """A FIFO where AISBench's result CSV should be (the step's outputs): the step fails naming it at once."""
    run_dir = tmp_path / '20260101_000000' / 'performances' / _aisbench.MODEL_ABBR
    run_dir.mkdir(parents=True)
    os.mkfifo(str(run_dir / 'ds.csv'))
    started = time.monotonic()
    with pytest.raises(ParseError) as raised:
        _aisbench.read_results(str(tmp_path))
    assert time.monotonic() - started < 5
    assert_names(str(raised.value), 'AISBench result', 'ds.csv', 'not a regular file')


# A SIMULATED ais_bench that starts (--help answers), then hangs with a child that holds its output open.
HANGING_AIS_BENCH = '''#!/bin/sh
[ "$1" = --help ] && { echo "usage: ais_bench"; exit 0; }
echo "ais_bench (stand-in): loading the tokenizer"
sleep 300 &
echo $! > "%s"
wait
'''


def test_an_ais_bench_that_hangs_is_killed_at_aisbench_timeout_without_coreutils_timeout(
        tmp_path, monkeypatch, capsys):
    """A run that never ends, on a host without coreutils' timeout: the module's own deadline kills it and its
    child after aisbench_timeout and the step fails naming the role's variable and the fix."""
    child_pid = tmp_path / 'child.pid'
    fake = tmp_path / 'ais_bench'
    fake.write_text(HANGING_AIS_BENCH % child_pid)
    fake.chmod(0o755)
    original = basic.AnsibleModule.get_bin_path
    monkeypatch.setattr(basic.AnsibleModule, 'get_bin_path',
                        lambda self, name, *a, **kw: None if name == 'timeout' else original(self, name, *a, **kw))
    started = time.monotonic()
    res, out = run(kvpool_benchmark, capsys, name='step1', url='http://127.0.0.1:%d' % free_port(), dataset_seed=1,
                   model='qwen', tokenize='words', tool='aisbench', aisbench_command=str(fake), num_requests=2,
                   input_tokens=16, aisbench_model_path=str(tmp_path), aisbench_timeout=1.5, api_key=KEY,
                   variable_prefix='kvpool_benchmark_')
    assert time.monotonic() - started < 15
    assert res['failed'], res
    assert_names(res['msg'], 'kvpool_benchmark_aisbench_timeout=1.5', 'killed', 'Fix: raise kvpool_benchmark_'
                 'aisbench_timeout', 'loading the tokenizer')
    assert res['aisbench']['timeout_s'] == 1.5 and KEY not in out
    pid = int(child_pid.read_text())
    deadline = time.monotonic() + 5  # the child (sleep 300) is gone with the group
    while os.path.exists('/proc/%d' % pid) and 'Z' not in open('/proc/%d/stat' % pid).read().split(') ')[1][:1]:
        assert time.monotonic() < deadline, 'the hung ais_bench\'s child %d still runs' % pid
        time.sleep(0.1)


@pytest.mark.parametrize('value', [0, -5, float('nan'), float('inf'), 10 ** 9])
def test_an_aisbench_timeout_that_is_no_deadline_is_refused_naming_the_variable(value, capsys):
    res, dummy = run(kvpool_benchmark, capsys, url='http://127.0.0.1:%d' % free_port(), dataset_seed=1,
                     aisbench_timeout=value, variable_prefix='kvpool_benchmark_')
    assert res['failed'], res
    assert_names(res['msg'], 'kvpool_benchmark_aisbench_timeout=', 'above 0', 'at most 604800',
                 'Fix: set kvpool_benchmark_aisbench_timeout', 'unset (null) for 3600')


def test_an_unset_or_null_aisbench_timeout_is_one_hour():
    assert kvpool_benchmark.aisbench_timeout({'aisbench_timeout': None}) == kvpool_benchmark.AISBENCH_TIMEOUT == 3600
    assert kvpool_benchmark.aisbench_timeout({}) == 3600
    assert kvpool_benchmark.aisbench_timeout({'aisbench_timeout': 90.5}) == 90.5
