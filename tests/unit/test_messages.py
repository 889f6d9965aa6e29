# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The message helper fails when any one part is missing, and names it."""

import pytest

from ansible_collections.ascend.kvpool.tests.unit.messages import assert_names

MSG = 'mooncake_config_global_segment_size is too large on node1: Lower it'


def test_every_part_present_passes():
    assert_names(MSG, 'mooncake_config_global_segment_size', 'node1', 'Lower')


@pytest.mark.parametrize('part', ['node2', 'Raise', 'mooncake_config_local_buffer_size'])
def test_a_missing_part_fails_naming_it(part):
    with pytest.raises(AssertionError, match=part):
        assert_names(MSG, 'node1', part)


def test_no_parts_is_a_mistake():
    with pytest.raises(AssertionError):
        assert_names(MSG)
