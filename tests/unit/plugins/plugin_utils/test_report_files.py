# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The action plugins' report writer: the whole file or the previous one, never half of it."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os

import pytest

from ansible_collections.ascend.kvpool.plugins.plugin_utils.report_files import write_atomic


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
