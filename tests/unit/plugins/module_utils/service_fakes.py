# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""In-memory stand-ins of the lifecycle state machines' backends (systemd, docker), a module whose exit_json /
fail_json fail the test (library code never exits), and the helpers that run a machine as a module's main() does
(``machine``, ``outcome``, ``ensure``): shared by the tests of the machines and of the service modules."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time

from ansible_collections.ascend.kvpool.plugins.module_utils import _service

# `systemctl show -p... UNIT` (systemd 252, Debian bookworm, a mock node): a running unit restarted once after a
# kill -9, and a unit that does not exist.
SHOW_RUNNING = """LoadState=loaded
ActiveState=active
SubState=running
MainPID=1187
NRestarts=1
Result=success
UnitFileState=enabled
ExecMainStartTimestampMonotonic=512734112
ExecMainStatus=0
"""
SHOW_MISSING = """LoadState=not-found
ActiveState=inactive
SubState=dead
MainPID=0
NRestarts=0
Result=success
UnitFileState=
ExecMainStartTimestampMonotonic=0
ExecMainStatus=0
"""
SHOW_CRASH_LOOP_OVER = """LoadState=loaded
ActiveState=failed
SubState=failed
MainPID=0
NRestarts=5
Result=start-limit-hit
UnitFileState=enabled
ExecMainStartTimestampMonotonic=0
ExecMainStatus=2
"""
SHOW_AUTO_RESTART = SHOW_RUNNING.replace('ActiveState=active', 'ActiveState=activating').replace(
    'SubState=running', 'SubState=auto-restart')


def spec(**kw):
    args = dict(unit='kvpool-vllm-a', description='vLLM-Ascend instance a (ascend.kvpool)',
                argv=['/usr/local/bin/vllm', 'serve', '/m', '--kv-transfer-config', '{"kv_role": "kv_both"}'],
                env={'PYTHONHASHSEED': '0', 'ODD': 'a "q" 100% $HOME'}, after=['kvpool-mooncake-master'])
    args.update(kw)
    return _service.ServiceSpec(**args)


class FakeManager(_service.SystemdBackend):
    """A service manager in memory: what the engine wrote, whether the service runs, what its journal says."""

    kind = 'fake'

    def __init__(self, crash=False):
        self.text, self.secret, self.running, self.restarts, self.crash = None, None, False, 0, crash
        self.calls = []

    def check(self):
        pass

    def status(self, spec):
        if self.text is None:
            return _service.status_from_show(_service.parse_show(SHOW_MISSING))
        if self.running:
            return _service.status_from_show(_service.parse_show(SHOW_RUNNING))
        return _service.status_from_show(_service.parse_show(SHOW_CRASH_LOOP_OVER))

    def current(self, spec):
        return self.text, self.secret, self.status(spec)

    def apply(self, spec, text, secret, old_text, old_secret, restart):
        self.calls.append('restart' if restart else 'start')
        self.text, self.secret, self.running = text, secret, not self.crash

    def stop(self, spec, remove=True):
        self.calls.append('stop')
        self.running = False
        if remove:
            self.text = self.secret = None

    def logs(self, spec, lines):
        return 'INFO starting\nValueError: Unsupported connector type: NoSuchConnector\n'


def fake_module(check=False):
    """(module, out): an AnsibleModule whose exit_json / fail_json fail the test: the state machines never exit,
    they return the result or raise ServiceError. ``out`` is kept for the callers' use."""
    from ansible.module_utils import basic
    from ansible.module_utils.testing import patch_module_args
    with patch_module_args({'_ansible_check_mode': check}):
        module = basic.AnsibleModule(argument_spec={}, supports_check_mode=True)

    def leave(**kw):
        raise AssertionError('library code called exit_json / fail_json with %r' % (kw,))
    module.exit_json = leave
    module.fail_json = leave
    return module, {}


def outcome(machine, *args, **kwargs):
    """What a service module's main() makes of ``machine.ensure(...)``: the result, or a failure with the fields
    the ServiceError carries."""
    try:
        return machine.ensure(*args, **kwargs)
    except _service.ServiceError as exc:
        return dict(exc.result, failed=True, msg=str(exc))


