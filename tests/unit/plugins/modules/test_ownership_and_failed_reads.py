# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Bad input, round two (issue 32), two classes:

- **Files it did not write.** The collection writes, replaces and removes only files that carry its header or that
  it can prove it wrote (the record beside mooncake.json). A same-named file without it (a hand-written unit, a link
  of ``systemctl link`` / ``mask``, another tool's mooncake.json) fails the task naming the file and the fix, in
  check mode too, and is left as it was.
- **A failed read taken as an answer.** A ``systemctl show`` that fails ("Failed to connect to bus") is never "not
  running, ok"; ``etcdctl member list`` garbage (exit code 0) is never "no other member answers"; ``docker inspect``
  or ``docker ps`` that fail are never "no container".

The modules run for real (their ``main()``) over stub tools: a ``systemctl`` and an ``etcdctl`` that are shell
scripts under tmp, answering from files and logging their calls; the unit and secret directories are under tmp.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import sys

import pytest
from ansible.module_utils.testing import patch_module_args
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.ascend.kvpool.plugins.module_utils import _service
from ansible_collections.ascend.kvpool.plugins.modules import (
    etcd_member,
    mooncake_config_file,
    mooncake_master,
    vllm_router,
    vllm_server,
)
from ansible_collections.ascend.kvpool.tests.unit.messages import assert_names
from ansible_collections.ascend.kvpool.tests.unit.plugins.module_utils import service_fakes as engine_tests
from ansible_collections.ascend.kvpool.tests.unit.plugins.modules.process_helpers import free_port

FOREIGN_UNIT = '[Unit]\nDescription=written by hand\n\n[Service]\nExecStart=/usr/local/bin/mine\n'
BUS_ERROR = 'Failed to connect to bus: No such file or directory'

STUB = r"""#!/bin/sh
# A stub of %(tool)s: logs its arguments, answers from files of the test.
echo "$*" >> "%(dir)s/calls"
case " $* " in
    *" show "*|*" member "*|*" endpoint "*)
        if [ -f "%(dir)s/%(tool)s.err" ]; then cat "%(dir)s/%(tool)s.err" >&2; fi
        if [ -f "%(dir)s/%(tool)s.out" ]; then cat "%(dir)s/%(tool)s.out"; fi
        exit "$(cat "%(dir)s/%(tool)s.rc" 2>/dev/null || echo 0)";;
esac
exit 0
"""


class Stubs(object):
    """The stub tools of one test and what they answer (``answer``) and were asked (``calls``)."""

    def __init__(self, tmp_path):
        self.dir = tmp_path / 'stubs'
        self.dir.mkdir()
        for tool in ('systemctl', 'etcdctl'):
            path = self.dir / tool
            path.write_text(STUB % dict(tool=tool, dir=self.dir))
            path.chmod(0o755)
        self.answer('systemctl', engine_tests.SHOW_MISSING)

    def path(self, tool):
        return str(self.dir / tool)

    def answer(self, tool, out='', rc=0, err=''):
        (self.dir / ('%s.out' % tool)).write_text(out)
        (self.dir / ('%s.err' % tool)).write_text(err)
        (self.dir / ('%s.rc' % tool)).write_text('%d\n' % rc)

    def calls(self):
        path = self.dir / 'calls'
        return path.read_text().splitlines() if path.exists() else []

    def changes(self):
        """The calls that change something (anything but show and the etcdctl reads)."""
        return [c for c in self.calls() if not c.startswith('show') and ' member list' not in c]


@pytest.fixture
def node(monkeypatch, tmp_path):
    """The unit and secret directories under tmp, and the service modules over the real systemd backend with the
    stub systemctl."""
    stubs = Stubs(tmp_path)
    units, secrets = tmp_path / 'units', tmp_path / 'secrets'
    units.mkdir()
    monkeypatch.setattr(_service, 'UNIT_DIR', str(units))
    monkeypatch.setattr(_service, 'SECRET_DIR', str(secrets))

    def backend_for(module, container=None):
        be = _service.SystemdBackend(module)
        be.systemctl = be.journalctl = stubs.path('systemctl')
        return be
    for mod in (vllm_router, vllm_server, mooncake_master, etcd_member):
        monkeypatch.setattr(mod, 'backend_for', backend_for)
    monkeypatch.setattr(etcd_member, 'UNIT_DIR', str(units))
    stubs.units, stubs.secrets, stubs.tmp = units, secrets, tmp_path
    return stubs


def run(module, check=False, **params):
    params['_ansible_check_mode'] = check
    with patch_module_args(params):
        with pytest.raises(SystemExit):
            module.main()


def result(capsys):
    return json.loads(capsys.readouterr().out)


def router(node, capsys, check=False, **args):
    binary = node.tmp / 'vllm-router'
    binary.write_text('#!/bin/sh\n')
    binary.chmod(0o755)
    params = dict(binary=str(binary), port=free_port(), prometheus_port=free_port(), ready_timeout=1,
                  poll_interval=0.02, worker_urls=['http://127.0.0.1:%d' % free_port()])
    params.update(args)
    run(vllm_router, check, **params)
    return result(capsys)


def etcd(node, capsys, check=True, **args):
    params = dict(name='node1', address='127.0.0.1', etcdctl=node.path('etcdctl'), binary=sys.executable,
                  data_dir=str(node.tmp / 'etcd'), ready_timeout=1, poll_interval=0.05,
                  members=[dict(name='node1', address='127.0.0.1'), dict(name='node2', address='127.0.0.2')])
    params.update(args)
    run(etcd_member, check, **params)
    return result(capsys)


# --- files it did not write ---------------------------------------------------------------------------------------

@pytest.mark.parametrize('state', ['started', 'stopped', 'restarted'])
@pytest.mark.parametrize('check', [False, True])
def test_vllm_router_never_replaces_or_removes_a_unit_it_did_not_write(node, capsys, state, check):
    unit = node.units / 'kvpool-router.service'
    unit.write_text(FOREIGN_UNIT)
    node.answer('systemctl', engine_tests.SHOW_RUNNING)
    res = router(node, capsys, check=check, state=state)
    assert res.get('failed'), res
    assert_names(res['msg'], 'unit file %s' % unit, 'not written by ascend.kvpool', 'header', 'nothing was changed',
                 'Fix', 'another name')
    assert unit.read_text() == FOREIGN_UNIT and node.changes() == []
    assert 'Traceback' not in res['msg']


def test_a_link_at_the_units_name_is_not_a_file_of_the_collection(node, capsys):
    """`systemctl mask` makes the unit a link to /dev/null; `systemctl link` a link to a file elsewhere."""
    unit = node.units / 'kvpool-router.service'
    os.symlink('/dev/null', str(unit))
    res = router(node, capsys, state='stopped')
    assert_names(res['msg'], 'unit file %s' % unit, 'a symlink to /dev/null', 'nothing was changed')
    assert os.path.islink(str(unit)) and node.changes() == []


def test_a_unit_loaded_from_a_file_the_collection_did_not_write_is_left_alone(node, capsys):
    """A package's /lib/systemd/system/kvpool-router.service: neither overridden, started nor stopped."""
    node.answer('systemctl', engine_tests.SHOW_RUNNING + 'FragmentPath=/lib/systemd/system/kvpool-router.service\n')
    for state in ('started', 'stopped'):
        res = router(node, capsys, state=state)
        assert_names(res['msg'], 'kvpool-router.service is loaded from /lib/systemd/system/kvpool-router.service',
                     'did not write', 'nothing was changed')
    assert node.changes() == [] and os.listdir(str(node.units)) == []


def test_vllm_server_stop_unlisted_never_removes_a_unit_it_did_not_write(node, capsys):
    unit = node.units / 'kvpool-vllm-old.service'
    unit.write_text(FOREIGN_UNIT)
    for check in (True, False):
        run(vllm_server, check, name='qwen-a', state='stopped', stop_unlisted=['qwen-a'], ready_timeout=1,
            poll_interval=0.02, stop_timeout=1)
        res = result(capsys)
        assert res.get('failed'), res
        assert_names(res['msg'], 'vllm instance old', 'not in stop_unlisted', 'unit file %s' % unit,
                     'not written by ascend.kvpool', 'Fix')
    assert unit.read_text() == FOREIGN_UNIT and node.changes() == []


def test_vllm_server_never_takes_a_secret_file_it_did_not_write(node, capsys):
    node.secrets.mkdir()
    env = node.secrets / 'kvpool-vllm-qwen-a.env'
    env.write_text('VLLM_API_KEY=theirs\n')
    for check in (True, False):
        run(vllm_server, check, name='qwen-a', port=free_port(), model='/models/qwen', binary=sys.executable,
            api_key='sk-ours', wait=False, ready_timeout=1, poll_interval=0.02)
        res = result(capsys)
        assert res.get('failed'), res
        assert_names(res['msg'], 'secret environment file %s' % env, 'not written by ascend.kvpool')
        assert 'sk-ours' not in json.dumps(res) and 'theirs' not in res['msg']
    assert env.read_text() == 'VLLM_API_KEY=theirs\n' and node.changes() == []


def test_a_secret_file_of_an_earlier_release_is_kept_and_gets_the_header_when_written(node):
    """Written before the header, beside the collection's unit that names it: the collection's, and unchanged with the
    same key (no restart); a new key writes it with the header."""
    spec = engine_tests.spec(secret_env={'VLLM_API_KEY': 'k1'})
    (node.units / 'kvpool-vllm-a.service').write_text(_service.render_unit(spec))
    node.secrets.mkdir()
    (node.secrets / 'kvpool-vllm-a.env').write_text('VLLM_API_KEY=k1\n')

    class Show(engine_tests.Recorder):
        def run_command(self, argv, environ_update=None, expand_user_and_vars=True):
            return (0, engine_tests.SHOW_RUNNING, '') if engine_tests.unbounded(argv)[0][1] == 'show' else (0, '', '')
    be = _service.SystemdBackend(Show())
    text, secret, status = be.current(spec)
    assert secret == _service.render_secret_env(spec.secret_env) and status['exists']
    be.apply(spec, text, 'VLLM_API_KEY=k2\n', text, secret, restart=True)
    written = (node.secrets / 'kvpool-vllm-a.env').read_text()
    assert written.startswith(_service.OWN_MARK) and written.endswith('\nVLLM_API_KEY=k2\n')
    assert be.current(spec)[1] == 'VLLM_API_KEY=k2\n'


@pytest.mark.parametrize('state', ['started', 'stopped'])
def test_mooncake_master_never_replaces_or_removes_a_unit_it_did_not_write(node, capsys, state):
    unit = node.units / 'kvpool-mooncake-master.service'
    unit.write_text(FOREIGN_UNIT)
    run(mooncake_master, True, state=state, binary=sys.executable, port=free_port(), metrics_port=free_port(),
        ready_timeout=1, poll_interval=0.02)
    res = result(capsys)
    assert_names(res['msg'], 'unit file %s' % unit, 'not written by ascend.kvpool', 'nothing was changed')
    assert unit.read_text() == FOREIGN_UNIT and node.changes() == []


@pytest.mark.parametrize('state', ['started', 'stopped'])
def test_etcd_member_never_replaces_or_removes_a_unit_it_did_not_write(node, capsys, state):
    unit = node.units / 'kvpool-etcd.service'
    unit.write_text(FOREIGN_UNIT)
    node.answer('etcdctl', rc=1, err='Error: context deadline exceeded\n')
    res = etcd(node, capsys, state=state)
    assert_names(res['msg'], 'unit file %s' % unit, 'not written by ascend.kvpool', 'nothing was changed')
    assert unit.read_text() == FOREIGN_UNIT and node.changes() == []


def test_a_container_the_collection_did_not_make_is_never_recreated_or_removed():
    doc = engine_tests.container_doc()
    doc['Config']['Labels'] = {'com.example.owner': 'someone'}
    be = engine_tests.FakeDocker(None, {'kvpool-vllm-a': doc})
    spec = engine_tests.spec()
    for call in (be.current, be.stop):
        with pytest.raises(_service.ServiceError) as err:
            call(spec)
        assert_names(str(err.value), 'container kvpool-vllm-a', 'not made by ascend.kvpool',
                     _service.MANAGED_LABEL, 'docker rename')
    assert be.ops == []
    doc['Config']['Labels'] = {_service.SPEC_LABEL: '{"secret_env": []}'}  # of an earlier release: the collection's
    assert be.current(spec)[0] == '{"secret_env": []}'
    be.stop(spec)
    assert be.ops == [{'name': 'kvpool-vllm-a', 'state': 'absent', 'stop_timeout': 60}]


# mooncake.json: the record beside it proves the module wrote it.
DOC = {'metadata_server': 'P2PHANDSHAKE', 'protocol': 'tcp', 'master_server_address': '127.0.0.1:50088'}


def config_file(capsys, check=False, **params):
    run(mooncake_config_file, check, **params)
    return result(capsys)


@pytest.mark.parametrize('state', ['present', 'absent'])
@pytest.mark.parametrize('check', [False, True])
def test_mooncake_config_file_never_replaces_or_removes_a_file_it_cannot_prove_it_wrote(capsys, tmp_path, state,
                                                                                        check):
    path = tmp_path / 'mooncake.json'
    path.write_text('{"mine": true}\n')
    res = config_file(capsys, check, path=str(path), config=DOC, state=state)
    assert res.get('failed'), res
    assert_names(res['msg'], 'path %s' % path, 'cannot prove it wrote it', 'no record %s' % (tmp_path / '.mooncake'
                                                                                             '.json.kvpool'),
                 'nothing was changed', 'mooncake_config_path', 'remove it')
    assert path.read_text() == '{"mine": true}\n' and sorted(os.listdir(str(tmp_path))) == ['mooncake.json']


def test_mooncake_config_file_proves_its_own_file_and_refuses_one_changed_since(capsys, tmp_path):
    path, record = tmp_path / 'mooncake.json', tmp_path / '.mooncake.json.kvpool'
    assert config_file(capsys, path=str(path), config=DOC)['changed']
    assert record.read_text().startswith(_service.OWN_MARK)
    assert config_file(capsys, path=str(path), config=dict(DOC, protocol='rdma'))['changed']  # its own: replaced
    path.write_text(path.read_text().replace('rdma', 'ascend'))  # changed by hand since
    res = config_file(capsys, path=str(path), config=DOC)
    assert_names(res['msg'], 'path %s' % path, 'its bytes are not the ones %s records' % record)
    path.write_text(mooncake_config_file.config_text(DOC))  # the bytes the module writes: its own
    assert config_file(capsys, path=str(path), config=DOC)['changed'] is False
    assert config_file(capsys, path=str(path), state='absent')['changed']
    assert not path.exists() and not record.exists()
    assert config_file(capsys, path=str(path), state='absent')['changed'] is False


def test_a_file_of_an_earlier_release_with_the_same_bytes_is_adopted_without_a_change(capsys, tmp_path):
    path, record = tmp_path / 'mooncake.json', tmp_path / '.mooncake.json.kvpool'
    path.write_text(mooncake_config_file.config_text(DOC))
    assert config_file(capsys, check=True, path=str(path), config=DOC)['changed'] is False and not record.exists()
    assert config_file(capsys, path=str(path), config=DOC)['changed'] is False and record.exists()
    assert config_file(capsys, path=str(path), config=dict(DOC, protocol='rdma'))['changed']


@pytest.mark.parametrize('case', ['a link', 'a FIFO', 'a record of someone else'])
def test_mooncake_config_file_refuses_what_it_never_writes(capsys, tmp_path, case):
    path, record = tmp_path / 'mooncake.json', tmp_path / '.mooncake.json.kvpool'
    victim = tmp_path / 'victim'
    victim.write_text('keep me')
    if case == 'a link':
        os.symlink(str(victim), str(path))
        expected = ['path %s is not a regular file' % path, 'a symlink']
    elif case == 'a FIFO':
        os.mkfifo(str(path))
        expected = ['path %s is not a regular file' % path, 'a FIFO']
    else:
        record.write_text('sha256=%s\n' % ('0' * 64))
        expected = ['%s (the name of the ownership record of %s)' % (record, path), 'not written by ascend.kvpool']
    for state in ('present', 'absent'):
        res = config_file(capsys, path=str(path), config=DOC, state=state)
        assert res.get('failed'), res
        assert_names(res['msg'], *expected)
    assert victim.read_text() == 'keep me' and os.path.lexists(str(path)) == (case != 'a record of someone else')


# --- a failed read taken as an answer ---------------------------------------------------------------------------

@pytest.mark.parametrize('state', ['stopped', 'started'])
@pytest.mark.parametrize('check', [False, True])
def test_vllm_router_never_takes_a_failed_systemctl_show_for_not_running(node, capsys, state, check):
    spec = _service.ServiceSpec('kvpool-router', 'vllm-router router', ['/bin/true'],
                                owner='ascend.kvpool.vllm_router')
    unit = node.units / 'kvpool-router.service'
    unit.write_text(_service.render_unit(spec))
    node.answer('systemctl', rc=1, err=BUS_ERROR + '\n')
    res = router(node, capsys, check=check, state=state)
    assert res.get('failed'), res
    assert_names(res['msg'], 'systemctl show kvpool-router.service failed', 'rc 1', BUS_ERROR,
                 'whether kvpool-router.service runs is unknown', 'nothing was changed', 'Fix')
    assert res.get('action') != 'none' and unit.exists() and node.changes() == []


@settings(max_examples=150, deadline=None)
@given(rc=st.integers(min_value=0, max_value=255), out=st.text(max_size=300))
def test_any_systemctl_show_answer_is_a_status_with_its_state_or_the_collections_error(rc, out):
    """Text from the tool: either systemd's LoadState and ActiveState are in it (exit code 0), or a ServiceError."""
    class Show(engine_tests.Recorder):
        def run_command(self, argv, environ_update=None, expand_user_and_vars=True):
            return rc, out, 'err'
    be = _service.SystemdBackend(Show())
    try:
        status = be.current(engine_tests.spec(unit='kvpool-none-%d' % os.getpid()))[2]
    except _service.ServiceError as exc:
        assert 'systemctl show' in str(exc) or 'is loaded from' in str(exc), str(exc)
        return
    props = _service.parse_show(out)
    assert rc == 0 and props.get('LoadState') and props.get('ActiveState')
    assert status['exists'] is False  # no unit file of the collection under its name


def test_a_failed_read_of_the_engine_is_never_an_empty_answer(tmp_path, monkeypatch):
    """The other reads of the engine: a transient unit's state (the pool probe's holder), the unit directory listed
    by stop_unlisted, docker inspect and docker ps."""
    class Failing(engine_tests.Recorder):
        def run_command(self, argv, environ_update=None, expand_user_and_vars=True):
            argv = engine_tests.unbounded(argv)[0]
            if argv[1] == 'inspect' and argv[2] == 'gone':
                return 1, '', 'Error: No such object: gone'
            return 1, '', 'Cannot connect to the Docker daemon at unix:///var/run/docker.sock' if 'docker' in \
                argv[0] else BUS_ERROR
    with pytest.raises(_service.ServiceError) as err:
        _service.SystemdBackend(Failing()).transient_alive('kvpool-probe-put-k')
    assert_names(str(err.value), 'systemctl show kvpool-probe-put-k.service failed', BUS_ERROR)
    docker = _service.DockerBackend(Failing(), 'vllm-ascend')
    assert docker.inspect('gone') is None  # docker's own "no such container"
    for call, named in ((lambda: docker.inspect('kvpool-vllm-a'), 'docker inspect kvpool-vllm-a failed'),
                        (lambda: docker.list_units('kvpool-vllm-'), 'docker ps failed')):
        with pytest.raises(_service.ServiceError) as err:
            call()
        assert_names(str(err.value), named, 'Cannot connect to the Docker daemon')

    class Garbage(engine_tests.Recorder):
        def run_command(self, argv, environ_update=None, expand_user_and_vars=True):
            return 0, '<html>proxy error</html>', ''
    with pytest.raises(_service.ServiceError) as err:
        _service.DockerBackend(Garbage(), 'vllm-ascend').inspect('kvpool-vllm-a')
    assert_names(str(err.value), 'docker inspect kvpool-vllm-a answered', 'not docker\'s list of containers')
    units = tmp_path / 'units'
    units.mkdir()
    monkeypatch.setattr(_service, 'UNIT_DIR', str(units))
    listdir = os.listdir

    def unreadable(path):
        if path == str(units):
            raise PermissionError(13, 'Permission denied')
        return listdir(path)
    monkeypatch.setattr(os, 'listdir', unreadable)
    with pytest.raises(_service.ServiceError) as err:
        _service.SystemdBackend(Failing()).list_units('kvpool-vllm-')
    assert_names(str(err.value), 'cannot list the unit directory %s' % units)


def test_etcd_member_never_takes_member_list_garbage_for_no_other_member(node, capsys):
    node.answer('etcdctl', out='<html>502 Bad Gateway</html>\n', rc=0)
    res = etcd(node, capsys)
    assert res.get('failed'), res
    assert_names(res['msg'], 'etcd member node1', 'etcdctl --endpoints=127.0.0.2:2379 member list',
                 'exited 0 but its answer is not a member list', 'nothing was changed', 'Fix', 'etcdctl option')
    assert 'join' not in res or res['join'].get('action') != 'new'


def test_etcd_member_fails_on_an_etcdctl_error_other_than_no_answer(node, capsys):
    node.answer('etcdctl', rc=1, err='Error: unknown command "member" for "etcdctl"\n')
    res = etcd(node, capsys)
    assert_names(res['msg'], 'member list -w json` failed (rc 1)', 'unknown command', 'nothing was changed')
    node.answer('etcdctl', rc=1, err='{"level":"warn","msg":"retrying of unary invoker failed"}\n'
                                     'Error: context deadline exceeded\n')
    res = etcd(node, capsys)  # nothing answers at all: a first deploy, the static bootstrap
    assert not res.get('failed'), res.get('msg')
    assert res['join']['action'] == 'new' and 'no other member answers' in res['join']['reason']


@settings(max_examples=200, deadline=None)
@given(out=st.one_of(st.text(max_size=200), st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(
        ['members', 'ID', 'name', 'peerURLs', 'clientURLs', 'header']), inner, max_size=4), max_leaves=10).map(
            json.dumps)))
