# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""teardown.yml removes whole directories: only the collection's own (issue 32, files it did not write)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from pathlib import Path

import pytest
import yaml

from ansible_collections.ascend.kvpool.plugins.plugin_utils.ownership import teardown_dir_problems
from ansible_collections.ascend.kvpool.tests.unit.messages import assert_names

TEARDOWN = Path(__file__).resolve().parents[4] / 'playbooks' / 'teardown.yml'


def test_the_collections_default_directories_are_removed():
    assert teardown_dir_problems(['/etc/ascend-kvpool', '/var/lib/ascend-kvpool'], host='node1') == []


@pytest.mark.parametrize('path', ['/etc/ascend', '/var/lib', '/opt/models'])
def test_a_default_directory_set_to_a_shared_one_is_not_removed(path):
    """kvpool_defaults_config_dir: /etc/ascend (a shared directory): refused, named, with the fix."""
    problems = teardown_dir_problems(['/etc/ascend-kvpool', path], host='node1')
    assert len(problems) == 1
    assert_names(problems[0], 'node1', path, 'kvpool_defaults_config_dir', 'kvpool_teardown_paths')


@pytest.mark.parametrize('path', ['/', '/etc', '/var/', 'ascend-kvpool', '/etc/../etc', '', '//usr'])
def test_root_a_top_level_directory_or_a_relative_path_is_never_removed_even_when_listed(path):
    for explicit in (False, True):
        problems = teardown_dir_problems([path], explicit=explicit, host='node2')
        assert len(problems) == 1
        assert_names(problems[0], 'node2', repr(path), 'kvpool_teardown_paths')


def test_directories_the_operator_lists_are_theirs_to_remove():
    assert teardown_dir_problems(['/data/kv-cache', '/srv/pool/state'], explicit=True) == []


def test_the_playbook_checks_before_it_removes():
    """The assert runs before the removal, over the same list (check mode too: an assert changes nothing)."""
    plays = yaml.safe_load(TEARDOWN.read_text())
    tasks = [t['name'] for play in plays for t in play.get('tasks') or []]
    check = tasks.index('Refuse to remove a directory that may hold files the collection did not write')
    assert check + 1 == tasks.index('Remove the state directories')
    assert 'teardown_dir_problems' in TEARDOWN.read_text()
