# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Sizes as the roles take them: bytes (int) or a string such as ``"100GB"``; the one rule for every role.

Pure, unit-tested without Ansible; exposed as the filter ``ascend.kvpool.size_bytes``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.ascend.kvpool.plugins.module_utils import _mooncake

GIB = _mooncake.GIB

# Whole numbers only, with an optional unit; "GiB" is read as "GB" (both 1024-based, as vllm-ascend reads them).
SIZE_PATTERN = re.compile(r'^[0-9]+ *([KMGT]B?|B)?$')


def size_bytes(value):
    """Bytes of a size: ``1073741824``, ``"1073741824"``, ``"100GB"``, ``"100 GiB"``, ``"512m"``, ``"1T"``.

    Every unit is 1024-based whatever its spelling (KB = KiB = K = 1024 bytes). Raises ValueError, naming the value
    and the accepted forms, for anything else (fractions, negative numbers, other units, booleans, None).

    The multipliers are ``_mooncake._UNITS``, the ones ``_mooncake.parse_size`` reads ``mooncake.json`` with, so a
    unit means the same bytes everywhere. Which strings are sizes differs on purpose: this checks what an operator
    gives a role, strictly (``SIZE_PATTERN``: whole numbers only, no decimals, no floats; the accept/reject rule the
    roles' Jinja had before this filter), so a typo fails the play with one clear message; ``parse_size`` reads an
    existing ``mooncake.json`` as vllm-ascend does, which also takes decimals that give whole bytes (``"1.5GB"``).
    """
    text = re.sub('IB$', 'B', str(value).strip().upper())
    match = SIZE_PATTERN.match(text)
    if not match:
        raise ValueError('%r is not a size: give bytes (a whole number) or a string such as "100GB" '
                         '(B, KB, MB, GB, TB; 1024-based)' % (value,))
    unit = match.group(1) or ''
    return int(text[:len(text) - len(unit)].strip()) * _mooncake._UNITS[unit]