def test_any_member_list_answer_with_exit_code_0_is_a_list_or_the_collections_error(out):
    """Text from etcdctl (exit code 0): the members, or a ServiceError naming etcdctl; never None ("none answers")."""
    class Etcdctl(object):
        def run_command(self, argv, environ_update=None):
            return 0, out, ''
    params = dict(name='node1', etcdctl='/usr/bin/etcdctl')
    try:
        listed = etcd_member._member_list(Etcdctl(), params, ['127.0.0.2:2379'])
    except _service.ServiceError as exc:
        assert_names(str(exc), 'member list', 'etcdctl')
        return
    assert isinstance(listed, list) and all(set(m) == {'id', 'name', 'peer_urls', 'client_urls'} for m in listed)


def test_etcd_member_gate_never_skips_the_leader_check_on_an_unreadable_endpoint_status(monkeypatch, capsys,
                                                                                        tmp_path):
    """`etcdctl endpoint status` garbage used to be read as no status at all, which skipped the leader check."""
    answers = {
        ('endpoint', 'health'): '[{"endpoint":"127.0.0.1:2379","health":true},{"endpoint":"127.0.0.2:2379",'
                                '"health":true}]',
        ('member', 'list'): json.dumps({'members': [
            {'ID': 1, 'name': 'node1', 'peerURLs': ['http://127.0.0.1:2380'], 'clientURLs': ['http://127.0.0.1:2379']},
            {'ID': 2, 'name': 'node2', 'peerURLs': ['http://127.0.0.2:2380'], 'clientURLs': ['http://127.0.0.2:2379']},
        ]}),
        ('endpoint', 'status'): 'not json at all',
    }
    seen = {}

    def fake_etcdctl(module, p, endpoints, *args, **kwargs):  # pylint: disable=unused-argument
        return 0, answers[tuple(args[:2])], ''

    class Machine(object):
        def ensure(self, spec, state, result, gate, explain=None, peer_gate=None, port_taken=None):
            seen['cluster_ok'] = peer_gate()[0][1]
            seen['explain'] = explain
            return result
    monkeypatch.setattr(etcd_member, '_etcdctl', fake_etcdctl)
    monkeypatch.setattr(etcd_member, 'lifecycle_for', lambda *a, **kw: Machine())
    run(etcd_member, False, name='node1', address='127.0.0.1', binary=sys.executable, etcdctl=sys.executable,
        data_dir=str(tmp_path / 'etcd'), initial_cluster_state='new',
        members=[dict(name='node1', address='127.0.0.1'), dict(name='node2', address='127.0.0.2')])
    assert not result(capsys).get('failed')
    assert seen['cluster_ok']() is False
    assert_names(seen['explain'](''), 'etcdctl endpoint status', 'not JSON')


