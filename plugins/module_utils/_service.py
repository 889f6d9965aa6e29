# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The lifecycle engine of the collection's long-running services (``mooncake_master``, ``vllm_server``).

The collection does not supervise processes itself. A service is either

- a **systemd unit** on the host (``SystemdBackend``): ``/etc/systemd/system/<unit>.service`` written by the
  collection, ``Restart=on-failure`` with a bounded restart rate, enabled at boot, ordered after the network,
  logging to the journal, stopped through its cgroup; secrets in an ``EnvironmentFile=`` of mode 0600; or
- **its own container** (``DockerBackend``) made from the image of the node's vllm-ascend container (the
  *template*: its image, mounts, shared memory and device nodes), host network, a restart policy. The container
  itself is created, recreated, started and removed by ``community.docker.docker_container``, which the modules'
  action plugins (``plugins/action/``, on the controller) run between two calls of the module: the module renders
  the container's ``docker_container`` arguments (step ``render``), then runs the
  health gate and reads ``docker logs`` of a failed start (step ``gate``). Here the backend only reads
  (``docker inspect``, ``docker ps``, ``docker logs``); a stop or removal it is asked for is handed back to the
  action plugin as a ``docker_container`` call (``container_ops``).

``SystemdLifecycle`` and ``ContainerLifecycle`` are the one state machine per backend (check, plan, stop / apply /
gate_running, gate, peers, fail_start) every service module runs through ``ensure``; each module keeps only its own
argv and environment, health checks and documentation. The machines raise ServiceError (with the result fields a
failed task still returns) and return the result: only a module's ``main()`` calls ``exit_json`` / ``fail_json``.

The decision is a pure function (``decide``) of the wanted state, whether the written definition equals the wanted
one, and the service's status, so it is unit-tested without systemd. ``render_unit`` and ``parse_show`` are pure
too.

Commands run as argv lists through ``run_command`` with ``LANG=C``, each under coreutils ``timeout -s KILL N``
(``run_bounded``): ``run_command`` has no deadline of its own, and a ``systemctl`` whose bus does not answer or a
``docker`` whose daemon hangs would hold the task for ever. N is ``command_deadline``: COMMAND_TIMEOUT (120 s) for
a command that waits for nothing, ``2 * stop_timeout + 30`` (at least 120) for one that waits for a service to stop
(``systemctl stop`` / ``restart``: systemd waits up to ``TimeoutStopSec`` after SIGTERM and again after SIGKILL).
A command killed there is a ``CommandTimeout`` (a ReadError: its outcome is unknown, never an answer). Without
``timeout`` on the host nothing is run (a ServiceError naming it): coreutils is on every target, and a command
without a deadline is what this rule forbids. ``systemctl`` is called directly rather than
through ``ansible.builtin.systemd_service``: a module cannot call another module, and the role-level alternative
(template + handler) would split one decision (the diff, the health gate, the journal tail of a failed start)
across tasks.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import calendar
import errno
import glob
import hashlib
import json
import os
import re
import stat
import time

from ansible_collections.ascend.kvpool.plugins.module_utils import _validate
from ansible_collections.ascend.kvpool.plugins.module_utils._errors import KvpoolError
from ansible_collections.ascend.kvpool.plugins.module_utils._proc import (
    parse_cmdline,
    stat_fields,
    tail_text,
    wait_until,
)
from ansible_collections.ascend.kvpool.plugins.module_utils._secrets import mask_argv, mask_text, split_env

C_LOCALE = {'LANG': 'C', 'LC_ALL': 'C'}
UNIT_DIR = '/etc/systemd/system'
WANTED_BY = 'multi-user.target'
SECRET_DIR = '/etc/ascend-kvpool/secrets'
UNIT_RE = re.compile(r'^[A-Za-z0-9][A-Za-z0-9_.-]{0,100}$')
HEADER = '# Written by ascend.kvpool (module %s). Changes are overwritten by the next run.\n'
# The first words of HEADER: a unit or secret file that starts with them is the collection's (ownership).
OWN_MARK = '# Written by ascend.kvpool '
SHOW_PROPERTIES = ('LoadState', 'ActiveState', 'SubState', 'MainPID', 'NRestarts', 'Result', 'UnitFileState',
                   'ExecMainStartTimestampMonotonic', 'ExecMainStatus', 'FragmentPath')
# The deadline (seconds) of an external command that waits for no service (systemctl show / daemon-reload,
# journalctl, docker inspect / ps / logs): far above what a working tool takes, far below "for ever".
COMMAND_TIMEOUT = 120
# Added to twice the stop timeout for a command that waits for a service to stop (systemctl stop / restart).
STOP_MARGIN = 30
# systemd's DefaultTimeoutStopSec, what a transient unit (systemd-run without TimeoutStopSec=) waits when stopped.
TRANSIENT_STOP_TIMEOUT = 90
# States in which the service manager still brings the service (back) up by itself.
ALIVE_STATES = ('active', 'activating', 'reloading', 'running', 'restarting')


class ServiceError(KvpoolError):
    """A service operation failed; the message is meant for the operator (a module's ``main()`` fails the task
    with it, and with the result fields it carries)."""


class ReadError(ServiceError):
    """A tool's state could not be read (``systemctl show``, ``docker inspect`` failed): never taken as an answer,
    in check mode neither."""


class CommandTimeout(ReadError):
    """An external command killed at its deadline (``run_bounded``): what it answered or changed is unknown, so it
    is never taken as an answer (not "not running", not "no container", not "stopped")."""


class ServiceSpec(object):
    """What one service is: its unit name, command line, environment and restart policy."""

    def __init__(self, unit, description, argv, env=None, secret_env=None, after=(), owner='ascend.kvpool',
                 stop_timeout=60, restart_sec=1, start_limit_burst=5, start_limit_interval=60, devices=None,
                 port=None):
        if not UNIT_RE.match(unit or ''):
            raise ServiceError('%r is not a valid unit name' % unit)
        self.unit = unit
        self.description = description
        self.argv = [str(a) for a in argv]
        # A variable whose name says it holds a secret (HF_TOKEN, *_API_KEY, *PASSWORD*) goes into the 0600
        # EnvironmentFile= with the module's own secrets, never into the world-readable unit or a diff.
        plain, secret = split_env(dict((str(k), str(v)) for k, v in (env or {}).items()))
        self.env = plain
        self.secret_env = dict((k, v) for k, v in dict(secret, **dict(
            (str(k), str(v)) for k, v in (secret_env or {}).items())).items() if v)
        self.after = list(after)
        self.owner = owner
        self.stop_timeout = float(stop_timeout)
        self.restart_sec = float(restart_sec)
        self.start_limit_burst = int(start_limit_burst)
        self.start_limit_interval = int(start_limit_interval)
        self.devices = devices  # container mode: NPU ids whose /dev/davinci<N> the service gets (None: all)
        self.port = port


def unit_argument_spec():
    """The argument spec of the options every service module shares, as the doc fragment ``ascend.kvpool.service``
    (``UNIT``) documents them: the journal lines of a failed start and systemd's restart limit."""
    return dict(
        log_lines=dict(type='int', default=40),
        restart_limit_burst=dict(type='int', default=5),
        restart_limit_interval=dict(type='int', default=60),
    )


def check_service_params(params):
    """The options every service module shares (the doc fragment ``ascend.kvpool.service`` and the timeouts):
    finite timeouts above 0 (NaN or infinity would never end, or end at once; systemd reads a ``TimeoutStopSec``
    of 0 as no timeout at all), restart limits of at least 1. Raises KvpoolError naming the option and value."""
    for key in ('ready_timeout', 'poll_interval', 'stop_timeout'):
        _validate.number_range(params[key], key, above=0, why='seconds')
    _validate.int_range(params['log_lines'], 'log_lines', 0, 100000)
    _validate.int_range(params['restart_limit_burst'], 'restart_limit_burst', 1, None,
                        'starts in restart_limit_interval')
    _validate.int_range(params['restart_limit_interval'], 'restart_limit_interval', 1, None, 'seconds')


# --- pure helpers ------------------------------------------------------------------------------------------------

def systemd_quote(arg):
    """One ExecStart= word: double-quoted, with backslash, quote, ``%`` specifiers and ``$`` expansion escaped."""
    text = str(arg).replace('\\', '\\\\').replace('"', '\\"').replace('\n', '\\n')
    return '"%s"' % text.replace('%', '%%').replace('$', '$$')


def env_assignment(name, value):
    """One Environment= assignment (``$`` is not expanded there, ``%`` specifiers are)."""
    text = ('%s=%s' % (name, value)).replace('\\', '\\\\').replace('"', '\\"').replace('\n', '\\n')
    return '"%s"' % text.replace('%', '%%')


def secret_file(spec):
    return '%s/%s.env' % (SECRET_DIR, spec.unit)


