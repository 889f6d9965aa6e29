# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The pool probe's record (roles/mooncake_config/tasks/probe.yml, the `always` of the probe): written with the
collection's header when every node read the object, removed when one did not, and neither replaced nor removed when
the file at mooncake_config_probe_marker is not the role's (issue 32, ownership). Its tasks run on the controller
(connection local) in a temporary directory, the probe's outcome given."""

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
PROBE = yaml.safe_load((ROOT / 'roles' / 'mooncake_config' / 'tasks' / 'probe.yml').read_text())
LEGACY = "pool proven: every node of the play read the probe's object from this node\n"


def run_record_tasks(tmp_path, marker, proven):
    block = [t for t in PROBE if 'block' in t][0]
    tasks = [t for t in block['always'] if 'ascend.kvpool.mooncake_store_probe' not in t]
    play = [{'hosts': 'localhost', 'gather_facts': False, 'connection': 'local', 'tasks': tasks, 'vars': {
        'ansible_python_interpreter': sys.executable, 'mooncake_config_probe_writer_host': 'localhost',
        'mooncake_config_probe_marker': str(marker), 'mooncake_config__proven': proven}}]
    playbook = tmp_path / 'record.yml'
    playbook.write_text(yaml.safe_dump(play))
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / 'ansible.cfg'), ANSIBLE_LOCALHOST_WARNING='false',
               ANSIBLE_INVENTORY_UNPARSED_WARNING='false')
    return subprocess.run([str(PLAYBOOK), '-i', 'localhost,', str(playbook)], capture_output=True, text=True,
                          env=env, cwd=str(tmp_path), check=False)


@pytest.mark.skipif(not PLAYBOOK.exists(), reason='ansible-playbook not next to this Python')
def test_the_probes_record_is_replaced_or_removed_only_when_the_role_wrote_it(tmp_path):
    marker = tmp_path / 'mooncake.json.proven'
    marker.write_text('my notes\n')
    for proven in (True, False):
        run = run_record_tasks(tmp_path, marker, proven)
        assert run.returncode != 0, run.stdout[-3000:]
        assert_names(run.stdout, str(marker), 'mooncake_config_probe_marker',
                     'not written by role ascend.kvpool.mooncake_config', 'neither replaced nor removed', 'Fix')
        assert marker.read_text() == 'my notes\n'
    marker.write_text(LEGACY)  # written by an earlier release: the role's
    run = run_record_tasks(tmp_path, marker, True)
    assert run.returncode == 0, run.stdout[-3000:]
    assert marker.read_text().startswith('# Written by ascend.kvpool ') and marker.read_text().endswith(LEGACY)
    run = run_record_tasks(tmp_path, marker, False)
    assert run.returncode == 0 and not marker.exists(), run.stdout[-3000:]