def test_teardown_removes_the_probes_record_only_when_the_role_wrote_it(capsys, tmp_path):
    """teardown.yml removes mooncake.json with state=absent and the pool probe's record as its proof."""
    path, proof = tmp_path / 'mooncake.json', tmp_path / 'mooncake.json.proven'
    config_file(capsys, path=str(path), config=DOC)
    proof.write_text('my notes\n')
    res = config_file(capsys, path=str(path), proof=str(proof), state='absent')
    assert_names(res['msg'], 'proof %s' % proof, 'not the pool probe\'s record', 'mooncake_config_probe_marker')
    assert path.exists() and proof.read_text() == 'my notes\n'
    proof.write_text("pool proven: every node of the play read the probe's object from this node\n")  # an earlier one
    res = config_file(capsys, path=str(path), proof=str(proof), state='absent')
    assert res['changed'] and not path.exists() and not proof.exists()


def test_preflight_never_takes_a_failed_image_inspect_for_a_missing_image(monkeypatch):
    """`docker image inspect` failing because the daemon is down is a failed read: named as such, not "image missing"
    (whose fix, pull it, would not help)."""
    from ansible_collections.ascend.kvpool.plugins.modules import preflight_facts
    from ansible_collections.ascend.kvpool.plugins.plugin_utils import preflight

    class Module(object):
        def get_bin_path(self, name, required=False, opt_dirs=None):
            return '/usr/bin/' + name
    image = 'quay.io/ascend/vllm-ascend:v0.11.0rc1'
    down = 'Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?'
    monkeypatch.setattr(preflight_facts, 'execute', lambda argv, timeout=None: (1, '', down))
    got = preflight_facts.container_facts(Module(), 'docker', [image])
    assert got['images'] == {image: None} and down in got['errors'][image]
    record = {'host': 'node1', 'container': {'enabled': True, 'image': image, 'runtime': 'docker'},
              'facts': {'container': got}}
    finding = preflight.check_container(record)[0]
    assert_names(finding['finding'], 'cannot tell whether image %s is on the node' % image, down)
    assert_names(finding['fix'], 'docker daemon runs', 'docker image inspect %s' % image)
    assert 'not present' not in finding['finding']
    monkeypatch.setattr(preflight_facts, 'execute', lambda argv, timeout=None: (1, '', 'Error: No such image: x'))
    expected = {'runtime': '/usr/bin/docker', 'images': {image: False}}
    assert preflight_facts.container_facts(Module(), 'docker', [image]) == expected