def render_unit(spec):
    """The unit file text of a service (secrets are never in it: they are in ``secret_file``)."""
    after = ['network-online.target'] + ['%s.service' % a for a in spec.after]
    lines = [
        HEADER % spec.owner.rstrip(),
        '[Unit]',
        'Description=%s' % spec.description,
        'Wants=network-online.target',
        'After=%s' % ' '.join(after),
        # At most start_limit_burst starts in start_limit_interval seconds, then the unit stays failed.
        'StartLimitIntervalSec=%d' % spec.start_limit_interval,
        'StartLimitBurst=%d' % spec.start_limit_burst,
        '',
        '[Service]',
        'Type=simple',
        # One word per line (systemd joins lines ending in a backslash), so a diff shows one flag per line.
        'ExecStart=%s' % ' \\\n    '.join(systemd_quote(a) for a in spec.argv),
    ]
    lines.extend('Environment=%s' % env_assignment(k, v) for k, v in sorted(spec.env.items()))
    if spec.secret_env:
        lines.append('EnvironmentFile=%s' % secret_file(spec))
    lines.extend([
        'WorkingDirectory=/',
        'Restart=on-failure',
        'RestartSec=%s' % _num(spec.restart_sec),
        'KillMode=control-group',
        'TimeoutStopSec=%s' % _num(spec.stop_timeout),
        'StandardOutput=journal',
        'StandardError=journal',
        'SyslogIdentifier=%s' % spec.unit,
        '',
        '[Install]',
        'WantedBy=%s' % WANTED_BY,
    ])
    return '\n'.join(lines) + '\n'


def render_secret_env(secret_env):
    """The EnvironmentFile= text of the secrets (``NAME=value`` lines), or None when there is none."""
    if not secret_env:
        return None
    return ''.join('%s=%s\n' % (k, v.replace('\n', ' ')) for k, v in sorted(secret_env.items()))


def _num(value):
    value = float(value)
    return str(int(value)) if value == int(value) else ('%g' % value)


def parse_show(text):
    """``systemctl show -p A -p B UNIT`` output as a dict (values as strings)."""
    out = {}
    for line in (text or '').splitlines():
        key, sep, value = line.partition('=')
        if sep:
            out[key.strip()] = value.strip()
    return out


def status_from_show(props):
    """The engine's status dict from ``systemctl show`` properties."""
    load = props.get('LoadState') or 'not-found'
    active = props.get('ActiveState') or 'inactive'
    sub = props.get('SubState') or ''
    state = active
    if active == 'activating' and sub == 'auto-restart':
        state = 'restarting'
    return {
        'exists': load not in ('not-found', ''),
        'state': state,
        'detail': '%s/%s' % (active, sub) if sub else active,
        'pid': _int(props.get('MainPID')) or None,
        'restarts': _int(props.get('NRestarts')),
        'result': props.get('Result') or '',
        'enabled': props.get('UnitFileState') == 'enabled',
        'started_mono': _int(props.get('ExecMainStartTimestampMonotonic')) / 1e6 or None,
        'fragment': props.get('FragmentPath') or '',
    }


def status_from_inspect(doc):
    """The engine's status dict from ``docker inspect`` of a service container (None: no such container)."""
    if not doc:
        return {'exists': False, 'state': 'inactive', 'detail': 'no container', 'pid': None, 'restarts': 0,
                'result': '', 'enabled': False, 'started_mono': None}
    st = doc.get('State') or {}
    status = st.get('Status') or 'exited'
    state = {'running': 'active', 'restarting': 'restarting', 'created': 'inactive', 'paused': 'active'}.get(
        status, 'failed' if st.get('ExitCode') else 'inactive')
    return {
        'exists': True,
        'state': state,
        'detail': '%s (exit code %s)' % (status, st.get('ExitCode')) if status != 'running' else status,
        'pid': st.get('Pid') or None,
        'restarts': _int(doc.get('RestartCount')),
        'result': 'exit-code' if st.get('ExitCode') else '',
        'enabled': ((doc.get('HostConfig') or {}).get('RestartPolicy') or {}).get('Name') not in (None, '', 'no'),
        'started_at': st.get('StartedAt'),
        'started_mono': None,
    }


_DOCKER_TIME = re.compile(r'^(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$')


def docker_time(text):
    """Epoch seconds of a docker timestamp (``2026-12-02T02:33:09.123456789Z``); None for docker's zero time."""
    m = _DOCKER_TIME.match((text or '').strip())
    if not m or m.group(1) == '0001':
        return None
    year, month, day, hour, minute, sec = (int(g) for g in m.groups()[:6])
    epoch = calendar.timegm((year, month, day, hour, minute, sec, 0, 0, 0)) + float('0.' + (m.group(7) or '0'))
    zone = m.group(8)
    if zone != 'Z':
        offset = int(zone[1:3]) * 3600 + int(zone[4:6]) * 60
        epoch -= offset if zone[0] == '+' else -offset
    return epoch


def _int(value):
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def decide(state, same, status):
    """(action, reason) for the wanted ``state`` (started, stopped, restarted).

    ``same``: the written definition equals the wanted one; ``status``: from ``status_from_*``. Actions: none,
    started, restarted, stopped, wait (the definition is right and the service is up or coming back: only the
    health gate decides).
    """
    alive = status['state'] in ALIVE_STATES
    if state == 'stopped':
        if alive or status['exists']:
            return 'stopped', ('running (%s)' % status['detail']) if alive else 'defined, not running'
        return 'none', 'not running'
    if not status['exists']:
        return 'started', 'never started here'
    if not same:
        return ('restarted' if alive else 'started'), 'settings changed'
    if state == 'restarted':
        return ('restarted', 'state=restarted') if alive else ('started', 'not running')
    if alive:
        return 'wait', 'running with the same settings'
    if status['state'] == 'failed':
        return 'started', 'failed (%s, %d restart(s))' % (status['result'] or status['detail'], status['restarts'])
    return 'started', 'not running (%s)' % status['detail']


def masked_secrets(secret_text, other=None):
    """Diff lines of the secret environment: names only, ``<secret>`` or ``<secret, changed>``."""
    names = sorted(_env_names(secret_text))
    changed = other is not None and (secret_text or '') != (other or '')
    return ''.join('# %s %s=<secret%s>\n' % ('EnvironmentFile', n, ', changed' if changed else '') for n in names)


def _env_names(text):
    return [line.partition('=')[0] for line in (text or '').splitlines() if '=' in line]


def fingerprint(text, secret_text):
    """sha256 of the definition; the secrets enter only as their presence (the digest cannot test guesses)."""
    names = ('\n# secrets: %s' % ','.join(sorted(_env_names(secret_text)))) if secret_text else ''
    return hashlib.sha256((text + names).encode('utf-8')).hexdigest()


def container_spec_text(spec, template):
    """The displayable definition of a service container (the secret values left out)."""
    doc = {
        'image': template['image'],
        'command': spec.argv,
        'env': spec.env,
        'secret_env': sorted(spec.secret_env),
        'network': 'host',
        'restart': 'on-failure:%d' % spec.start_limit_burst,
        'init': True,
        'shm_size': template.get('shm_size') or 0,
        'mounts': template.get('binds') or [],
        'devices': service_devices(template.get('devices') or [], spec.devices),
    }
    return json.dumps(doc, indent=1, sort_keys=True) + '\n'


_DAVINCI = re.compile(r'/davinci(\d+)$')


SPEC_LABEL = 'ascend.kvpool.spec'
# The label of the pool probe's transient containers, and the start of its transient units' Description: what
# proves a container or unit of a probe's name is the collection's before it is stopped or removed.
PROBE_LABEL = 'ascend.kvpool.probe'
PROBE_DESCRIPTION = 'ascend.kvpool probe client'
MANAGED_LABEL = 'ascend.kvpool.managed'
# The node's vllm-ascend container (role vllm_ascend_container) carries MANAGED_LABEL with this value: a container of
# the collection (`docker ps --filter label=ascend.kvpool.managed` lists them all), but never a service container
# (those carry MANAGED_LABEL=1, which DockerBackend.owned and list_units look for), so no service module takes it.
NODE_CONTAINER_MANAGED = 'vllm_ascend_container'


