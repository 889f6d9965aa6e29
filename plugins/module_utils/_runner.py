# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Run many read-only commands of one host concurrently.

hccn_tool answers one device per call and real drivers take tens of milliseconds per
answer, so the modules fan out every (device, query) pair over a thread pool instead of
looping like the guide's ``for i in {0..7}`` shell loops. Answers that ``retry_if``
accepts (e.g. ``hccn_tool is busy, please try again.``) are retried with a short backoff.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import time
from concurrent.futures import ThreadPoolExecutor

C_LOCALE = {'LANG': 'C', 'LC_ALL': 'C'}


def run_one(module, argv, retry_if=None, retries=5, retry_delay=0.1):
    """Run one argv with LANG=C; retry while ``retry_if(stdout, stderr)`` is true.

    Returns a dict with argv, rc, stdout, stderr, attempts and elapsed_ms.
    """
    started = time.monotonic()
    attempts = 0
    while True:
        attempts += 1
        rc, out, err = module.run_command(list(argv), environ_update=dict(C_LOCALE))
        if retry_if is None or attempts > retries or not retry_if(out, err):
            break
        time.sleep(retry_delay * attempts)
    return {
        'argv': list(argv),
        'rc': rc,
        'stdout': out or '',
        'stderr': err or '',
        'attempts': attempts,
        'elapsed_ms': round((time.monotonic() - started) * 1000.0, 1),
    }


def run_parallel(module, argvs, max_workers=32, retry_if=None, retries=5, retry_delay=0.1):
    """Run a list of argv lists concurrently; results come back in the same order."""
    argvs = [list(a) for a in argvs]
    if not argvs:
        return []
    workers = max(1, min(int(max_workers), len(argvs)))
    if workers == 1:
        return [run_one(module, a, retry_if, retries, retry_delay) for a in argvs]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(run_one, module, a, retry_if, retries, retry_delay) for a in argvs]
        return [f.result() for f in futures]
