# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Report files the action plugins write on the controller (outputs of a run, not managed state)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os


def write_atomic(path, text):
    """Write ``text`` to ``path`` through a temporary file and a rename (a reader never sees half a report);
    creates the parent directory. Raises OSError/IOError."""
    parent = os.path.dirname(path)
    if parent and not os.path.isdir(parent):
        os.makedirs(parent)
    tmp = '%s.tmp.%d' % (path, os.getpid())
    with open(tmp, 'w') as handle:
        handle.write(text)
    os.replace(tmp, path)