def node_container_problem(info, name, host=None, adopt=False, state='started'):
    """'' when role vllm_ascend_container may create, recreate (``state`` started) or remove (absent) the container
    ``name``; else the message of the failure, naming the host, the container, what it is and the fix.

    ``info``: the registered result of ``community.docker.docker_container_info`` (``exists``; ``container``, docker
    inspect's document). May: docker knows no container of that name; the one there carries
    ``MANAGED_LABEL=NODE_CONTAINER_MANAGED`` (the role made it); or ``adopt`` (the operator says the role made it,
    before it had the label: it is recreated with the label). Never: a read that failed or did not run (whether a
    container is there is unknown; never "none"), or a service container of the collection (``MANAGED_LABEL=1`` or
    SPEC_LABEL), ``adopt`` or not. Pure; the role's assert fails with the message, in check mode too."""
    on = ('%s: ' % host) if host else ''
    name = str(name or '')
    if not isinstance(info, dict) or info.get('failed') or info.get('skipped') or \
            not isinstance(info.get('exists'), bool):
        said = repr(info)[:200]
        if isinstance(info, dict):
            said = info.get('msg') or ('skipped' if info.get('skipped') else said)
        return ('%sthe read of container %s (community.docker.docker_container_info) gave no answer (%s), so whether '
                'a container of that name is there is unknown and nothing was changed. Fix: check that the docker '
                'daemon runs on %s and run again' % (on, name, said, host or 'the node'))
    if not info['exists']:
        return ''
    doc = info.get('container') if isinstance(info.get('container'), dict) else {}
    config = doc.get('Config') if isinstance(doc.get('Config'), dict) else {}
    labels = config.get('Labels') if isinstance(config.get('Labels'), dict) else {}
    managed = labels.get(MANAGED_LABEL)
    if managed == NODE_CONTAINER_MANAGED:
        return ''
    verb = 'removed' if state == 'absent' else 'recreated or removed'
    if managed == '1' or SPEC_LABEL in labels:
        return ('%scontainer %s is a service container of ascend.kvpool (label %s=%s), not the node\'s vllm-ascend '
                'container, so it is not %s as one and nothing was changed. Fix: set vllm_ascend_container_name to '
                'another name (the service containers are kvpool-mooncake-master and kvpool-vllm-<name>)'
                % (on, name, MANAGED_LABEL, managed or '1', verb))
    if adopt:
        return ''
    return ('%scontainer %s exists but was not made by role ascend.kvpool.vllm_ascend_container (no label %s=%s%s), '
            'so it is not %s and nothing was changed. Fix: if it is yours, rename it (docker rename %s <other>) or '
            'remove it yourself (docker rm -f %s), or set vllm_ascend_container_name to another name; if an earlier '
            'release of this role made it (before the label), run once with vllm_ascend_container_adopt=true, which '
            '%s' % (on, name, MANAGED_LABEL, NODE_CONTAINER_MANAGED,
                    (', it has %s=%s' % (MANAGED_LABEL, managed)) if managed is not None else '', verb, name, name,
                    'removes it' if state == 'absent' else 'recreates it with the label'))


def container_module_args(spec, template, text):
    """The ``community.docker.docker_container`` arguments of a service container (its secrets by name only).

    ``text``: ``container_spec_text`` of the service, kept as a label so the next run can show what changed. The
    action plugin fills the secrets' values into ``env`` (from the task's no_log options) and runs the module.
    Removing a device, mount, variable or label recreates the container too (``strict``; the default only
    notices additions).
    """
    args = {
        'name': spec.unit,
        'image': template['image'],
        'pull': 'never',  # the template's image, which is on the node since the template runs it
        'state': 'started',
        'detach': True,
        'command_handling': 'correct',
        'entrypoint': spec.argv[:1],
        'command': spec.argv[1:],
        'network_mode': 'host',
        'init': True,
        'restart_policy': 'on-failure',
        'restart_retries': spec.start_limit_burst,
        'stop_timeout': int(spec.stop_timeout),
        'volumes': list(template.get('binds') or []),
        'devices': service_devices(template.get('devices') or [], spec.devices),
        'env': dict(spec.env),
        'labels': {SPEC_LABEL: text, MANAGED_LABEL: '1'},
        'comparisons': {'devices': 'strict', 'volumes': 'strict', 'env': 'strict', 'labels': 'strict'},
    }
    if template.get('shm_size'):
        args['shm_size'] = str(int(template['shm_size']))
    return args, sorted(spec.secret_env)


def service_devices(devices, npus):
    """The template's device mappings a service gets: the control devices, and only its own NPUs' davinci<N>."""
    kept = []
    for dev in devices:
        parts = dev.split(':')
        m = _DAVINCI.search(parts[1] if len(parts) > 1 else parts[0])  # the NPU the container sees
        if m and npus is not None and int(m.group(1)) not in npus:
            continue
        kept.append(dev)
    return kept


# --- backends --------------------------------------------------------------------------------------------------------

def command_deadline(wait=0, floor=COMMAND_TIMEOUT, margin=STOP_MARGIN):
    """N of ``timeout -s KILL N`` for a command that may legitimately wait ``wait`` seconds for a service to stop
    (its ``stop_timeout``, systemd's ``TimeoutStopSec``; 0 for one that waits for nothing): ``floor`` (120 s) for
    one that waits for nothing, else ``max(floor, 2 * wait + margin)`` (margin: 30 s). systemd waits
    ``TimeoutStopSec`` after SIGTERM and, when the cgroup is not empty then, up to as long again after SIGKILL."""
    wait = float(wait or 0)
    return max(float(floor), 2 * wait + float(margin)) if wait > 0 else float(floor)


def shown_command(argv, limit=200):
    """A command line for a message: the tool's name (not its path) and its arguments, secrets masked, cut."""
    words = mask_argv([str(a) for a in argv]) or []
    if words:
        words[0] = os.path.basename(words[0]) or words[0]
    text = ' '.join(words)
    return text if len(text) <= limit else text[:limit] + '...'


def run_bounded(module, argv, seconds, environ=None, why=''):
    """(rc, stdout, stderr) of ``argv`` run by ``module.run_command`` under coreutils ``timeout -s KILL seconds``
    with ``LANG=C`` (``environ`` added).

    ``timeout`` kills the command's whole process group at the deadline (itself included, hence rc -9, or 137 /
    124 through a shell). A command killed there (that rc, after ``seconds``) raises CommandTimeout naming the
    command, the host's tool and the bound; a command that exits on its own, whatever its rc, is returned. Without
    ``timeout`` on the host (coreutils) nothing is run: a ServiceError naming it, never a command without a
    deadline. ``why``: how the bound was chosen, added to the message."""
    argv = [str(a) for a in argv]
    timeout = module.get_bin_path('timeout')
    if not timeout:
        raise ServiceError('timeout (GNU coreutils) was not found on this host, so `%s` was not run: the collection '
                           'runs no command without a deadline. Fix: install coreutils on the node (it provides '
                           '/usr/bin/timeout)' % shown_command(argv))
    env = dict(C_LOCALE)
    env.update(environ or {})
    started = time.monotonic()
    rc, out, err = module.run_command([timeout, '-s', 'KILL', _num(seconds)] + argv, environ_update=env,
                                      expand_user_and_vars=False)
    if rc in (-9, 124, 137) and time.monotonic() - started >= float(seconds) - 0.05:
        raise CommandTimeout(
            '`%s` (%s on this host) did not finish within %s s and was killed (timeout -s KILL %s%s), so what it '
            'would have answered or done is unknown: it is not taken as an answer and nothing after it was done. '
            'Fix: run `%s` by hand on the node to see what it waits for (%s)'
            % (shown_command(argv), argv[0], _num(seconds), _num(seconds), ('; %s' % why) if why else '',
               shown_command(argv), 'the docker daemon, which must run and answer' if 'docker' in
               os.path.basename(argv[0]) else 'systemd and its bus, which must run and answer'))
    return rc, out, err


class _Backend(object):
    """What both backends share: argv lists through run_command with LANG=C, each under a deadline
    (``run_bounded``): ``command_timeout`` seconds for a command that waits for nothing, more for one that waits
    for a service to stop (``command_deadline``). ``command_timeout`` and ``stop_margin`` are COMMAND_TIMEOUT and
    STOP_MARGIN; tests lower them."""

    command_timeout = COMMAND_TIMEOUT
    stop_margin = STOP_MARGIN

    def __init__(self, module):
        self.module = module

    def run(self, argv, env=None, check=True, wait=0):
        """(rc, stdout, stderr); ``wait``: the seconds the command may wait for a service to stop (its
        ``stop_timeout``), which lengthens its deadline. A command killed at its deadline raises CommandTimeout,
        with ``check=False`` too; otherwise ``check`` raises ServiceError on a non-zero rc."""
        argv = [str(a) for a in argv]
        bound = command_deadline(wait, self.command_timeout, self.stop_margin)
        why = ('at least %s s, and twice the stop timeout of %s s plus %s s' % (
            _num(self.command_timeout), _num(wait), _num(self.stop_margin))) if wait else ''
        rc, out, err = run_bounded(self.module, argv, bound, env, why)
        if check and rc != 0:
            raise ServiceError('%s failed (rc %s): %s' % (' '.join(argv[:3]), rc, (err or out).strip()))
        return rc, out, err

    def log_text(self, argv, join=False):
        """What a log command (``journalctl``, ``docker logs``) printed, shown after a failed start (``join``: its
        stdout and stderr together, else stdout, or stderr when it failed). A log command killed at its deadline gives
        the message of its CommandTimeout instead: the failed start stays the error, and no line is made up."""
        try:
            rc, out, err = self.run(argv, check=False)
        except CommandTimeout as exc:
            return '(no log lines: %s)\n' % exc
        if join:
            return (out or '') + (err or '')
        return out if rc == 0 else err


