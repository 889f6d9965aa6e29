# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The parallel runner: real child processes, C locale, order kept, busy retries, no lost answers."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import sys
import time

from ansible_collections.ascend.kvpool.plugins.module_utils import _runner

PY = [sys.executable, '-S', '-c']


def test_c_locale_and_argv_without_shell():
    res = _runner.run_one(PY + ['import os, sys; print(os.environ["LANG"], os.environ["LC_ALL"], sys.argv[1])',
                                'a b; echo x'])
    assert res['rc'] == 0 and res['stdout'] == 'C C a b; echo x\n'


def test_results_keep_their_order_and_every_answer_arrives():
    # Children that are slow to answer, many at once: every answer must come back (ansible/ansible#51393).
    argvs = [PY + ['import time, sys; time.sleep(0.05 * (%d %% 3)); print(%d)' % (i, i)] for i in range(48)]
    res = _runner.run_parallel(argvs, max_workers=48)
    assert [r['stdout'] for r in res] == ['%d\n' % i for i in range(48)]


def test_busy_answers_are_retried(tmp_path):
    counter = tmp_path / 'n'
    counter.write_text('0')
    code = ('import pathlib, sys; p = pathlib.Path(sys.argv[1]); n = int(p.read_text()); p.write_text(str(n + 1));'
            'print("hccn_tool is busy, please try again." if n < 2 else "link status: UP")')
    res = _runner.run_one(PY + [code, str(counter)], retry_if=lambda out, err: 'busy' in out, retry_delay=0.01)
    assert res['attempts'] == 3 and res['stdout'] == 'link status: UP\n'


def test_hung_command_is_killed_and_reported():
    res = _runner.run_one(PY + ['import time; time.sleep(30)'], timeout=1)
    assert res['rc'] == -9 and 'timed out after 1 s' in res['stderr']


def test_a_timeout_kills_the_children_that_hold_stdout_too():
    # A tool that forks a long sleep which inherits its stdout (an npu-smi that forks): before, the read waited for
    # the child (a 3 s timeout took the child's whole life); now the group is killed and the answer comes at once.
    started = time.monotonic()
    res = _runner.run_one(['/bin/sh', '-c', 'sleep 60 & echo started; wait'], timeout=1)
    assert time.monotonic() - started < 10
    assert res['rc'] == -9 and 'timed out after 1 s' in res['stderr'] and res['stdout'] == 'started\n'


def test_missing_binary_is_an_answer_not_a_crash():
    res = _runner.run_one(['/nonexistent/hccn_tool', '-i', '0', '-link', '-g'])
    assert res['rc'] == 127 and '/nonexistent/hccn_tool' in res['stderr']
