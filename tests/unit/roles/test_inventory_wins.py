# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The inventory wins (issue 33): the plays take the shared defaults from role kvpool_defaults (role-default
precedence, below the inventory), never from a vars file (which outranks group_vars and host_vars).
The run of a shared default set in group_vars and host_vars is in test_plan_playbook.py."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[3]
SHARED = 'ascend.kvpool.kvpool_defaults'


def plays():
    for path in sorted((ROOT / 'playbooks').glob('*.yml')):
        for play in yaml.safe_load(path.read_text()):
            if 'hosts' in play:
                yield path.name, play


def test_every_play_loads_the_shared_defaults_as_a_role_and_no_vars_file_pins_one():
    seen = 0
    for name, play in plays():
        seen += 1
        roles = [r['role'] if isinstance(r, dict) else r for r in play.get('roles') or []]
        assert roles[:1] == [SHARED], (name, play['name'])
        for vars_file in play.get('vars_files') or []:
            assert 'kvpool_defaults' not in vars_file, (name, play['name'])
            pinned = [k for k in yaml.safe_load((ROOT / 'playbooks' / vars_file).read_text())
                      if k.startswith('kvpool_defaults_')]
            assert pinned == [], (name, vars_file)
    assert seen >= 20  # every play of site.yml, teardown.yml and the others