class SystemdBackend(_Backend):
    """Units under /etc/systemd/system, driven with systemctl; logs in the journal."""

    kind = 'systemd'

    def __init__(self, module):
        super(SystemdBackend, self).__init__(module)
        self.systemctl = module.get_bin_path('systemctl')
        self.journalctl = module.get_bin_path('journalctl') or 'journalctl'

    def check(self):
        if not self.systemctl:
            raise ServiceError('systemctl not found: this host does not run systemd, which the collection needs to '
                               'run its services (or run them in containers, vllm_ascend_container_enabled: true)')

    def unit_path(self, spec):
        return '%s/%s.service' % (UNIT_DIR, spec.unit)

    def where(self, spec):
        return 'systemd unit %s.service' % spec.unit

    def unit_id(self, spec):
        return '%s.service' % spec.unit

    def logs_hint(self, spec):
        return 'journalctl -u %s' % spec.unit

    def render(self, spec):
        return render_unit(spec), render_secret_env(spec.secret_env)

    def current(self, spec):
        """(unit text, secret text without its header, status). Raises ServiceError when a file at the unit's or the
        secret file's path is not the collection's (ownership), when the unit is loaded from a file the collection
        did not write, and when ``systemctl show`` fails: its state unknown is never taken as "not running"."""
        path = self.unit_path(spec)
        text = read_text(path)
        check_owned(path, text, 'unit file', spec.unit)
        secret = read_secret(spec, text)
        unit = '%s.service' % spec.unit
        rc, out, err = self.run([self.systemctl, 'show', unit, '--no-pager']
                                + ['-p%s' % p for p in SHOW_PROPERTIES], check=False)
        props = parse_show(out) if rc == 0 else {}
        if rc != 0 or not props.get('LoadState') or not props.get('ActiveState'):
            said = ('rc %s: %s' % (rc, (err or out).strip()[:300])) if rc != 0 else \
                ('rc 0, but no LoadState and ActiveState in its answer %r' % (out or '')[:200])
            raise ReadError('systemctl show %s failed (%s), so whether %s runs is unknown and nothing was changed '
                            '(a failed read is never taken as "not running"). Fix: run `systemctl show %s` as root '
                            'on the node; systemd must run and its bus be reachable' % (unit, said, unit, unit))
        status = status_from_show(props)
        if text is None and status['exists'] and status['fragment'] not in ('', path):
            raise ServiceError('%s is loaded from %s, which ascend.kvpool did not write, so it is neither replaced, '
                               'started nor stopped here and nothing was changed. Fix: if that unit is yours, give '
                               'the collection\'s service another name (or stop yours and remove its unit file); a '
                               'collection unit is only ever %s' % (unit, status['fragment'], path))
        status['exists'] = status['exists'] and text is not None
        return text, secret, status

    def status(self, spec):
        return self.current(spec)[2]

    def apply(self, spec, text, secret, old_text, old_secret, restart):
        if secret is not None:
            write_file(secret_file(spec), (HEADER % spec.owner.rstrip()) + secret, 0o600, 'secret environment file',
                       dir_mode=0o700, option='the secrets directory')
        elif old_secret is not None:
            remove_file(secret_file(spec))
        # Enabled the way `systemctl enable` does it for WantedBy= (the link in the target's .wants directory),
        # without the daemon-reload enable runs on its own: one reload per changed unit, none for an unchanged one.
        linked = self.enable_link(spec)
        if text != old_text:
            write_file(self.unit_path(spec), text, 0o644, 'unit file')
        if text != old_text or linked:
            self.run([self.systemctl, 'daemon-reload'])
        self.run([self.systemctl, 'reset-failed', '%s.service' % spec.unit], check=False)
        # A restart (and a start of a unit still stopping) waits for the stop: up to TimeoutStopSec.
        self.run([self.systemctl, 'restart' if restart else 'start', '%s.service' % spec.unit], wait=spec.stop_timeout)

    def stop(self, spec, remove=True):
        """Stop the unit, then (``remove``) remove its unit file, enable link and secret file. A stop that failed
        while the unit still runs raises ServiceError before anything is removed (never "stopped" with the process
        serving and its files gone)."""
        unit = '%s.service' % spec.unit
        rc, out, err = self.run([self.systemctl, 'stop', unit], check=False, wait=spec.stop_timeout)
        self.require_stopped(unit, rc, (err or out).strip(),
                             'its unit file, enable link and secret file were kept' if remove else
                             'its enable link was kept')
        if remove:
            removed = remove_link(self.wants_path(spec)) | remove_file(self.unit_path(spec)) | \
                remove_file(secret_file(spec))
            if removed:
                self.run([self.systemctl, 'daemon-reload'])
            self.run([self.systemctl, 'reset-failed', unit], check=False)
        elif remove_link(self.wants_path(spec)):
            self.run([self.systemctl, 'daemon-reload'])

    def require_stopped(self, unit, rc, said, kept):
        """After ``systemctl stop unit`` exited ``rc``: nothing when it succeeded, or when the unit is inactive anyway
        (read again: a unit that was not loaded); otherwise a ServiceError naming the unit, what systemd said,
        ``kept`` (what was left in place) and the fix."""
        if rc == 0:
            return
        rc2, out, err = self.run([self.systemctl, 'show', unit, '-pActiveState', '--no-pager'], check=False)
        state = parse_show(out).get('ActiveState') if rc2 == 0 else None
        if state in ('inactive', 'failed'):
            return
        now = ('%s is still %s' % (unit, state)) if state else \
            ('the state of %s could not be read (systemctl show: rc %s: %s)' % (unit, rc2, (err or out).strip()[:200]))
        raise ServiceError('`systemctl stop %s` failed (rc %s: %s) and %s, so it was not stopped and %s. Fix: stop '
                           'it as root on the node (`systemctl stop %s`: what systemd said above tells why it '
                           'refused, for example a polkit rule or RefuseManualStop=), then run the task again'
                           % (unit, rc, said[:300], now, kept, unit))

    def wants_path(self, spec):
        return '%s/%s.wants/%s.service' % (UNIT_DIR, WANTED_BY, spec.unit)

    def enable_link(self, spec):
        """The link `systemctl enable` makes for WantedBy=; True when it was (re)made."""
        link, target = self.wants_path(spec), self.unit_path(spec)
        if os.path.islink(link) and os.readlink(link) == target:
            return False
        _validate.directory(os.path.dirname(link), 'the directory of the unit\'s enable link', create=True,
                            writable=True, system_ok=True)
        remove_link(link)
        try:
            os.symlink(target, link)
        except OSError as exc:
            raise ServiceError('cannot enable %s (link %s): %s' % (target, link, _validate.os_reason(exc, link))) \
                from exc
        return True

    def logs(self, spec, lines):
        return self.log_text([self.journalctl, '-u', spec.unit, '-n', str(int(lines)), '--no-pager', '-o', 'cat'])

    def list_units(self, prefix):
        """Names (without .service) of the unit files under UNIT_DIR that start with ``prefix``; a directory that
        cannot be read is a ServiceError (never "no unit")."""
        try:
            names = os.listdir(UNIT_DIR)
        except OSError as exc:
            if exc.errno == errno.ENOENT:
                return []
            raise ServiceError('cannot list the unit directory %s: %s, so the units of the collection there are '
                               'unknown' % (UNIT_DIR, _validate.os_reason(exc, UNIT_DIR))) from exc
        return sorted(n[:-len('.service')] for n in names if n.startswith(prefix) and n.endswith('.service'))

    # transient units (the pool probe's clients)
    def run_transient(self, name, argv, max_seconds, mounts=()):
        self.transient_state(name)  # a unit of that name that is not ours is refused, never reset
        self.run([self.systemctl, 'reset-failed', '%s.service' % name], check=False)
        systemd_run = self.module.get_bin_path('systemd-run')
        if not systemd_run:
            raise ServiceError('systemd-run not found on this host, so the client %s was not started. Fix: install '
                               'systemd (it provides systemd-run), or run the services in containers '
                               '(vllm_ascend_container_enabled: true)' % name)
        self.run([systemd_run, '--unit', name, '--collect', '--quiet',
                  '--description', '%s %s' % (PROBE_DESCRIPTION, name),
                  '--property', 'RuntimeMaxSec=%d' % max(1, int(max_seconds)), '--property', 'KillMode=control-group',
                  '--'] + list(argv))

    def transient_state(self, name):
        """The ActiveState of the transient unit ``name``: 'inactive' when no such unit is loaded (nothing to do).
        A failed read is a ReadError (never "it has ended"); a loaded unit whose Description is not the one
        ``run_transient`` gives (PROBE_DESCRIPTION) is a ServiceError: it is not the collection's, and is neither
        stopped nor reset."""
        unit = '%s.service' % name
        rc, out, err = self.run([self.systemctl, 'show', unit, '-pLoadState', '-pActiveState', '-pDescription',
                                 '--no-pager'], check=False)
        props = parse_show(out) if rc == 0 else {}
        state = props.get('ActiveState')
        if not state:  # a failed read is never "it has ended"
            raise ReadError('systemctl show %s failed (rc %s: %s), so whether it runs is unknown. Fix: '
                            'run `systemctl show %s` as root on the node; systemd must run and its bus be '
                            'reachable' % (unit, rc, (err or out).strip()[:300], unit))
        if props.get('LoadState') in ('not-found', '') and state == 'inactive':
            return state
        if not props.get('Description', '').startswith(PROBE_DESCRIPTION):
            raise ServiceError('%s exists but is not a probe unit of ascend.kvpool (its Description is %r, not '
                               '"%s ..."), so it is neither stopped, reset nor replaced and nothing was changed. '
                               'Fix: if it is yours, stop it yourself (`systemctl stop %s`) or give the probe '
                               'another key; the collection only touches the units it started'
                               % (unit, props.get('Description', '')[:120], PROBE_DESCRIPTION, unit))
        return state

    def transient_alive(self, name):
        return self.transient_state(name) in ('active', 'activating', 'deactivating', 'reloading')

    def stop_transient(self, name):
        """Stop the collection's transient unit ``name`` (nothing when there is none). Raises ServiceError when it
        is not ours, and when the stop failed while it still runs (never "nothing left behind")."""
        if self.transient_state(name) in ('inactive', 'failed'):
            return
        unit = '%s.service' % name
        rc, out, err = self.run([self.systemctl, 'stop', unit], check=False, wait=TRANSIENT_STOP_TIMEOUT)
        self.require_stopped(unit, rc, (err or out).strip(), 'it was left as it is')

    def transient_logs(self, name, lines=20):
        return self.log_text([self.journalctl, '-u', name, '-n', str(lines), '--no-pager', '-o', 'cat'], )


