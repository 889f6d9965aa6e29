# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The REAL ``mooncake_master`` of each Mooncake release against the flags the collection renders for it.

For every version of ``VERSIONS`` (PyPI ``mooncake-transfer-engine-non-cuda``, one venv each under
``$KVPOOL_MOONCAKE_MATRIX/<version>``, made by ``make mooncake-matrix``), three masters on loopback:

1. ``defaults``: the module params the role ``mooncake_master`` passes with its defaults (its ``defaults/main.yml``
   and ``kvpool_defaults``'s, rendered; mapped by the expressions of its ``tasks/master.yml``), on free ports;
2. ``tunables``: every tunable away from its default;
3. ``ha``: HA on with three etcd endpoints where nothing listens (no etcd).

argv = ``build_master_argv(<venv>/bin/mooncake_master, master_settings(params), extra_args, version)``, started as an
operator would (the wheel's wrapper), each in its own session, killed as a group afterwards. The twelve masters run
at once. Each rendered setting must be applied (the master's ``Master service started on port ...`` line), or be
reported by ``unsupported_settings(settings, version)`` and left out of the argv. Without
``KVPOOL_MOONCAKE_MATRIX`` the tests that need the binaries skip; with it, a missing venv fails.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import concurrent.futures
import glob
import os
import random
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml
from jinja2 import StrictUndefined, meta
from jinja2.nativetypes import NativeEnvironment

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT / '.collections') not in sys.path:
    sys.path.insert(0, str(ROOT / '.collections'))

from ansible.plugins.filter.core import get_hash  # noqa: E402
from ansible.module_utils.common.validation import (  # noqa: E402
    check_type_bool, check_type_float, check_type_int, check_type_list, check_type_str,
)
from ansible_collections.ascend.kvpool.plugins.filter.etcd import FilterModule as EtcdFilters  # noqa: E402
from ansible_collections.ascend.kvpool.plugins.module_utils import _mooncake as mc  # noqa: E402
from ansible_collections.ascend.kvpool.plugins.modules import mooncake_master  # noqa: E402

VERSIONS = ('0.3.9', '0.3.11.post1', '0.3.12.post1', '0.3.13.post1')
SCENARIOS = ('defaults', 'tunables', 'ha')
MATRIX = os.environ.get('KVPOOL_MOONCAKE_MATRIX', '')
needs_matrix = pytest.mark.skipif(
    not MATRIX, reason='KVPOOL_MOONCAKE_MATRIX is unset: run `make mooncake-matrix` (it makes one venv per Mooncake '
                       'version under .tmp/mooncake and sets it)')

MASTER_TASK = ROOT / 'roles' / 'mooncake_master' / 'tasks' / 'master.yml'
DEFAULTS_FILES = (ROOT / 'roles' / 'kvpool_defaults' / 'defaults' / 'main.yml',
                  ROOT / 'roles' / 'mooncake_master' / 'defaults' / 'main.yml')
HOST_VARS = {'ansible_host': '127.0.0.1', 'inventory_hostname': 'node1', 'groups': {}, 'hostvars': {}}
OMIT = '__omit_place_holder__kvpool_matrix'
# The module's argument_spec types of the settings (plugins/modules/mooncake_master.py), applied as AnsibleModule does.
PARAM_TYPES = {
    'port': check_type_int, 'metrics_port': check_type_int, 'max_threads': check_type_int,
    'client_ttl': check_type_int, 'default_kv_lease_ttl': check_type_int,
    'eviction_high_watermark_ratio': check_type_float, 'eviction_ratio': check_type_float,
    'enable_ha': check_type_bool, 'enable_http_metadata_server': check_type_bool,
    'etcd_endpoints': lambda v: [check_type_str(e) for e in check_type_list(v)],
    'rpc_address': check_type_str, 'metrics_address': check_type_str, 'mooncake_version': check_type_str,
    'cluster_id': check_type_str, 'enable_oplog': check_type_bool,
}
TUNABLES = {'max_threads': 32, 'client_ttl': 120, 'default_kv_lease_ttl': 11000,
            'eviction_high_watermark_ratio': 0.8, 'eviction_ratio': 0.1, 'enable_http_metadata_server': True,
            'rpc_address': '127.0.0.1', 'metrics_address': '127.0.0.1'}
# Each setting's gflags spellings in some release (``--helpfull``): a setting reported as left out for a version
# must have none of them there.
SPELLINGS = {'port': ('port', 'rpc_port'), 'max_threads': ('max_threads', 'rpc_thread_num'),
             'metrics_address': ('metrics_host',), 'etcd_endpoints': ('etcd_endpoints', 'ha_backend_connstring')}
# Where the startup line shows each setting (the others: under their own name).
LOG_KEYS = {'port': ('port', 'rpc_port'), 'metrics_address': ('metrics_host',),
            'max_threads': ('rpc_thread_num', 'max_threads'),
            'etcd_endpoints': ('etcd_endpoints', 'ha_backend_connstring')}
# What each release does with HA on and no etcd (measured): every one keeps running and retries, none binds the RPC
# port; 0.3.9 tries to become leader first and starts no HTTP server until it is one, 0.3.11+ start their admin
# server at once and answer /health 200 as a standby that is not ready.
HA_HEALTH_WITHOUT_ETCD = {'0.3.9': False, '0.3.11.post1': True, '0.3.12.post1': True, '0.3.13.post1': True}
ETCD_FAILED = re.compile(r'context deadline exceeded|ETCD_OPERATION_ERROR')
DEADLINE = 30.0
POLL = 0.05


# --- pure helpers ----------------------------------------------------------------------------------------------------
_STARTED = re.compile(r'Master service started on port (\d+), (.*)$')


def parse_startup_line(text):
    """{key: value text} of the master's ``Master service started on port N, k=v, ...`` line (``port`` = N), or None."""
    for line in (text or '').splitlines():
        m = _STARTED.search(line)
        if m:
            out = {'port': m.group(1)}
            for item in m.group(2).split(', '):
                key, sep, value = item.partition('=')
                if sep:
                    out[key.strip()] = value.strip()
            return out
    return None


def helpfull_flags(text):
    """The flag names ``--helpfull`` lists (``-name (description) type: ...``)."""
    return set(re.findall(r'^\s+-([A-Za-z0-9_]+) \(', text or '', re.M))


def unsupported(settings, version):
    """{setting: warning} of what the rendering leaves out for ``version`` (none while the API lacks the function)."""
    fn = getattr(mc, 'unsupported_settings', None)
    if fn is None:
        return {}
    return dict(fn(settings, version))


def applied(name, value, line):
    """Whether the startup line shows the setting ``name`` = ``value``."""
    def num(key, cast):
        try:
            return cast(line[key])
        except (KeyError, ValueError):
            return None
    if name == 'port':
        return num('port', int) == value and num('rpc_port', int) == value
    if name == 'metrics_address':
        return line.get('metrics_host') == value
    if name == 'max_threads':
        return num('rpc_thread_num', int) == value
    if name in ('enable_ha', 'enable_http_metadata_server', 'enable_oplog'):
        return line.get(name) == ('1' if value else '0')
    if name == 'etcd_endpoints':
        return ';'.join(value) in (line.get('etcd_endpoints'), line.get('ha_backend_connstring'))
    if name in ('eviction_high_watermark_ratio', 'eviction_ratio'):
        got = num(name, float)
        return got is not None and abs(got - value) < 1e-9
    if name in ('metrics_port', 'client_ttl', 'default_kv_lease_ttl'):
        return num(name, int) == value
    return line.get(name) == str(value)


def _jinja():
    env = NativeEnvironment(undefined=StrictUndefined)
    env.filters.update({'ascend.kvpool.%s' % k: f for k, f in EtcdFilters().filters().items()})

    def to_int(value, default=0):  # Ansible's int filter
        try:
            return int(value)
        except (TypeError, ValueError):
            return default
    env.filters.update({'int': to_int, 'bool': check_type_bool, 'hash': get_hash})
    return env


def role_params(host_vars=None):
    """The settings params the role mooncake_master passes to the module with its defaults: defaults/main.yml of
    kvpool_defaults and mooncake_master rendered (each variable after the ones it uses), then the expressions of
    tasks/master.yml (``omit`` dropped) and the module's argument types."""
    env = _jinja()
    raw = {}
    for path in DEFAULTS_FILES:
        raw.update(yaml.safe_load(path.read_text()))
    known = dict(HOST_VARS if host_vars is None else host_vars)
    rendering = set()

    def value(name):
        if name in known or name not in raw:
            return known.get(name)
        if name in rendering:
            raise ValueError('%s refers to itself' % name)
        rendering.add(name)
        known[name] = render(raw[name])
        return known[name]

    def render(item):
        if not isinstance(item, str) or '{' not in item:
            return item
        for used in meta.find_undeclared_variables(env.parse(item)):
            value(used)
        return env.from_string(item).render({k: v for k, v in known.items() if v is not None})

    task = yaml.safe_load(MASTER_TASK.read_text())[0]['ascend.kvpool.mooncake_master']
    for name in raw:
        value(name)
    params = {}
    for key, expr in task.items():
        if key not in PARAM_TYPES:
            continue
        got = env.from_string(expr).render(dict(known, omit=OMIT)) if isinstance(expr, str) else expr
        if got != OMIT:
            params[key] = PARAM_TYPES[key](got)
    return params


def free_ports(count, taken):
    """Loopback ports free now, below the ephemeral range (20000-32767): no outgoing connection of the test's
    polling or of a master's etcd retries can take one before its master binds it."""
    out = []
    rng = random.Random(os.getpid())
    while len(out) < count:
        port = rng.randrange(20000, 32768)
        if port in taken:
            continue
        with socket.socket() as sock:
            try:
                sock.bind(('127.0.0.1', port))
            except OSError:
                continue
        taken.add(port)
        out.append(port)
    return out


# --- the binaries ----------------------------------------------------------------------------------------------------
def venv(version):
    path = Path(MATRIX) / version
    if not (path / 'bin' / 'mooncake_master').exists():
        pytest.fail('no Mooncake %s venv at %s (KVPOOL_MOONCAKE_MATRIX is set): make it with `bash scripts/venv.sh '
                    '%s tests/mooncake_matrix/requirements-%s.txt`, or run `make mooncake-matrix`'
                    % (version, path, path, version))
    return path


def real_binary(path):
    found = sorted(glob.glob(str(path / 'lib' / 'python3*' / 'site-packages' / 'mooncake' / 'mooncake_master')))
    assert found, 'no mooncake/mooncake_master in %s' % path
    return found[0]


def cuda_runtime_lib(path):
    """nvidia-cuda-runtime-cu12's lib directory in the venv (test equipment of 0.3.12.post1), or None."""
    found = glob.glob(str(path / 'lib' / 'python3*' / 'site-packages' / 'nvidia' / 'cuda_runtime' / 'lib'))
    return found[0] if found else None


def master_env(path):
    env = {k: v for k, v in os.environ.items() if k != 'LD_LIBRARY_PATH'}
    lib = cuda_runtime_lib(path)
    if lib:
        env['LD_LIBRARY_PATH'] = lib
    return env


def accepts(port):
    try:
        with socket.create_connection(('127.0.0.1', port), timeout=0.2):
            return True
    except OSError:
        return False


def http_get(port, path):
    """(status, body) of GET http://127.0.0.1:port/path, or None when nothing answers."""
    try:
        with urllib.request.urlopen('http://127.0.0.1:%d%s' % (port, path), timeout=1) as resp:
            return resp.status, resp.read().decode('utf-8', 'replace')
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode('utf-8', 'replace')
    except (OSError, urllib.error.URLError):
        return None


def _alive(pid):
    """Whether the child ``pid`` still runs, without reaping it (its pid, and so its group id, stay ours)."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None
    except ChildProcessError:
        return False


def _group_members(pgid):
    """Live processes of the process group ``pgid`` (zombies left out)."""
    out = []
    for stat in glob.glob('/proc/[0-9]*/stat'):
        try:
            with open(stat) as handle:
                fields = handle.read().rsplit(')', 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != 'Z' and int(fields[2]) == pgid:
            out.append(int(stat.split('/')[2]))
    return out


def _cmdline(pid):
    try:
        with open('/proc/%d/cmdline' % pid, 'rb') as f:
            return f.read().split(b'\0')[0].decode('utf-8', 'replace')
    except OSError:
        return ''


def stop_group(proc):
    """SIGTERM, then SIGKILL after 5 s, to the process group of ``proc`` (its own session); then reap it. The group
    leader is reaped last, so the group id cannot be reused by another process while it is signalled."""
    for sig, grace in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        if not _group_members(proc.pid):
            break
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + grace
        while _group_members(proc.pid) and time.monotonic() < deadline:
            time.sleep(POLL)
    proc.wait(timeout=10)


def run_master(version, scenario, params, extra_args, workdir, flags):
    """Start one master, observe it, stop it; what was seen."""
    path = venv(version)
    settings = mc.master_settings(params)
    argv = mc.build_master_argv(str(path / 'bin' / 'mooncake_master'), settings, extra_args, version)
    out = {'version': version, 'scenario': scenario, 'params': params, 'settings': settings, 'argv': argv,
           'left_out': unsupported(settings, version), 'helpfull': flags, 'health': None, 'metrics': None,
           'exited': None, 'rpc_listening': False}
    log_path = workdir / ('%s-%s.log' % (scenario, version))
    started = time.monotonic()
    with open(log_path, 'wb') as log:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=str(workdir),
                                env=master_env(path), start_new_session=True)
    try:
        deadline = started + DEADLINE
        while time.monotonic() < deadline:
            if not _alive(proc.pid):
                out['exited'] = proc.wait()
                break
            if scenario == 'ha':
                if out['health'] is None:
                    out['health'] = http_get(params['metrics_port'], '/health')
                if ETCD_FAILED.search(log_path.read_text(errors='replace')):
                    out['rpc_listening'] = accepts(params['port'])
                    out['alive_after_etcd_failure'] = _alive(proc.pid)
                    break
            elif accepts(params['port']):
                health = http_get(params['metrics_port'], '/health')
                if health and health[0] == 200:
                    out['health'] = health
                    out['rpc_listening'] = True
                    # what the module reports of this master: the real binary's pid, the wrapper's apart
                    status = {'pid': proc.pid}
                    mooncake_master.real_master(status)
                    out['status'] = dict(status, main_pid=proc.pid, cmdline=_cmdline(status['pid']))
                    out['metrics'] = http_get(params['metrics_port'], '/metrics')
                    break
            time.sleep(POLL)
        out['seconds'] = round(time.monotonic() - started, 2)
        for arg in extra_args:
            if arg.startswith('--http_metadata_server_port='):
                out['http_metadata_listening'] = accepts(int(arg.split('=', 1)[1]))
    finally:
        stop_group(proc)
    out['log'] = log_path.read_text(errors='replace')
    out['line'] = parse_startup_line(out['log'])
    return out


def scenario_params(version, scenario, base, taken):
    port, metrics_port = free_ports(2, taken)
    params = dict(base, port=port, metrics_port=metrics_port, mooncake_version=version)
    extra = []
    if scenario == 'tunables':
        params.update(TUNABLES)
        # The HTTP metadata server binds 0.0.0.0:8080 by default in every release: a port of its own instead.
        extra = ['--http_metadata_server_port=%d' % free_ports(1, taken)[0], '--http_metadata_server_host=127.0.0.1']
    elif scenario == 'ha':
        # What the role renders with kvpool_master_ha (the pool's --cluster_id, --enable_oplog where the release has
        # it), with three etcd endpoints where nothing listens.
        params = dict(role_params(dict(HOST_VARS, kvpool_master_ha=True)), port=port, metrics_port=metrics_port,
                      mooncake_version=version, etcd_endpoints=['127.0.0.1:%d' % p for p in free_ports(3, taken)])
    return params, extra


def helpfull(version):
    path = venv(version)
    proc = subprocess.Popen([str(path / 'bin' / 'mooncake_master'), '--helpfull'], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=master_env(path), start_new_session=True)
    try:
        out = proc.communicate(timeout=60)[0]
    finally:
        stop_group(proc)  # the wrapper's child too, should it hang
    return helpfull_flags(out)


@pytest.fixture(scope='module')
def matrix(tmp_path_factory):
    """{(scenario, version): what was seen, or the failure text}: the twelve masters, run at once."""
    workdir = tmp_path_factory.mktemp('mooncake-matrix')
    base = role_params()
    taken = set()
    jobs = {}
    results = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(VERSIONS) * len(SCENARIOS)) as pool:
        flags = {}
        for version in VERSIONS:
            try:
                flags[version] = helpfull(version)
            except pytest.fail.Exception as exc:
                for scenario in SCENARIOS:
                    results[(scenario, version)] = str(exc)
        for version in flags:
            for scenario in SCENARIOS:
                params, extra = scenario_params(version, scenario, base, taken)
                jobs[(scenario, version)] = pool.submit(run_master, version, scenario, params, extra, workdir,
                                                        flags[version])
        for key, job in jobs.items():
            results[key] = job.result()
    return results


def seen(matrix, scenario, version):
    got = matrix[(scenario, version)]
    if isinstance(got, str):
        pytest.fail(got)
    return got


def _excerpt(run):
    return '%s %s: argv %s\nleft out: %s\nlog:\n%s' % (
        run['scenario'], run['version'], ' '.join(run['argv']), run['left_out'] or 'none',
        '\n'.join(mc.log_excerpt(run['log'], lines=15).splitlines()[-15:]))


def check_rendering(run):
    """Every rendered flag is one the release lists; every setting is applied or reported and left out."""
    why = _excerpt(run)
    assert 'unknown command line flag' not in run['log'], why
    rendered = {a[2:].split('=', 1)[0] for a in run['argv'][1:] if a.startswith('--')}
    assert rendered <= run['helpfull'], 'flags %s are not in --helpfull of %s\n%s' % (
        sorted(rendered - run['helpfull']), run['version'], why)
    assert run['line'] is not None, 'no startup line\n' + why
    for name, value in run['settings'].items():
        if name in run['left_out']:
            assert run['left_out'][name], why
            flags = SPELLINGS.get(name, (mc.master_flag_names(run['version'])[name],))
            assert not any(a.startswith('--%s=' % f) for a in run['argv'] for f in flags), \
                '%s is reported left out but rendered\n%s' % (name, why)
            assert not set(flags) & run['helpfull'], \
                '%s is reported left out, but %s knows %s\n%s' % (name, run['version'], flags, why)
        else:
            shown = {k: run['line'].get(k) for k in LOG_KEYS.get(name, (name,))}
            assert applied(name, value, run['line']), '%s=%r not applied (startup line: %s)\n%s' % (
                name, value, shown, why)


def check_serving(run):
    why = _excerpt(run)
    assert run['exited'] is None, 'the master exited (rc %s)\n%s' % (run['exited'], why)
    assert run['health'] and run['health'][0] == 200, 'no /health 200 within %s s\n%s' % (DEADLINE, why)
    assert run['rpc_listening'], why
    view = mc.parse_ha_health(run['health'][1])
    assert run['health'][1].strip() == 'OK' or (view and view['service_ready'] and view['ha_state'] == 'serving'), \
        run['health']
    status, body = run['metrics']
    assert status == 200 and re.search(r'^# TYPE master_\w+ ', body, re.M), run['metrics']


# --- tests -----------------------------------------------------------------------------------------------------------
SAMPLE_LINE = ('I1205 10:02:19.458384  4873 master.cpp:1522] Master service started on port 50100, max_threads=2, '
               'enable_metric_reporting=1, metrics_port=9100, metrics_host=0.0.0.0, default_kv_lease_ttl=11000, '
               'eviction_ratio=0.1, eviction_high_watermark_ratio=0.8, enable_ha=0, ha_backend_connstring=, '
               'etcd_endpoints=, client_ttl=120, rpc_thread_num=2, rpc_port=50100, rpc_address=127.0.0.1, '
               'rpc protocol=tcp, enable_http_metadata_server=0, cxl_path=/dev/dax0.0')


def test_parse_startup_line():
    line = parse_startup_line('WARNING: Logging before InitGoogleLogging()\n%s\nI1205 next line\n' % SAMPLE_LINE)
    assert line['port'] == '50100' and line['rpc_port'] == '50100' and line['max_threads'] == '2'
    assert line['metrics_host'] == '0.0.0.0' and line['etcd_endpoints'] == '' and line['rpc protocol'] == 'tcp'
    assert line['cxl_path'] == '/dev/dax0.0' and line['eviction_ratio'] == '0.1'
    assert applied('eviction_high_watermark_ratio', 0.8, line) and applied('client_ttl', 120, line)
    assert applied('port', 50100, line) and not applied('max_threads', 32, line)
    assert parse_startup_line('ERROR: unknown command line flag \'metrics_host\'\n') is None


def test_role_params():
    params = role_params()
    defaults = yaml.safe_load(DEFAULTS_FILES[0].read_text())
    assert params['port'] == defaults['kvpool_defaults_master_port']
    assert params['metrics_port'] == defaults['kvpool_defaults_master_metrics_port']
    assert params['mooncake_version'] == defaults['kvpool_defaults_mooncake_version']
    assert params['rpc_address'] == params['metrics_address'] == '127.0.0.1'
    assert params['enable_ha'] is False and params['etcd_endpoints'] == []
    # 0 keeps Mooncake's default: the task omits these; an empty address is omitted too
    assert not {'max_threads', 'client_ttl', 'default_kv_lease_ttl'} & set(params)
    assert 'cluster_id' not in params and params['enable_oplog'] is False  # without HA: neither
    ha = role_params(dict(HOST_VARS, kvpool_master_ha=True, groups={'mooncake_master': ['node2', 'node1']}))
    assert ha['enable_ha'] is True and ha['enable_oplog'] is True
    # the pool's id, from the master group's host names in any order
    assert re.match(r'^kvpool-[0-9a-f]{10}$', ha['cluster_id'])
    assert ha['cluster_id'] == role_params(dict(HOST_VARS, kvpool_master_ha=True,
                                                groups={'mooncake_master': ['node1', 'node2']}))['cluster_id']
    assert role_params(dict(HOST_VARS, kvpool_master_ha=True, kvpool_cluster_id='pool-a'))['cluster_id'] == 'pool-a'
    no_address = role_params(dict(HOST_VARS, mooncake_master_rpc_address='', mooncake_master_metrics_address=''))
    assert 'rpc_address' not in no_address and 'metrics_address' not in no_address


@needs_matrix
@pytest.mark.parametrize('version', VERSIONS)
def test_role_defaults(matrix, version):
    run = seen(matrix, 'defaults', version)
    check_serving(run)
    check_rendering(run)
    # The module's pid is the real master's: up to 0.3.12.post1 the child of the wheel's wrapper, from 0.3.13.post1
    # the main process itself (the wrapper execs the binary).
    status = run['status']
    assert status['cmdline'].endswith('/site-packages/mooncake/mooncake_master'), status
    wrapped = mc.parse_mooncake_version(version) < (0, 3, 13)
    assert (status['wrapper_pid'] == status['main_pid'] != status['pid']) if wrapped else (
        status['wrapper_pid'] is None and status['pid'] == status['main_pid']), status
    parsed = mc.parse_mooncake_version(version)
    for flag, before, since in mc.CHANGED_DEFAULTS:
        if flag not in run['settings']:
            expected = since if parsed >= (0, 3, 12) else before
            assert float(run['line'][flag]) == expected, (flag, run['line'][flag])


@needs_matrix
@pytest.mark.parametrize('version', VERSIONS)
def test_every_tunable(matrix, version):
    run = seen(matrix, 'tunables', version)
    check_serving(run)
    check_rendering(run)
    why = _excerpt(run)
    assert run['line']['rpc_thread_num'] == '32', why  # --max_threads would be capped at the CPU count
    port = int([a for a in run['argv'] if a.startswith('--http_metadata_server_port=')][0].split('=')[1])
    assert run['line']['enable_http_metadata_server'] == '1' and run['line']['http_metadata_server_port'] == str(port)
    assert run['http_metadata_listening'], why


@needs_matrix
@pytest.mark.parametrize('version', VERSIONS)
def test_ha_without_etcd(matrix, version):
    run = seen(matrix, 'ha', version)
    why = _excerpt(run)
    check_rendering(run)
    assert run['line']['enable_ha'] == '1', why
    assert 'alive_after_etcd_failure' in run, 'no etcd failure in the log within %s s\n%s' % (DEADLINE, why)
    # It waits for etcd: still running after its etcd client gave up once, serving no RPC without a leader.
    assert run['alive_after_etcd_failure'] and not run['rpc_listening'], why
    if HA_HEALTH_WITHOUT_ETCD[version]:
        view = mc.parse_ha_health(run['health'][1]) if run['health'] else None
        assert run['health'] and run['health'][0] == 200 and view, why
        assert view['role'] == 'standby' and not view['service_ready'] and view['ha_state'] != 'serving', view
    else:
        assert run['health'] is None, run['health']


@needs_matrix
@pytest.mark.parametrize('version', VERSIONS)
def test_cuda_runtime_link(version):
    """0.3.12.post1's master links libcudart.so.12, which its wheel lacks (the pre-flight relies on this ldd line);
    the other releases do not link it."""
    env = {k: v for k, v in os.environ.items() if k != 'LD_LIBRARY_PATH'}
    done = subprocess.run(['ldd', real_binary(venv(version))], capture_output=True, text=True, env=env, timeout=30,
                          check=False)
    lines = {line.strip() for line in done.stdout.splitlines()}
    if version == '0.3.12.post1':
        assert 'libcudart.so.12 => not found' in lines, done.stdout
    else:
        assert 'libcudart' not in done.stdout, done.stdout
    assert not [line for line in lines if 'not found' in line and 'libcudart' not in line], done.stdout
