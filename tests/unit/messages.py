# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Assertions on messages: the parts a user relies on, not the whole sentence.

A message names what is wrong (the variable or option, the host, the file, the value) and the fix. A test checks
those parts, each on its own, so that rewording the sentence around them does not break it, and dropping one of
them does.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


def assert_names(msg, *parts):
    """Fail unless ``msg`` contains every one of ``parts`` (each taken as text: a name, a host, a value, the fix's
    key words), naming the parts that are missing."""
    assert parts, 'assert_names needs the parts to look for'
    text = msg if isinstance(msg, str) else str(msg)
    missing = [part for part in parts if str(part) not in text]
    assert not missing, 'the message does not name %r:\n%s' % (missing, text)