class DockerBackend(_Backend):
    """One container per service from the image of the node's vllm-ascend container (the template).

    It only reads (``docker inspect``, ``ps``, ``logs``). Creating, recreating, starting, stopping and removing a
    service container is ``community.docker.docker_container``'s, run by the modules' action plugins: ``stop``
    records the call in ``ops`` (docker_container arguments), which the engine returns as ``container_ops``.
    """

    kind = 'docker'
    LABEL = SPEC_LABEL

    def __init__(self, module, template):
        super(DockerBackend, self).__init__(module)
        self.template_name = template
        self.docker = module.get_bin_path('docker') or 'docker'
        self._template = None
        self.ops = []

    def inspect(self, name):
        """``docker inspect`` of ``name``; None only when docker says there is no such container. Any other failure
        (the daemon not reachable, an answer that is not docker's) is a ServiceError, never "no container"."""
        rc, out, err = self.run([self.docker, 'inspect', name], check=False)
        if rc != 0:
            if 'no such object' in (err or '').lower() or 'no such container' in (err or '').lower():
                return None
            raise ReadError('docker inspect %s failed (rc %s: %s), so whether the container exists is unknown and '
                            'nothing was changed. Fix: run `docker inspect %s` on the node; the docker daemon must '
                            'run and be reachable' % (name, rc, (err or out).strip()[:300], name))
        try:
            docs = json.loads(out)
        except ValueError:
            docs = None
        if not isinstance(docs, list) or not all(isinstance(d, dict) for d in docs):
            raise ReadError('docker inspect %s answered %r, which is not docker\'s list of containers: nothing was '
                            'changed. Fix: check the docker command on the node' % (name, (out or '')[:200]))
        return docs[0] if docs else None

    def owned(self, name, doc):
        """``doc`` (``docker inspect``) when it is a container the collection made (its label), else ServiceError:
        a same-named container of someone else is never recreated, stopped or removed."""
        labels = ((doc or {}).get('Config') or {}).get('Labels') or {}
        # SPEC_LABEL alone: a service container of an earlier release (before MANAGED_LABEL).
        if doc and labels.get(MANAGED_LABEL) != '1' and SPEC_LABEL not in labels:
            raise ServiceError('container %s exists but was not made by ascend.kvpool (no label %s=1 or %s), so it '
                               'is neither recreated, stopped nor removed and nothing was changed. Fix: if it is '
                               'yours, rename it (docker rename %s <other>) or remove it yourself; the collection '
                               'makes its own' % (name, MANAGED_LABEL, SPEC_LABEL, name))
        return doc

    def check(self):
        self.template()

    def template(self):
        """Image, mounts, shared memory and devices of the node's vllm-ascend container."""
        if self._template is None:
            doc = self.inspect(self.template_name)
            if not doc:
                raise ServiceError('container %s not found: run the container phase first (role '
                                   'ascend.kvpool.vllm_ascend_container), whose image, mounts and devices the '
                                   'service containers take' % self.template_name)
            host = doc.get('HostConfig') or {}
            self._template = {
                'image': (doc.get('Config') or {}).get('Image') or doc.get('Image'),
                'binds': list(host.get('Binds') or []),
                'shm_size': host.get('ShmSize') or 0,
                'devices': ['%s:%s:%s' % (d.get('PathOnHost'), d.get('PathInContainer'),
                                          d.get('CgroupPermissions') or 'rwm') for d in host.get('Devices') or []],
            }
        return self._template

    def where(self, spec):
        return 'container %s' % spec.unit

    def unit_id(self, spec):
        return spec.unit

    def logs_hint(self, spec):
        return 'docker logs %s' % spec.unit

    def render(self, spec):
        return container_spec_text(spec, self.template()), render_secret_env(spec.secret_env)

    def current(self, spec):
        doc = self.owned(spec.unit, self.inspect(spec.unit))
        status = status_from_inspect(doc)
        if not doc:
            return None, None, status
        labels = (doc.get('Config') or {}).get('Labels') or {}
        text = labels.get(self.LABEL)
        env = dict(e.partition('=')[::2] for e in (doc.get('Config') or {}).get('Env') or [])
        try:
            names = json.loads(text).get('secret_env', []) if text else []
        except (ValueError, AttributeError):  # a spec label that is not our JSON: differs from the wanted one
            names = []
        if not isinstance(names, list):
            names = []
        secret = render_secret_env(dict((str(n), env.get(str(n), '')) for n in names))
        return text, secret, status

    def status(self, spec):
        doc = self.inspect(spec.unit)
        status = status_from_inspect(doc)
        started = docker_time(status.get('started_at'))
        if started and status['state'] in ALIVE_STATES:
            # The daemon's clock is this host's: the start as a point of this process's monotonic clock.
            status['started_mono'] = time.monotonic() - max(0.0, time.time() - started)
        return status

    def definition(self, spec, text):
        """(docker_container arguments, names of the secrets to fill in) of the service container."""
        return container_module_args(spec, self.template(), text)

    def stop(self, spec, remove=True):
        """Ask the action plugin to stop (``remove``: and remove) the container, when there is one."""
        if self.owned(spec.unit, self.inspect(spec.unit)) is None:
            return
        self.ops.append({'name': spec.unit, 'state': 'absent' if remove else 'stopped',
                         'stop_timeout': int(spec.stop_timeout)})

    def logs(self, spec, lines):
        return self.log_text([self.docker, 'logs', '--tail', str(int(lines)), spec.unit], join=True)

    def list_units(self, prefix):
        rc, out, err = self.run([self.docker, 'ps', '-a', '--filter', 'label=%s=1' % MANAGED_LABEL,
                                 '--format', '{{.Names}}'], check=False)
        if rc != 0:  # never "no container of the collection"
            raise ReadError('docker ps failed (rc %s: %s), so the collection\'s containers are unknown. Fix: run '
                            '`docker ps -a` on the node; the docker daemon must run and be reachable'
                            % (rc, (err or out).strip()[:300]))
        return sorted(n for n in out.split() if n.startswith(prefix))

    # transient containers (the pool probe's clients)
    def probe_owned(self, name):
        """``docker inspect`` of the transient container ``name`` (None: there is none, nothing to do); a container of
        that name without the label ``run_transient`` gives (PROBE_LABEL=1) is a ServiceError: it is neither
        stopped nor removed."""
        doc = self.inspect(name)
        if doc and ((doc.get('Config') or {}).get('Labels') or {}).get(PROBE_LABEL) != '1':
            raise ServiceError('container %s exists but is not a probe container of ascend.kvpool (no label %s=1), '
                               'so it is neither stopped nor removed and nothing was changed. Fix: if it is yours, '
                               'rename it (docker rename %s <other>) or remove it yourself, or give the probe another '
                               'key; the collection only touches the containers it started'
                               % (name, PROBE_LABEL, name))
        return doc

    def run_transient(self, name, argv, max_seconds, mounts=()):
        """A client in a container of its own; ``mounts``: host directories it shares at the same path. A container
        of that name left by an earlier probe is removed first; one that is not a probe container is refused."""
        tpl = self.template()
        if self.probe_owned(name) is not None:
            rc, out, err = self.run([self.docker, 'rm', '-f', name], check=False)
            if rc != 0 and 'no such container' not in (err or '').lower():
                raise ServiceError('docker rm -f %s failed (rc %s: %s): the probe container of an earlier run is in '
                                   'the way. Fix: remove it on the node (`docker rm -f %s`) and run the task again'
                                   % (name, rc, (err or out).strip()[:300], name))
        cmd = [self.docker, 'run', '-d', '--rm', '--name', name, '--network', 'host', '--init',
               '--label', '%s=1' % PROBE_LABEL]
        if tpl.get('shm_size'):
            cmd += ['--shm-size', str(tpl['shm_size'])]
        for bind in list(tpl.get('binds') or []) + ['%s:%s' % (m, m) for m in mounts]:
            cmd += ['-v', bind]
        cmd += ['--entrypoint', 'timeout', tpl['image'], '-s', 'KILL', str(max(1, int(max_seconds)))] + list(argv)
        self.run(cmd)

    def transient_alive(self, name):
        doc = self.probe_owned(name)
        return bool(doc and (doc.get('State') or {}).get('Running'))

    def stop_transient(self, name):
        """Stop the collection's transient container ``name`` (``--rm``: docker removes it); nothing when there is
        none. Raises ServiceError when it is not ours, and when the stop failed while it still runs."""
        doc = self.probe_owned(name)
        if not (doc and (doc.get('State') or {}).get('Running')):
            return
        rc, out, err = self.run([self.docker, 'stop', '-t', '10', name], check=False, wait=10)
        if rc == 0:
            return
        doc = self.inspect(name)
        if doc and (doc.get('State') or {}).get('Running'):
            raise ServiceError('docker stop %s failed (rc %s: %s) and it still runs, so it keeps running. Fix: stop '
                               'it on the node (`docker stop %s`), then run the task again'
                               % (name, rc, (err or out).strip()[:300], name))

    def transient_logs(self, name, lines=20):
        return self.log_text([self.docker, 'logs', '--tail', str(lines), name], join=True)


