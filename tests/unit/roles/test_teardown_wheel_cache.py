# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""teardown.yml removes kvpool_router_wheel_cache_dir only when it is the role's wheel cache (issue 32): its marker
(written by roles/kvpool_router/tasks/install.yml) and nothing but wheels beside it. The teardown's wheel cache
tasks run on the controller (connection local) over a temporary directory."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ansible_collections.ascend.kvpool.tests.unit.messages import assert_names

ROOT = Path(__file__).resolve().parents[3]
PLAYBOOK = Path(sys.executable).parent / 'ansible-playbook'
PLAYS = yaml.safe_load((ROOT / 'playbooks' / 'teardown.yml').read_text())
INSTALL = yaml.safe_load((ROOT / 'roles' / 'kvpool_router' / 'tasks' / 'install.yml').read_text())


def marker_task():
    block = [t for t in INSTALL if 'block' in t][0]['block']
    return [t for t in block if t['name'] == "Mark the wheel cache as the role's"][0]


def run_teardown_tasks(tmp_path, cache, tasks):
    play = [{'hosts': 'localhost', 'gather_facts': False, 'connection': 'local', 'tasks': tasks, 'vars': {
        'ansible_python_interpreter': sys.executable, 'kvpool_router_wheel_cache_dir': str(cache),
        'kvpool_router_wheel_dir': str(tmp_path), 'kvpool_router_virtualenv': str(tmp_path / 'no-venv')}}]
    playbook = tmp_path / 'teardown_wheels.yml'
    playbook.write_text(yaml.safe_dump(play))
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / 'ansible.cfg'), ANSIBLE_LOCALHOST_WARNING='false',
               ANSIBLE_INVENTORY_UNPARSED_WARNING='false')
    return subprocess.run([str(PLAYBOOK), '-i', 'localhost,', str(playbook)], capture_output=True, text=True,
                          env=env, cwd=str(tmp_path), check=False)


@pytest.mark.skipif(not PLAYBOOK.exists(), reason='ansible-playbook not next to this Python')
def test_teardown_removes_the_wheel_cache_only_when_the_role_put_it_there(tmp_path):
    router = [p for p in PLAYS if 'router' in p.get('tags', [])][0]
    tasks = [t for t in router['tasks'] if 'wheel cache' in t['name']]
    assert len(tasks) == 3, [t['name'] for t in tasks]
    cache = tmp_path / 'cache'
    cache.mkdir()
    (cache / 'vllm_router-0.1.17-py3-none-any.whl').write_text('wheel')
    (cache / 'notes.txt').write_text('mine')                                   # no marker, a file not a wheel
    run = run_teardown_tasks(tmp_path, cache, tasks)
    assert run.returncode != 0
    assert_names(run.stdout, 'kvpool_router_wheel_cache_dir %s' % cache, 'no marker', str(cache / 'notes.txt'),
                 'not removed', 'Fix:')
    assert (cache / 'notes.txt').exists() and (cache / 'vllm_router-0.1.17-py3-none-any.whl').exists()
    (cache / 'notes.txt').unlink()
    run = run_teardown_tasks(tmp_path, cache, [marker_task()] + tasks)        # the role's marker: removed
    assert run.returncode == 0, run.stdout[-3000:]
    assert not cache.exists()
