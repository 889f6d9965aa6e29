# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The action plugins' report writer: the whole file or the previous one, never half of it."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.ascend.kvpool.plugins.plugin_utils.report_files import (
    host_values,
    write_atomic,
    write_json_report,
)


def test_writes_the_file_and_creates_its_directory(tmp_path):
    path = str(tmp_path / 'reports' / 'deep' / 'r.json')
    write_atomic(path, '{"ok": true}\n')
    with open(path) as handle:
        assert handle.read() == '{"ok": true}\n'
    assert os.listdir(os.path.dirname(path)) == ['r.json']        # no temporary file left behind


def test_replaces_an_existing_report_whole(tmp_path):
    path = str(tmp_path / 'r.md')
    write_atomic(path, 'old\n')
    write_atomic(path, 'new\n')
    with open(path) as handle:
        assert handle.read() == 'new\n'


def test_an_unwritable_place_raises_and_keeps_the_old_report(tmp_path):
    path = str(tmp_path / 'r.json')
    write_atomic(path, 'old\n')
    blocker = tmp_path / 'file'
    blocker.write_text('x')
    with pytest.raises(OSError):
        write_atomic(str(blocker / 'r.json'), 'new\n')             # parent is a file
    with open(path) as handle:
        assert handle.read() == 'old\n'


def test_host_values_keeps_the_hosts_that_have_the_variable_as_plain_data():
    class Lazy(object):  # a templated value that is not JSON by itself
        def __str__(self):
            return 'rendered'

    hostvars = {'node1': {'st': [{'port': 8002, 'extra': Lazy()}]}, 'node2': {'other': 1}}
    assert host_values(hostvars, 'st', ['node1', 'node2', 'node3']) == {'node1': [{'port': 8002, 'extra': 'rendered'}]}


def test_write_json_report_expands_the_path_and_writes_sorted_json(tmp_path, monkeypatch):
    monkeypatch.setenv('HOME', str(tmp_path))
    path = write_json_report('~/reports/r.json', {'b': 1, 'a': [1]})
    assert path == str(tmp_path / 'reports' / 'r.json')
    with open(path) as handle:
        assert handle.read() == '{\n  "a": [\n    1\n  ],\n  "b": 1\n}\n'