def find_binary(module, name, dirs, container=None):
    """The executable of a service, or None: a path when it is executable; a bare name on the host's PATH and
    ``dirs`` (globs allowed). In a container a bare name is left to the image's PATH (the container's entrypoint
    resolves it), and a path is checked in that container."""
    if container:
        if '/' not in name:
            return name
        # A path: checked in the node's container (the services' image); unknown while it does not exist yet.
        docker = module.get_bin_path('docker') or 'docker'
        rc, dummy, err = run_bounded(module, [docker, 'exec', container, 'test', '-x', name], COMMAND_TIMEOUT)
        if rc == 0 or 'No such container' in (err or ''):
            return name
        if (err or '').strip():  # docker itself failed (the daemon, a stopped container): never "not found"
            raise ReadError('docker exec %s test -x %s failed (rc %s: %s), so whether %s is there is unknown. Fix: '
                            'start the container (role ascend.kvpool.vllm_ascend_container) and check the docker '
                            'daemon' % (container, name, rc, err.strip()[:300], name))
        return None
    if '/' in name:
        return name if os.path.isfile(name) and os.access(name, os.X_OK) else None
    found = []
    for d in dirs:
        found.extend(sorted(glob.glob(d)) if any(c in d for c in '*?[') else [d])
    return module.get_bin_path(name, opt_dirs=found)


def backend_for(module, container=None):
    return DockerBackend(module, container) if container else SystemdBackend(module)


# --- files (the module runs as root on the node) --------------------------------------------------------------------

def read_text(path):
    """The text of a small file the engine wrote or reads (a unit, a secret file, ``/proc``), or None when it is
    missing or cannot be read. Never hangs: only a regular file is read (see ``read_bytes``)."""
    data = read_bytes(path)
    return None if data is None else data.decode('utf-8', 'replace')


def write_file(path, text, mode, what, dir_mode=0o755, option=None):
    """Write ``text`` to ``path`` through a new temporary file (``O_EXCL | O_NOFOLLOW``: a link planted there is
    never followed) and a rename, which replaces a link at ``path`` instead of writing through it. The directory is
    checked first (``_validate.directory``: a file in its place, below a file, read-only, a link into /etc) and made
    when missing; any failure is a ServiceError naming ``what`` and the path, and leaves no temporary file."""
    parent = os.path.dirname(path)
    _validate.directory(parent, option or 'the directory of the %s' % what, create=True, mode=dir_mode, writable=True,
                        system_ok=option is None)
    tmp = '%s.tmp.%d' % (path, os.getpid())
    try:
        remove_file(tmp)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, 'O_NOFOLLOW', 0), mode)
        try:
            os.write(fd, text.encode('utf-8'))
        finally:
            os.close(fd)
        os.chmod(tmp, mode)
        os.rename(tmp, path)
    except OSError as exc:
        if os.path.lexists(tmp):
            try:
                os.unlink(tmp)
            except OSError:
                pass
        raise ServiceError('cannot write the %s %s: %s' % (what, path, _validate.os_reason(exc, path))) from exc


def check_owned(path, text, what, unit):
    """Nothing at ``path`` (``text`` None and no entry), or a regular file whose text starts with the collection's
    header: else a ServiceError naming the file and the fix. A same-named file the collection did not write (a hand
    written unit, a link of ``systemctl link`` or ``mask``) is never replaced nor removed, in check mode too."""
    if text is not None and not os.path.islink(path):
        if text.startswith(OWN_MARK):
            return
        why = 'its first line is not the header "%s(module ...)"' % OWN_MARK
    elif os.path.islink(path):
        why = 'it is a symlink to %s (systemctl link or mask?), and the collection writes only files' \
            % os.readlink(path)
    elif os.path.lexists(path):
        why = 'it is not a regular file that can be read'
    else:
        return
    raise ServiceError('%s %s exists but was not written by ascend.kvpool (%s), so it is neither replaced nor removed '
                       'and nothing was changed. Fix: if it is yours, give the collection\'s service another name (or '
                       'stop %s and move the file away); if it is a stale copy of the collection\'s, remove it and run '
                       'again' % (what, path, why, unit))


def read_secret(spec, unit_text):
    """The secret environment file of ``spec`` without its header, None when there is none. Ours: it starts with the
    header, or (written by an earlier release, without one) the collection's unit ``unit_text`` names it in its
    ``EnvironmentFile=``; anything else at its path is a ServiceError (``check_owned``)."""
    path = secret_file(spec)
    text = read_text(path)
    if text is not None and not os.path.islink(path):
        if text.startswith(OWN_MARK):
            return text.split('\n', 1)[1] if '\n' in text else ''
        if unit_text and unit_text.startswith(OWN_MARK) and ('\nEnvironmentFile=%s\n' % path) in unit_text:
            return text
    check_owned(path, text, 'secret environment file', spec.unit)
    return text


def remove_link(path):
    """Remove the enable link at ``path`` (True when it was there); anything there that is not a link (a file, a
    directory) is a ServiceError naming it, never removed."""
    if os.path.lexists(path) and not os.path.islink(path):
        raise ServiceError('%s is not the link `systemctl enable` makes, so it was not removed: move it away and run '
                           'again' % path)
    return remove_file(path)


def remove_file(path):
    """Remove one file (a link itself, never what it points to); True when it was there. A file that cannot be
    removed (read-only filesystem, permission) is a ServiceError naming it: never reported as gone."""
    try:
        os.unlink(path)
        return True
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return False
        raise ServiceError('cannot remove %s: %s' % (path, _validate.os_reason(exc, path))) from exc


# --- the lifecycle: one state machine per backend -----------------------------------------------------------------

DONE = 'done'


def spec_for(params, result, unit, description, argv, **kwargs):
    """The ServiceSpec of a service module's unit, with the options every service module shares (``stop_timeout``,
    ``restart_limit_burst``, ``restart_limit_interval``) from its ``params``. A bad unit name raises ServiceError
    carrying ``result``."""
    try:
        return ServiceSpec(unit, description, argv, stop_timeout=params['stop_timeout'],
                           start_limit_burst=params['restart_limit_burst'],
                           start_limit_interval=params['restart_limit_interval'], **kwargs)
    except ServiceError as exc:
        raise ServiceError(str(exc), result=result) from exc


