# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Lifecycle of one long-running detached process, on the host or inside a named container.

Used by the modules that own a daemon (``mooncake_master``, the store probe's holder, later ``vllm_server``):

- ``ProcessTarget(module, container=None)`` runs commands and reads/writes files either directly on the host
  or through ``docker exec <container>`` (the vLLM-Ascend guide runs its daemons inside the ``vllm-ascend``
  container, which shares the host network).
- ``start()`` launches an argv detached from the module (own session via ``setsid``, stdin from
  ``/dev/null``, stdout+stderr to a log file, the previous log kept as ``<log>.1``) and records its pid in a
  pid file. The launch is one ``sh -c`` with the argv passed as positional parameters, never interpolated
  into shell text. The pid is the daemon's own (``setsid`` of a non-group-leader does not fork).
- ``running_pid()`` says whether the pid of a pid file is alive (not a zombie) and, when asked, still runs
  the expected command line (protects against pid reuse).
- ``stop()`` sends SIGTERM to the process group, waits briskly, then SIGKILL.
- ``log_tail()`` returns the last lines of the log for error messages.
- ``wait_until()`` / ``tcp_open()`` / ``http_status()`` poll readiness briskly with an overall timeout.
  The polls run from the module's own process, i.e. in the host's network namespace: a container must
  share the host network (``--net=host``, as in the guide) for its ports to be probed on 127.0.0.1.

Everything that mutates is a method the caller invokes only outside check mode; reading methods are safe in
check mode.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import glob
import os
import signal
import socket
import time

from urllib.error import HTTPError
from urllib.request import ProxyHandler, Request, build_opener

C_LOCALE = {'LANG': 'C', 'LC_ALL': 'C'}

# sh program of start(): $1 log, $2 pid file, $3 working directory, then the argv.
START_SCRIPT = (
    'log=$1; pidf=$2; wd=$3; shift 3; '
    'if [ -f "$log" ]; then mv -f "$log" "$log.1"; fi; '
    'cd "$wd" || exit 97; '
    'if command -v setsid >/dev/null 2>&1; then '
    'setsid "$@" >"$log" 2>&1 </dev/null & '
    'else nohup "$@" >"$log" 2>&1 </dev/null & fi; '
    'echo $! >"$pidf"; echo $!'
)

# sh program of signal delivery: $1 signal name, $2 pid. The group first (the daemon leads its own session),
# then the pid alone (nohup fallback, or a process that changed its group).
KILL_SCRIPT = 'kill -s "$1" -- "-$2" 2>/dev/null || kill -s "$1" "$2" 2>/dev/null'


class ProcError(Exception):
    """A process operation failed; the message is meant for the operator."""


def parse_pid(text):
    """The pid in a pid file's text, or None."""
    if text is None:
        return None
    if isinstance(text, bytes):
        text = text.decode('utf-8', 'replace')
    text = text.strip().split('\n')[0].strip() if text.strip() else ''
    if not text.isdigit():
        return None
    pid = int(text)
    return pid if pid > 1 else None


def parse_status(status_text):
    """(state letter, live threads) of a /proc/<pid>/status text; (None, 0) when unreadable.

    The thread count matters: when a multi-threaded daemon exits, its main thread is a zombie (``Z``) while the
    other threads still run and still hold its sockets open. Only a zombie with no live thread left is gone.
    """
    if not status_text:
        return None, 0
    if isinstance(status_text, bytes):
        status_text = status_text.decode('utf-8', 'replace')
    state, threads = None, 0
    for line in status_text.splitlines():
        key, dummy, val = line.partition(':')
        val = val.strip()
        if key == 'State' and val:
            state = val[0]
        elif key == 'Threads' and val.isdigit():
            threads = int(val)
    return state, threads


def stat_fields(stat_text):
    """Fields 3.. of a /proc/<pid>/stat line (after the parenthesised command name), or None."""
    if not stat_text:
        return None
    if isinstance(stat_text, bytes):
        stat_text = stat_text.decode('utf-8', 'replace')
    close = stat_text.rfind(')')
    if close < 0:
        return None
    return stat_text[close + 1:].split()


def parse_stat_state(stat_text):
    """The one-letter state of a /proc/<pid>/stat line (R, S, D, Z, T, ...), or None."""
    rest = stat_fields(stat_text)
    return rest[0] if rest else None


def is_gone(state, threads):
    """Whether a process in this state with this many threads has finished (its resources are released)."""
    if state is None:
        return True
    if state in ('Z', 'X', 'x'):
        return threads <= 1
    return False


def parse_cmdline(raw):
    """/proc/<pid>/cmdline (NUL separated) as a list of str."""
    if raw is None:
        return None
    if isinstance(raw, str):
        raw = raw.encode('utf-8', 'surrogateescape')
    parts = raw.split(b'\0')
    if parts and parts[-1] == b'':
        parts = parts[:-1]
    return [p.decode('utf-8', 'replace') for p in parts]


def cmdline_matches(actual, expected):
    """Whether a live command line is the expected one.

    The arguments after argv[0] must be equal, and the program must have the same basename. Two launchers are
    tolerated: an entry-point wrapper that ``exec``s a packaged binary (``mooncake_master`` on PATH is a Python
    script that becomes ``.../site-packages/mooncake/mooncake_master``: same pid and arguments, other directory),
    and a script run by its ``#!`` interpreter (``python3 /usr/local/bin/mooncake_master ...``).
    """
    if not actual or not expected:
        return False
    expected = [str(a) for a in expected]
    name = os.path.basename(expected[0])
    for skip in (0, 1):
        if len(actual) != len(expected) + skip:
            continue
        if list(actual[skip + 1:]) == expected[1:] and os.path.basename(actual[skip]) == name:
            return True
    return False


def tail_text(text, lines=40, max_chars=6000):
    """The last ``lines`` lines of ``text`` (at most ``max_chars`` characters), as one string."""
    if not text:
        return ''
    if isinstance(text, bytes):
        text = text.decode('utf-8', 'replace')
    out = '\n'.join(text.rstrip('\n').split('\n')[-int(lines):]) if lines > 0 else ''
    if len(out) > max_chars:
        out = out[-max_chars:]
    return out


def tcp_open(host, port, timeout=0.5):
    """True when a TCP connection to host:port is accepted within ``timeout`` seconds."""
    try:
        sock = socket.create_connection((host, int(port)), timeout=timeout)
    except (OSError, socket.error, ValueError):
        return False
    try:
        sock.close()
    except (OSError, socket.error):
        pass
    return True


def http_status(url, timeout=1.0, headers=None):
    """(status, body) of a GET of ``url`` (proxies bypassed); status None when nothing answered.

    ``headers`` adds request headers (e.g. ``Authorization``); they are sent, never returned or logged.
    """
    opener = build_opener(ProxyHandler({}))
    sent = {'User-Agent': 'ascend.kvpool'}
    sent.update(headers or {})
    try:
        resp = opener.open(Request(url, headers=sent), timeout=timeout)
        try:
            return resp.getcode(), resp.read(65536).decode('utf-8', 'replace')
        finally:
            resp.close()
    except HTTPError as exc:
        try:
            body = exc.read(65536).decode('utf-8', 'replace')
        except Exception:  # pylint: disable=broad-except
            body = ''
        return exc.code, body
    except Exception:  # pylint: disable=broad-except  # URLError, OSError, http.client.RemoteDisconnected, ...
        return None, ''


def wait_until(checks, timeout, interval=0.1, alive=None, clock=time.monotonic, sleep=time.sleep):
    """Poll named checks until all pass, the process dies, or ``timeout`` seconds elapse.

    ``checks`` is a list of (name, callable returning bool); a check that passed is not polled again.
    ``alive`` is an optional callable; when it returns False the wait ends at once.
    Returns a dict: ready, elapsed (s), passed (names), pending (names), died, polls.
    """
    started = clock()
    deadline = started + max(0.0, float(timeout))
    pending = list(checks)
    passed = []
    polls = 0
    died = False
    while True:
        polls += 1
        still = []
        for name, fn in pending:
            if fn():
                passed.append(name)
            else:
                still.append((name, fn))
        pending = still
        if not pending:
            break
        if alive is not None and not alive():
            died = True
            break
        if clock() >= deadline:
            break
        sleep(max(0.0, min(float(interval), deadline - clock())))
    return {
        'ready': not pending,
        'elapsed': round(clock() - started, 3),
        'passed': passed,
        'pending': [item[0] for item in pending],
        'died': died,
        'polls': polls,
    }


class ProcessTarget(object):
    """Where the process lives: the host (``container=None``) or a running docker container."""

    def __init__(self, module, container=None, docker='docker'):
        self.module = module
        self.container = container or None
        self.docker = docker

    # --- commands ------------------------------------------------------------------------------------------
    def wrap(self, argv, env_names=()):
        """argv as run on the target (prefixed with ``docker exec -i <container>`` for a container).

        ``env_names`` are variables of the caller's environment handed on into the container by name
        (``docker exec -e NAME``: docker takes the value from its own environment, not from its command line).
        """
        argv = [str(a) for a in argv]
        if self.container:
            passed = []
            for name in env_names:
                passed.extend(['-e', str(name)])
            return [self.docker, 'exec', '-i'] + passed + [self.container] + argv
        return argv

    def run(self, argv, data=None, env=None):
        """(rc, stdout, stderr) of argv on the target, LANG=C.

        ``env`` adds variables through the environment of the command (and into a container by name), never
        through its command line: an argv is readable by every user of the host in ``/proc/<pid>/cmdline``.
        """
        environ = dict(C_LOCALE)
        environ.update(env or {})
        kwargs = {'environ_update': environ, 'expand_user_and_vars': False}
        if data is not None:
            kwargs['data'] = data
            kwargs['binary_data'] = True
        return self.module.run_command(self.wrap(argv, sorted(env or {})), **kwargs)

    def describe(self):
        return 'container %s' % self.container if self.container else 'host'

    def check_container(self):
        """Raise ProcError unless the container exists and runs (no-op on the host)."""
        if not self.container:
            return
        rc, out, err = self.module.run_command(
            [self.docker, 'inspect', '--format', '{{.State.Running}}', self.container],
            environ_update=dict(C_LOCALE), expand_user_and_vars=False)
        if rc != 0:
            raise ProcError('container %s not found (docker inspect: %s)'
                            % (self.container, (err or out).strip()))
        if out.strip() != 'true':
            raise ProcError('container %s is not running; start it first' % self.container)

    def which(self, name, extra_dirs=()):
        """Absolute path of an executable on the target's PATH or in ``extra_dirs`` (globs allowed), or None."""
        if '/' in name:
            return name if self.is_executable(name) else None
        if not self.container:
            dirs = []
            for d in extra_dirs:
                dirs.extend(sorted(glob.glob(d)) if any(c in d for c in '*?[') else [d])
            path = self.module.get_bin_path(name, opt_dirs=dirs)
            return path
        script = ('n=$1; shift; command -v "$n" 2>/dev/null && exit 0; '
                  'for d in "$@"; do for f in $d/$n; do [ -x "$f" ] && { echo "$f"; exit 0; }; done; done; exit 1')
        rc, out, dummy = self.run(['sh', '-c', script, 'kvpool-which', name] + list(extra_dirs))
        if rc == 0 and out.strip():
            return out.strip().split('\n')[0]
        return None

    # --- files -----------------------------------------------------------------------------------------------
    def is_executable(self, path):
        if not self.container:
            return os.path.isfile(path) and os.access(path, os.X_OK)
        rc = self.run(['test', '-x', path])[0]
        return rc == 0

    def read_file(self, path):
        """Bytes of a file on the target, or None when it does not exist or cannot be read."""
        if not self.container:
            try:
                with open(path, 'rb') as fh:
                    return fh.read()
            except (IOError, OSError):
                return None
        rc, out, dummy = self.module.run_command(self.wrap(['cat', path]), environ_update=dict(C_LOCALE),
                                                 encoding=None, expand_user_and_vars=False)
        if rc != 0:
            return None
        return out

    def write_file(self, path, content, mode=0o644):
        """Write a file atomically on the target (parent directory created)."""
        if isinstance(content, str):
            content = content.encode('utf-8')
        if not self.container:
            self.makedirs(os.path.dirname(path))
            tmp = '%s.tmp.%d' % (path, os.getpid())
            with open(tmp, 'wb') as fh:
                fh.write(content)
            os.chmod(tmp, mode)
            os.rename(tmp, path)
            return
        script = 'mkdir -p "$(dirname "$1")" && cat >"$1.tmp" && chmod %o "$1.tmp" && mv -f "$1.tmp" "$1"' % mode
        rc, out, err = self.run(['sh', '-c', script, 'kvpool-write', path], data=content)
        if rc != 0:
            raise ProcError('cannot write %s in %s: %s' % (path, self.describe(), (err or out).strip()))

    def remove_file(self, path):
        if not self.container:
            try:
                os.unlink(path)
            except OSError as exc:
                if exc.errno != errno.ENOENT:
                    raise
            return
        self.run(['rm', '-f', path])

    def makedirs(self, path, mode=0o755):
        if not path:
            return
        if not self.container:
            if not os.path.isdir(path):
                os.makedirs(path, mode)
            return
        rc, out, err = self.run(['mkdir', '-p', path])
        if rc != 0:
            raise ProcError('cannot create %s in %s: %s' % (path, self.describe(), (err or out).strip()))

    # --- processes -------------------------------------------------------------------------------------------
    def proc_info(self, pid):
        """(state letter, live threads, cmdline list) of a pid on the target; (None, 0, None) when it is gone."""
        if not self.container:
            status = self.read_file('/proc/%d/status' % pid)
            if status is None:
                return None, 0, None
            state, threads = parse_status(status)
            return state, threads, parse_cmdline(self.read_file('/proc/%d/cmdline' % pid))
        # One exec for both files; the status text never contains a NUL, the cmdline is NUL-separated.
        script = 'cat "/proc/$1/status" && printf "\\n--kvpool--\\n" && cat "/proc/$1/cmdline"'
        rc, out, dummy = self.module.run_command(self.wrap(['sh', '-c', script, 'kvpool-proc', str(pid)]),
                                                 environ_update=dict(C_LOCALE), encoding=None,
                                                 expand_user_and_vars=False)
        if rc != 0 or not out:
            return None, 0, None
        status, dummy, cmdline = out.partition(b'\n--kvpool--\n')
        state, threads = parse_status(status)
        return state, threads, parse_cmdline(cmdline)

    def pid_alive(self, pid, expect_argv=None):
        """Whether pid runs (a zombie with no live thread does not) and, when ``expect_argv`` is given, runs that
        command line."""
        if not pid:
            return False
        state, threads, cmdline = self.proc_info(pid)
        if is_gone(state, threads):
            return False
        if expect_argv is not None and not cmdline_matches(cmdline, expect_argv):
            return False
        return True

    def read_pid(self, pid_file):
        return parse_pid(self.read_file(pid_file))

    def running_pid(self, pid_file, expect_argv=None):
        """The pid recorded in ``pid_file`` when that process is alive (and runs ``expect_argv``), else None."""
        pid = self.read_pid(pid_file)
        if pid and self.pid_alive(pid, expect_argv):
            return pid
        return None

    def start(self, argv, pid_file, log_file, env=None, cwd='/', secret_env=None):
        """Start argv detached; returns its pid. ``env`` adds variables (through ``env K=V``).

        ``secret_env`` adds variables that must not be seen by other users (an API key): they are inherited
        through the environment of the launch (see ``run``), never written into a command line, where ``ps``
        shows them. Only the process itself and root can read its ``/proc/<pid>/environ``.
        """
        argv = [str(a) for a in argv]
        if env:
            argv = ['env'] + ['%s=%s' % (k, v) for k, v in sorted(env.items())] + argv
        for d in set([os.path.dirname(pid_file), os.path.dirname(log_file)]):
            self.makedirs(d)
        rc, out, err = self.run(['sh', '-c', START_SCRIPT, 'kvpool-start', log_file, pid_file, cwd or '/'] + argv,
                                env=secret_env)
        pid = parse_pid(out)
        if rc != 0 or not pid:
            raise ProcError('could not launch %s in %s (rc %s): %s'
                            % (argv[0], self.describe(), rc, (err or out).strip()))
        return pid

    def signal(self, pid, signame):
        """Send a signal (name without SIG) to the process group led by pid, else to pid alone."""
        if not self.container:
            signum = getattr(signal, 'SIG' + signame)
            try:
                os.killpg(pid, signum)
                return True
            except OSError:
                pass
            try:
                os.kill(pid, signum)
                return True
            except OSError:
                return False
        rc = self.run(['sh', '-c', KILL_SCRIPT, 'kvpool-kill', signame, str(pid)])[0]
        return rc == 0

    def stop(self, pid, timeout=10.0, interval=0.1, pid_file=None, sleep=time.sleep, clock=time.monotonic):
        """SIGTERM, wait up to ``timeout`` s, then SIGKILL. Returns 'term', 'kill' or 'gone'."""
        how = 'gone'
        if pid and self.pid_alive(pid):
            self.signal(pid, 'TERM')
            how = 'term'
            res = wait_until([('exited', lambda: not self.pid_alive(pid))], timeout, interval,
                             clock=clock, sleep=sleep)
            if not res['ready']:
                self.signal(pid, 'KILL')
                how = 'kill'
                res = wait_until([('exited', lambda: not self.pid_alive(pid))], 5.0, interval,
                                 clock=clock, sleep=sleep)
                if not res['ready']:
                    raise ProcError('pid %d in %s survived SIGKILL' % (pid, self.describe()))
        if pid_file:
            self.remove_file(pid_file)
        return how

    def log_tail(self, log_file, lines=40):
        return tail_text(self.read_file(log_file), lines)