def machine(module, backend, step=None, finish=None, **timing):
    """The state machine of ``backend`` (SystemdLifecycle, or ContainerLifecycle for a DockerBackend)."""
    cls = _service.ContainerLifecycle if backend.kind == 'docker' else _service.SystemdLifecycle
    timing.setdefault('what', 'vllm instance a')
    return cls(module, backend, step=step, finish=finish, **timing)


def ensure(manager, state='started', check=False, healthy=True, **spec_kw):
    module, dummy = fake_module(check)
    return outcome(machine(module, manager, ready_timeout=0.3, poll_interval=0.05),
                   spec(**spec_kw), state, dict(changed=False), lambda: [('healthy', lambda: healthy)],
                   explain=lambda log: log.splitlines()[-1])


def unbounded(argv):
    """(argv, bound): the command the engine ran under ``timeout -s KILL N`` (``_service.run_bounded``) and N; a
    command run without that prefix fails the test (every external command has a deadline)."""
    argv = list(argv)
    assert len(argv) > 4 and argv[0].endswith('/timeout') and argv[1:3] == ['-s', 'KILL'], \
        'a command without a deadline: %r' % (argv,)
    return argv[4:], float(argv[3])


class Recorder(object):
    """A module whose run_command records the calls (the tool's arguments, after the ``timeout`` prefix) and their
    bounds, and answers rc 0 with nothing."""
    check_mode = False

    def __init__(self):
        self.calls = []
        self.bounds = []

    def get_bin_path(self, name, required=False, opt_dirs=None):
        return '/usr/bin/' + name

    def run_command(self, argv, environ_update=None, expand_user_and_vars=True):
        argv, bound = unbounded(argv)
        self.calls.append(' '.join(argv[1:]))
        self.bounds.append(bound)
        return 0, '', ''


# --- container mode ---

TEMPLATE = 'vllm-ascend'
BINDS = ['/usr/local/dcmi:/usr/local/dcmi', '/etc/hccn.conf:/etc/hccn.conf', '/root/.cache:/root/.cache']
DEVICES = ['/dev/davinci%d' % i for i in range(4)] + ['/dev/davinci_manager', '/dev/devmm_svm', '/dev/hisi_hdc']
TEMPLATE_DOC = {
    'Image': 'sha256:0123', 'Config': {'Image': 'quay.io/ascend/vllm-ascend:v0.22.1rc1'},
    'HostConfig': {'Binds': BINDS, 'ShmSize': 1024 ** 3,
                   'Devices': [{'PathOnHost': d, 'PathInContainer': d, 'CgroupPermissions': 'rwm'} for d in DEVICES]},
}


def docker_now(offset=0.0):
    """A docker timestamp (RFC 3339, nanoseconds, UTC) ``offset`` seconds from now."""
    t = time.time() + offset
    return time.strftime('%Y-%m-%dT%H:%M:%S', time.gmtime(t)) + ('.%09dZ' % int((t % 1) * 1e9))


def container_doc(status='running', exit_code=0, restarts=0, started=None, env=(), label=None):
    return {'State': {'Status': status, 'Running': status in ('running', 'restarting'), 'Pid': 77 if status ==
                      'running' else 0, 'ExitCode': exit_code, 'StartedAt': started or docker_now(-1.0)},
            'RestartCount': restarts, 'HostConfig': {'RestartPolicy': {'Name': 'on-failure', 'MaximumRetryCount': 5}},
            # The labels docker_container gives a service container (ownership: MANAGED_LABEL).
            'Config': {'Env': list(env), 'Labels': dict({_service.MANAGED_LABEL: '1'},
                                                        **({_service.SPEC_LABEL: label} if label else {}))}}


class NoModule(object):
    def get_bin_path(self, name, required=False, opt_dirs=None):
        return None


class FakeDocker(_service.DockerBackend):
    """DockerBackend with `docker inspect` / `docker logs` answered from memory; any other docker call is an error."""

    def __init__(self, module, containers=None):
        super(FakeDocker, self).__init__(module or NoModule(), TEMPLATE)
        self.containers = dict(containers or {})
        self.containers.setdefault(TEMPLATE, TEMPLATE_DOC)

    def inspect(self, name):
        return self.containers.get(name)

    def run(self, argv, env=None, check=True):
        if argv[1] == 'logs':
            return 0, 'INFO starting\nValueError: Unsupported connector type: NoSuchConnector\n', ''
        raise AssertionError('the backend ran %s; only docker_container may change containers' % argv)