class Lifecycle(object):
    """Decide, write, (re)start, gate and report one service: the states both backends share.

    ``SystemdLifecycle`` and ``ContainerLifecycle`` are the two machines. ``ensure`` runs one from its first state
    to ``done``; each state is a method ``state_<name>`` that returns the name of the next one:

    ``check`` (the service manager, or the template container, is there) -> ``plan`` (the definition and
    ``decide``) -> ``stop`` | ``apply`` | ``gate_running`` (a service found running with the same definition) ->
    ``gate`` (after a start) -> ``peers`` (the cluster's checks) -> ``done``; ``unhealthy`` (running, not healthy
    long after its start: restarted) and ``fail_start`` (the start failed: stopped, the log tail) on the way.

    A success returns the result. A failure raises ServiceError carrying the fields a failed task still returns
    (unit, logs hint, pid, log tail); nothing here exits the module: its ``main()`` does, with ``fail_json`` or
    ``exit_json``.
    """

    def __init__(self, module, backend, what='service', finish=None, ready_timeout=60.0, poll_interval=0.2,
                 log_lines=40, wait=True, step=None):
        """``finish(result)``, when given, completes a successful result (the master module points ``pid`` at the
        real master behind the wheel's wrapper). ``what`` names the service in messages. ``wait=False`` returns
        right after a (re)start, or after one poll of a running service. ``step``: container mode's
        (``render``, ``gate``)."""
        self.module = module
        self.backend = backend
        self.what = what
        self.finish = finish
        self.ready_timeout = ready_timeout
        self.poll_interval = poll_interval
        self.log_lines = log_lines
        self.wait = wait
        self.step = step

    def stop_other(self, spec):
        """Stop (and remove) a service that is no longer wanted; True when there was something to stop.

        A unit file left by a failed start (nothing runs) is removed without counting as a stop."""
        status = self.backend.status(spec)
        alive = status['state'] in ALIVE_STATES
        if not self.module.check_mode and (alive or status['exists']):
            self.backend.stop(spec)
        return alive

    def ensure(self, spec, state, result, gate, explain=None, port_taken=None, peer_gate=None):
        """Bring ``spec`` to ``state`` (started, stopped, restarted); returns ``result`` filled in, or raises
        ServiceError.

        ``gate()`` returns the named health checks (list of (name, callable)); ``explain(log_text)`` the short
        error a failed start adds to its message; ``port_taken()`` whether another process holds the service's
        port.

        ``peer_gate()`` returns the checks of the cluster the service belongs to (an etcd member's peers, the HA
        masters' election), polled once its own gate passed, for ``ready_timeout`` of their own. Their failure fails
        the task naming them, but never restarts or stops this service: a member restarted because another one is
        down would cost the cluster its quorum.
        """
        self.spec, self.state, self.result = spec, state, result
        self.checks, self.explain, self.port_taken, self.peer_gate = gate, explain, port_taken, peer_gate
        self.plan, self.status, self.res, self.stop_failed = {}, None, None, False
        current = self.first_state()
        while current != DONE:
            current = getattr(self, 'state_' + current)()
        if self.finish is not None:
            self.finish(result)
        return result

    def error(self, msg):
        """The ServiceError of a failure, with the result so far."""
        return ServiceError(msg, result=self.result)

    # -- the states both machines share -------------------------------------------------------------------------
    def state_check(self):
        """The service manager (or the template container) is there. Where it is missing nothing can run: stopped
        is done; check mode says it would start (an earlier task, not run in check mode, would have made it)."""
        be, result = self.backend, self.result
        try:
            be.check()
        except ReadError as exc:  # the template's state unknown: no answer, in check mode neither
            raise self.error('%s: %s' % (self.what, exc)) from exc
        except ServiceError as exc:
            if self.state == 'stopped':
                if be.kind == 'docker':
                    be.stop(self.spec)  # a service container left without its template is still removed
                result.update(action='none', reason=str(exc), state='stopped', pid=None)
                return DONE
            if self.module.check_mode:
                result.update(changed=True, action='started', reason=str(exc), state='stopped', pid=None,
                              health='unknown')
                return DONE
            raise self.error('%s: %s' % (self.what, exc)) from exc
        return 'plan'

    def state_plan(self):
        """The wanted definition against the written one and the service's status: ``decide``."""
        be, spec, result = self.backend, self.spec, self.result
        text, secret = be.render(spec) if self.state != 'stopped' else (None, None)
        old_text, old_secret, status = be.current(spec)
        same = old_text == text and (old_secret or None) == (secret or None)
        action, reason = decide(self.state, same, status)
        alive = status['state'] in ALIVE_STATES
        result.update(unit=be.unit_id(spec), logs=be.logs_hint(spec),
                      fingerprint=fingerprint(text, secret) if text else '',
                      action='none' if action == 'wait' else action, reason=reason,
                      pid=status['pid'] if alive else None, state='running' if alive else 'stopped')
        before = (old_text or '') + masked_secrets(old_secret, secret) if (status['exists'] or old_text) else ''
        self.status = status
        self.plan = dict(text=text, secret=secret, old_text=old_text, old_secret=old_secret, same=same,
                         action=action, alive=alive, before=before)
        return self.route(action)

    def route(self, action):
        """The state after ``plan`` for ``decide``'s action."""
        raise NotImplementedError

    def port_check(self):
        """Fail when another process (one started by hand?) holds the port of a service that is not running."""
        if self.port_taken is not None and self.status['state'] not in ALIVE_STATES and self.port_taken():
            raise self.error('%s: port %s already accepts connections, but %s is not running. Stop the other '
                             'process (one started by hand?) or choose another port.'
                             % (self.what, self.spec.port, self.backend.where(self.spec)))

    def state_gate_running(self):
        """The health gate of a service found running: ``peers`` when it is healthy, ``fail_start`` when a recent
        start (of this or an earlier task) did not become healthy, ``unhealthy`` otherwise.

        ``wait=False`` polls once and is done (``health`` healthy or unknown). Otherwise it waits until
        ``ready_timeout`` after the service's start when that was recent, else ``ready_timeout`` from now.
        """
        status, result = self.status, self.result
        if status['state'] == 'restarting':
            # systemd is about to start it again (Restart=, after RestartSec): its start is now, not the start of the
            # process that died, which may lie almost ready_timeout ago and leave the new one no time at all.
            status = dict(status, started_mono=time.monotonic())
        started_recently = bool(status.get('started_mono')) and \
            time.monotonic() - status['started_mono'] < self.ready_timeout
        if not self.wait:
            res = wait_until(self.checks(), 0, self.poll_interval)
            result['health'] = 'healthy' if res['ready'] else 'unknown'
            if res['ready']:
                result['ready_seconds'] = res['elapsed']
            return DONE
        if started_recently:
            deadline = status['started_mono'] + self.ready_timeout
        else:
            deadline = time.monotonic() + self.ready_timeout
        res = self._gate(max(self.poll_interval, deadline - time.monotonic()))
        if res['ready']:
            result.update(health='healthy', ready_seconds=round(time.monotonic() - status['started_mono'], 3)
                          if started_recently else res['elapsed'])
            if self.REFRESH_PID:
                result['pid'] = self.backend.status(self.spec)['pid']
            return 'peers'
        self.res = res
        if res['died'] or started_recently:
            # A start of this or an earlier task that did not become healthy: a failed start, not restarted.
            self.stop_failed = not res['died']
            return 'fail_start'
        return 'unhealthy'

    REFRESH_PID = False  # whether a service found healthy reports its pid read again after the gate

    def state_peers(self):
        """The checks of the service's peers, after its own gate passed: done when they pass, a failure naming them
        otherwise; the service itself is left running."""
        if self.peer_gate is None or self.module.check_mode:
            return DONE
        res = wait_until(self.peer_gate(), self.ready_timeout, self.poll_interval)
        if res['ready']:
            return DONE
        error = self.explain('') if self.explain else ''
        self.result.update(peers='not ready')
        raise self.error('%s is healthy itself, but its cluster is not %.0f s later (waiting for: %s)%s. It was left '
                         'running (not restarted for its peers).'
                         % (self.what, self.ready_timeout, ', '.join(res['pending']),
                            (' (error: %s)' % error) if error else ''))

    def state_fail_start(self):
        """A start that failed: the service stopped when it still runs unhealthy, the log tail, the error raised."""
        be, spec, res, result = self.backend, self.spec, self.res, self.result
        status = be.status(spec)
        stop = self.stop_failed
        if res['died'] or status['state'] not in ALIVE_STATES:
            if status['restarts']:
                why = ('exited after its start; it was restarted %d time(s) and then left %s (restart limit: %d '
                       'starts in %d s)' % (status['restarts'], status['detail'], spec.start_limit_burst,
                                            spec.start_limit_interval))
            else:
                why = 'exited after its start (%s)' % status['detail']
            stop = False
        else:
            why = 'was not healthy %.0f s after its start (waiting for: %s)' % (
                self.ready_timeout, ', '.join(res['pending']))
        logs = mask_text(be.logs(spec, self.log_lines))  # a journal line may echo a key: masked before any message
        if stop:
            try:
                be.stop(spec, remove=False)
                result.update(state='stopped', pid=None)
            except ServiceError:
                pass
        else:
            result.update(state='stopped', pid=None)
        error = self.explain(logs) if self.explain else ''
        tail = tail_text(logs, self.log_lines)
        result.update(health='unhealthy', reason='failed start', log_tail=tail)
        raise self.error('%s (%s) %s%s. Last lines of `%s -n %d`:\n%s'
                         % (self.what, be.where(spec), why, (' (error: %s)' % error) if error else '',
                            be.logs_hint(spec), self.log_lines, tail))

    def _gate(self, timeout):
        def alive():
            return self.backend.status(self.spec)['state'] in ALIVE_STATES
        return wait_until(self.checks(), timeout, self.poll_interval, alive=alive)


