# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Sizes as the roles take them (plugin_utils/sizes.py): bytes or "100GB", always 1024-based."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.ascend.kvpool.plugins.module_utils._mooncake import parse_size
from ansible_collections.ascend.kvpool.plugins.plugin_utils.sizes import GIB, size_bytes


@pytest.mark.parametrize('value, expected', [
    ('100GB', 100 * GIB),
    ('100 GiB', 100 * GIB),
    ('100gib', 100 * GIB),
    (' 100 gb ', 100 * GIB),
    ('100G', 100 * GIB),
    (107374182400, 100 * GIB),
    ('1073741824', GIB),
    (1073741824, GIB),
    ('512MB', 512 << 20),
    ('512 MiB', 512 << 20),
    ('512m', 512 << 20),
    ('1T', 1 << 40),
    ('1TiB', 1 << 40),
    ('10KB', 10240),
    ('10k', 10240),
    ('10B', 10),
    ('10 b', 10),
    ('0', 0),
    (0, 0),
])
def test_sizes_are_bytes_1024_based_whatever_the_spelling(value, expected):
    assert size_bytes(value) == expected


@pytest.mark.parametrize('value', ['1.5GB', '-1', '-1GB', 'abc', '', '100 PB', '100GBB', '100\tGB', 'GB', None, True,
                                   1.0, 107374182400.0, [1]])
def test_anything_else_is_refused_naming_the_value_and_the_forms(value):
    with pytest.raises(ValueError) as err:
        size_bytes(value)
    assert repr(value) in str(err.value) and '"100GB"' in str(err.value) and '1024-based' in str(err.value)


@pytest.mark.parametrize('value', ['1', '1B', '1K', '1KB', '1KiB', '1m', '1MB', '1MiB', '1G', '1GB', '1GiB', '1T',
                                   '1TB', '1TiB', '100 gb', 107374182400])
def test_units_are_the_ones_mooncake_json_is_read_with(value):
    assert size_bytes(value) == parse_size(value)


@pytest.mark.parametrize('value', ['1.5GB', '0.5 GiB', 2.0])
def test_decimals_vllm_ascend_reads_are_still_refused_as_role_input(value):
    assert parse_size(value) > 0
    with pytest.raises(ValueError):
        size_bytes(value)