def test_preflight_never_takes_an_unreadable_proc_net_tcp_for_every_port_free(monkeypatch):
    from ansible_collections.ascend.kvpool.plugins.module_utils._errors import KvpoolError
    from ansible_collections.ascend.kvpool.plugins.modules import preflight_facts
    monkeypatch.setattr(preflight_facts, 'read_text', lambda path: '')
    with pytest.raises(KvpoolError) as err:
        preflight_facts.port_listeners([8002, 50088])
    assert_names(str(err.value), '/proc/net/tcp cannot be read', 'ports 8002, 50088', 'unknown')
    assert preflight_facts.port_listeners([]) == {}


def test_a_failed_docker_exec_is_never_a_binary_not_found():
    """find_binary in a container: `test -x` false (rc 1, nothing said) is "not there"; docker failing is a failed
    read."""
    class Exec(object):
        def __init__(self, rc, err):
            self.answer = (rc, '', err)

        def get_bin_path(self, name, required=False, opt_dirs=None):
            return '/usr/bin/' + name

        def run_command(self, argv, environ_update=None, expand_user_and_vars=True):
            engine_tests.unbounded(argv)
            return self.answer
    path = '/usr/local/bin/vllm'
    assert _service.find_binary(Exec(0, ''), path, [], 'vllm-ascend') == path
    assert _service.find_binary(Exec(1, ''), path, [], 'vllm-ascend') is None
    assert _service.find_binary(Exec(1, 'Error: No such container: vllm-ascend'), path, [], 'vllm-ascend') == path
    with pytest.raises(_service.ServiceError) as err:
        _service.find_binary(Exec(1, 'Error response from daemon: Container 4f2 is not running'), path, [],
                             'vllm-ascend')
    assert_names(str(err.value), 'docker exec vllm-ascend test -x %s failed' % path, 'is not running', 'unknown')
