# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The router's record (roles/kvpool_router/tasks/run.yml): its tasks after the router's start, run on the controller
(connection local) in a temporary directory with the router's result given. A directory the operator chose that
exists keeps its mode (a sticky /tmp-like directory stays 1777); a missing one is made 0755; the record is written.
teardown.yml removes only the default record's directory."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ansible_collections.ascend.kvpool.tests.unit.messages import assert_names

ROOT = Path(__file__).resolve().parents[3]
PLAYBOOK = Path(sys.executable).parent / 'ansible-playbook'
RUN = yaml.safe_load((ROOT / 'roles' / 'kvpool_router' / 'tasks' / 'run.yml').read_text())
RESULT = {'unit': 'kvpool-router.service', 'endpoint': 'http://10.0.0.9:30000',
          'metrics_url': 'http://10.0.0.9:29000/metrics', 'workers': ['http://10.0.0.1:8002']}


def run_record_tasks(tmp_path, record_path, default_path, state='started', fails=False):
    tasks = [t for t in RUN if 'ascend.kvpool.vllm_router' not in t]  # everything after the router's start
    play = [{'hosts': 'localhost', 'gather_facts': False, 'connection': 'local', 'tasks': tasks, 'vars': {
        'ansible_python_interpreter': sys.executable, 'kvpool_router_state': state,
        'kvpool_router_record_path': str(record_path), 'kvpool_defaults_router_record_path': str(default_path),
        'kvpool_router_result': RESULT, 'kvpool_router_policy_choice': {'policy': 'cache_aware'}}}]
    playbook = tmp_path / 'record.yml'
    playbook.write_text(yaml.safe_dump(play))
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / 'ansible.cfg'), ANSIBLE_LOCALHOST_WARNING='false',
               ANSIBLE_INVENTORY_UNPARSED_WARNING='false')
    run = subprocess.run([str(PLAYBOOK), '-i', 'localhost,', str(playbook)], capture_output=True, text=True,
                         env=env, cwd=str(tmp_path), check=False)
    if fails:
        assert run.returncode != 0, run.stdout[-3000:]
        return run.stdout
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    return json.loads(Path(record_path).read_text()) if state != 'stopped' else None


@pytest.mark.skipif(not PLAYBOOK.exists(), reason='ansible-playbook not next to this Python')
def test_an_existing_directory_keeps_its_mode_and_a_missing_one_is_made(tmp_path):
    sticky = tmp_path / 'shared'
    sticky.mkdir()
    os.chmod(str(sticky), 0o1777)
    default = tmp_path / 'state' / 'router' / 'kvpool-router.json'
    record = run_record_tasks(tmp_path, sticky / 'kvpool-router.json', default)
    assert stat.S_IMODE(sticky.stat().st_mode) == 0o1777  # not chmod'ed to 0755: the sticky bit stays
    assert record == dict(RESULT, policy='cache_aware', written_by='ascend.kvpool.kvpool_router')
    run_record_tasks(tmp_path, default, default)
    assert stat.S_IMODE(default.parent.stat().st_mode) == 0o755


def test_teardown_removes_only_the_default_records_directory():
    plays = yaml.safe_load((ROOT / 'playbooks' / 'teardown.yml').read_text())
    router = [p for p in plays if 'router' in p.get('tags', [])][0]
    finds = [t['ansible.builtin.command']['argv'] for t in router['tasks'] if 'ansible.builtin.command' in t]
    assert finds and all('kvpool_router_record_path' not in ' '.join(argv) for argv in finds), finds
    assert any('kvpool_defaults_router_record_path | dirname' in ' '.join(argv) and '-empty' in argv
               for argv in finds), finds


@pytest.mark.skipif(not PLAYBOOK.exists(), reason='ansible-playbook not next to this Python')
def test_a_file_at_the_records_path_the_role_did_not_write_is_neither_replaced_nor_removed(tmp_path):
    """Ownership (issue 32): the record is replaced or removed only when the role wrote it; a record of an earlier
    release (no written_by, the same layout) is the role's."""
    path, default = tmp_path / 'kvpool-router.json', tmp_path / 'state' / 'kvpool-router.json'
    path.write_text('{"mine": true}\n')
    for state in ('started', 'stopped'):
        out = run_record_tasks(tmp_path, path, default, state=state, fails=True)
        assert_names(out, str(path), 'kvpool_router_record_path', 'not written by role ascend.kvpool.kvpool_router',
                     'neither replaced nor removed', 'Fix')
        assert path.read_text() == '{"mine": true}\n'
    earlier = dict(RESULT, policy='round_robin')
    path.write_text(json.dumps(earlier, indent=2, sort_keys=True, separators=(',', ': ')) + '\n')
    assert run_record_tasks(tmp_path, path, default)['written_by'] == 'ascend.kvpool.kvpool_router'
    run_record_tasks(tmp_path, path, default, state='stopped')
    assert not path.exists()
