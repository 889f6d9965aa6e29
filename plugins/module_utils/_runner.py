# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Run many read-only commands of one host concurrently.

hccn_tool answers one device per call and real drivers take tens of milliseconds per
answer, so the modules fan out every (device, query) pair over a thread pool instead of
looping like the guide's ``for i in {0..7}`` shell loops. Answers that ``retry_if``
accepts (e.g. ``hccn_tool is busy, please try again.``) are retried with a short backoff.

Commands run as argv lists (never a shell) with ``LANG=C``/``LC_ALL=C``, through
``subprocess.Popen.communicate`` rather than ``AnsibleModule.run_command``: run_command's
select loop gives up reading when its 1 s select times out and the child exits just before
``poll()`` (ansible/ansible#51393), which drops the whole answer of a child that was slow to
start. With dozens of children at once on a loaded node that happened to about 1 call in 300
here; ``communicate`` reads until end of file and has no such window.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

C_LOCALE = {'LANG': 'C', 'LC_ALL': 'C'}
DEFAULT_TIMEOUT = 120


def execute(argv, timeout=DEFAULT_TIMEOUT, env=None, cwd=None, locale=None):
    """Run one argv list with the C locale; return (rc, stdout, stderr) as text.

    ``env`` adds variables to the environment (``LD_LIBRARY_PATH`` of a service, for ``ldd``); the locale stays C,
    or ``locale`` (a dict such as ``{'LANG': 'C.UTF-8', 'LC_ALL': 'C.UTF-8'}``) when given. ``cwd``: its working
    directory.

    A command that outlives ``timeout`` seconds is killed with its whole process tree and reported with rc -9 and
    ``timed out after N s`` on stderr. The command runs in its own session (process group), so the kill reaches
    the children it forked too: a child that inherited stdout would otherwise hold the pipe open, and the read,
    for as long as it lives.
    """
    environ = dict(os.environ)
    environ.update(env or {})
    environ.update(locale or C_LOCALE)
    # Not AnsibleModule.run_command (ansible-core 2.21's pylint check ansible-bad-function asks for it): it has no
    # deadline, and this one must kill the command's whole process group (see above).
    try:
        proc = subprocess.Popen(  # pylint: disable=ansible-bad-function
            list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, cwd=cwd, stderr=subprocess.PIPE,
            close_fds=True, env=environ, start_new_session=True)
    except OSError as e:
        return 127, '', '%s: %s' % (argv[0], e.strerror or e)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        try:
            out, err = proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:  # a grandchild that left the group still holds the pipes
            out, err = b'', b''
        err = (err or b'') + (b'\n(timed out after %s s: the command and its children were killed)'
                              % str(timeout).encode())
        return -9, out.decode('utf-8', 'replace'), err.decode('utf-8', 'replace')
    return proc.returncode, out.decode('utf-8', 'replace'), err.decode('utf-8', 'replace')


def kill_group(proc):
    """SIGKILL the process group the command leads (it was started in its own session), then the command. Only a
    process of ours that was not reaped yet (its pid cannot have been reused) and whose pid is above 1: ``killpg(0)``
    would signal the module's own group, and ``killpg(1)`` init's."""
    if not isinstance(proc.pid, int) or proc.pid <= 1 or proc.returncode is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    try:
        proc.kill()
    except OSError:
        pass


def run_one(argv, retry_if=None, retries=5, retry_delay=0.1, timeout=DEFAULT_TIMEOUT):
    """Run one argv; retry while ``retry_if(stdout, stderr)`` is true.

    Returns a dict with argv, rc, stdout, stderr, attempts and elapsed_ms.
    """
    started = time.monotonic()
    attempts = 0
    while True:
        attempts += 1
        rc, out, err = execute(argv, timeout)
        if retry_if is None or attempts > retries or not retry_if(out, err):
            break
        time.sleep(retry_delay * attempts)
    return {
        'argv': list(argv),
        'rc': rc,
        'stdout': out,
        'stderr': err,
        'attempts': attempts,
        'elapsed_ms': round((time.monotonic() - started) * 1000.0, 1),
    }


def run_parallel(argvs, max_workers=32, retry_if=None, retries=5, retry_delay=0.1, timeout=DEFAULT_TIMEOUT):
    """Run a list of argv lists concurrently; results come back in the same order."""
    argvs = [list(a) for a in argvs]
    if not argvs:
        return []
    workers = max(1, min(int(max_workers), len(argvs)))
    if workers == 1:
        return [run_one(a, retry_if, retries, retry_delay, timeout) for a in argvs]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(run_one, a, retry_if, retries, retry_delay, timeout) for a in argvs]
        return [f.result() for f in futures]