class SystemdLifecycle(Lifecycle):
    """The machine of a systemd unit: every state acts on the host (unit file, ``systemctl``, the journal)."""

    def first_state(self):
        return 'check'

    def route(self, action):
        return {'none': DONE, 'stopped': 'stop', 'wait': 'gate_running'}.get(action, 'apply')

    def state_stop(self):
        """Stop the unit and remove its files."""
        result = self.result
        if not self.module.check_mode:
            try:
                self.backend.stop(self.spec)
            except (KvpoolError, IOError, OSError) as exc:  # not changed, not stopped: the state as it was read
                raise self.error('could not stop %s: %s' % (self.what, exc)) from exc
            result.update(state='stopped', pid=None)
        result.update(changed=True, diff=dict(before=self.plan['before'], after=''))
        return DONE

    def state_unhealthy(self):
        """Running with the same definition, not healthy long after its start: restarted."""
        self.result.update(action='restarted', reason='running but not healthy (%s)' % ', '.join(self.res['pending']))
        return 'apply'

    def state_apply(self):
        """Write the unit (and the secret file), then start or restart it; ``gate`` unless ``wait`` is off."""
        be, spec, plan, result = self.backend, self.spec, self.plan, self.result
        result.update(changed=True, diff=dict(before=plan['before'],
                                              after=plan['text'] + masked_secrets(plan['secret'], plan['old_secret'])))
        if self.module.check_mode:
            result['health'] = 'unknown'
            return DONE
        self.port_check()
        try:
            be.apply(spec, plan['text'], plan['secret'], plan['old_text'], plan['old_secret'],
                     restart=self.status['state'] in ALIVE_STATES)
        except (KvpoolError, IOError, OSError) as exc:
            raise self.error('could not start %s (%s): %s' % (self.what, be.where(spec), exc)) from exc
        self.started = time.monotonic()
        result.update(state='running', pid=be.status(spec)['pid'], health='starting')
        return 'gate' if self.wait else DONE

    def state_gate(self):
        """The health gate after a (re)start: ``peers`` when it passes, ``fail_start`` otherwise."""
        res = self._gate(self.ready_timeout)
        self.result['ready_seconds'] = round(time.monotonic() - self.started, 3)
        if not res['ready']:
            self.res, self.stop_failed = res, not res['died']
            return 'fail_start'
        self.result.update(health='healthy', pid=self.backend.status(self.spec)['pid'])
        return 'peers'


class ContainerLifecycle(Lifecycle):
    """The machine of a service container, in two module steps around the action plugin's
    ``community.docker.docker_container`` call (``plugin_utils/service_container.py``):

    - step ``render``: ``check`` -> ``plan`` -> ``stop`` (the removal docker_container is asked for, in
      ``container_ops``) | ``apply`` (the docker_container arguments, ``container_definition``). This step changes
      nothing itself; ``action`` and ``reason`` are what the definition alone predicts.
    - step ``gate``, after docker_container: ``inspect`` -> ``gate_running`` -> ``peers`` | ``fail_start`` (a
      stop docker_container is asked for, and the ``docker logs`` tail) | ``unhealthy`` (running but unhealthy long
      after its start: ``container_restart`` asks the action plugin to restart it and run this step again).
    """

    REFRESH_PID = True

    def first_state(self):
        # Filled by the backend's stop(); the action plugin runs them, even after a failure.
        self.result['container_ops'] = self.backend.ops
        return {'render': 'check', 'gate': 'inspect'}.get(self.step, 'refuse')

    def state_refuse(self):
        raise self.error('%s: container mode runs through the action plugin of the module (community.docker.'
                         'docker_container does the container); call the module as a task, not directly' % self.what)

    def state_check(self):
        self.result.update(unit=self.backend.unit_id(self.spec), logs=self.backend.logs_hint(self.spec))
        return super(ContainerLifecycle, self).state_check()

    def route(self, action):
        return 'stop' if self.state == 'stopped' else 'apply'

    def state_stop(self):
        """Ask docker_container to remove the container (when there is one)."""
        if self.plan['action'] == 'stopped':
            self.result['diff'] = dict(before=self.plan['before'], after='')
        self.backend.stop(self.spec)
        return DONE

    def state_apply(self):
        """The docker_container arguments of the container (``restart`` for state=restarted)."""
        plan, result = self.plan, self.result
        if not self.module.check_mode:
            self.port_check()
        if not plan['same']:
            result['diff'] = dict(before=plan['before'], after=plan['text'] + masked_secrets(plan['secret'],
                                                                                             plan['old_secret']))
        definition, secret_names = self.backend.definition(self.spec, plan['text'])
        if self.state == 'restarted':
            definition['restart'] = True
        result.update(container_definition=definition, container_secret_env=secret_names)
        return DONE

    def state_inspect(self):
        """The container docker_container left: ``gate_running`` when it runs, ``fail_start`` when it exited."""
        be, spec, result = self.backend, self.spec, self.result
        status = be.status(spec)
        alive = status['state'] in ALIVE_STATES
        result.update(unit=be.unit_id(spec), logs=be.logs_hint(spec), pid=status['pid'] if alive else None,
                      state='running' if alive else 'stopped')
        if not status['exists']:
            if self.module.check_mode:  # docker_container would have created it
                result['health'] = 'unknown'
                return DONE
            raise self.error('%s: %s does not exist after community.docker.docker_container ran'
                             % (self.what, be.where(spec)))
        if not alive:
            # Exited, and docker's restart policy gave up (or the process exited 0): a failed start.
            self.res, self.stop_failed = {'died': True, 'pending': [], 'ready': False}, False
            return 'fail_start'
        self.status = status
        return 'gate_running'

    def state_unhealthy(self):
        self.result.update(changed=True, action='restarted', health='unknown', container_restart=True,
                           reason='running but not healthy (%s)' % ', '.join(self.res['pending']))
        return DONE


def lifecycle_for(module, backend, what, finish=None):
    """The state machine of ``backend`` (a DockerBackend: the container's; else the systemd unit's), with the options
    every service module shares read from its parameters: ``ready_timeout``, ``poll_interval``, ``log_lines``,
    ``wait`` (default true) and ``container_step``."""
    p = module.params
    machine = ContainerLifecycle if getattr(backend, 'kind', '') == 'docker' else SystemdLifecycle
    return machine(module, backend, what, finish=finish, ready_timeout=p['ready_timeout'],
                   poll_interval=p['poll_interval'], log_lines=p['log_lines'], wait=p.get('wait', True),
                   step=p.get('container_step'))


def proc_children(pid):
    """[(pid, argv)] of the live children of ``pid`` on this host, from ``/proc/*/stat`` (no kernel option needed);
    processes that end while read are skipped."""
    out = []
    for entry in glob.glob('/proc/[0-9]*/stat'):
        fields = stat_fields((read_bytes(entry, 4096) or b'').decode('utf-8', 'replace'))
        if fields and len(fields) > 1 and _int(fields[1]) == pid:
            child = _int(entry.split('/')[2])
            argv = parse_cmdline(read_bytes('/proc/%d/cmdline' % child, 65536))
            if argv:
                out.append((child, argv))
    return sorted(out)


def read_bytes(path, limit=16 << 20):
    """The bytes of a regular file (at most ``limit``), or None when it is missing, cannot be read or is not a
    regular file: a FIFO, a socket or a device at the path is never opened for a blocking read, so nothing hangs."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, 'O_NONBLOCK', 0) | getattr(os, 'O_NOCTTY', 0))
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return b''.join(chunks)[:limit]
    except OSError:
        return None
    finally:
        os.close(fd)
