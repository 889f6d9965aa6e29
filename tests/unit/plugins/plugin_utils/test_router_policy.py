# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The choice of vllm-router's policy on the controller (plugin_utils/router_policy.py): from the render probe's
status codes per worker, or from the declared vllm-ascend release when no worker answered."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest

from ansible_collections.ascend.kvpool.plugins.plugin_utils import router_policy
from ansible_collections.ascend.kvpool.tests.unit.messages import assert_names

A, B = 'http://a:8002', 'http://b:8002'


def test_auto_takes_cache_aware_when_every_worker_gives_token_ids():
    assert router_policy.resolve_policy('auto', {A: 200, B: 200})['policy'] == 'cache_aware'
    # Render absent (404) but /tokenize there: vllm-router 0.1.17 falls back to it, with a warning about tools.
    fallback = router_policy.resolve_policy('auto', {A: 200, B: 404}, tokenize={B: 200})
    assert fallback['policy'] == 'cache_aware' and 'or /tokenize' in fallback['reason']
    assert_names(fallback['warnings'][0], 'asked /tokenize instead', 'http://b:8002')
    # Render absent and no /tokenize, or render refused (403, vLLM 0.32+ gated): no token ids, round robin.
    for render, tokenize, text in (({A: 200, B: 404}, {B: 404}, 'http://b:8002 -> render 404, tokenize 404'),
                                   ({A: 403, B: 403}, {}, 'http://a:8002 -> render 403, http://b:8002 -> render 403'),
                                   ({A: 200, B: 404}, {}, 'http://b:8002 -> render 404, tokenize no answer')):
        choice = router_policy.resolve_policy('auto', render, tokenize=tokenize)
        assert choice['policy'] == 'round_robin' and not choice['error']
        assert text in choice['warnings'][0], choice['warnings'][0]
    assert router_policy.resolve_policy('auto', {})['policy'] == 'round_robin'


def test_prepared_by():
    render = {A: 200, B: 405, 'http://c:1': 403, 'http://d:1': None}
    how = router_policy.prepared_by(render, {B: 200, 'http://c:1': 200})
    assert how == {A: 'render', B: 'tokenize', 'http://c:1': None, 'http://d:1': None}


def test_refusals_and_their_override():
    refused = router_policy.resolve_policy('cache_aware', {A: 403, B: None})
    assert_names(refused['error'], 'every request to one worker', 'b:8002 -> render no answer')
    unsafe = router_policy.resolve_policy('cache_aware', {A: 403}, allow_unsafe=True)
    assert unsafe['error'] == '' and unsafe['policy'] == 'cache_aware' and unsafe['warnings']
    assert router_policy.resolve_policy('cache_aware', {A: 404}, tokenize={A: 200})['error'] == ''
    assert 'credited 0 tokens' in router_policy.resolve_policy('kv_aware', {})['error']
    plain = {'policy': 'round_robin', 'reason': 'as set', 'warnings': [], 'error': ''}
    assert router_policy.resolve_policy('round_robin', {A: 404}) == plain
    assert router_policy.resolve_policy('consistent_hash', {})['warnings']


@pytest.mark.parametrize('version, source', [('v0.11.0', 'tokenize'), ('v0.14.1', 'tokenize'), ('v0.15.0', 'render'),
                                             ('v0.22.1rc1', 'render'), ('0.29.9', 'render'), ('v0.30.0', 'tokenize'),
                                             ('v0.31.1', 'tokenize'), ('v0.32.0', None), ('v1.0.0', None),
                                             ('main', ''), ('', '')])
def test_release_table(version, source):
    assert router_policy.release_token_source(version) == source


def test_no_answer_at_all_falls_back_to_the_declared_release():
    # --check before the first deploy: nothing answers yet, the declared release decides (and says so).
    guide = router_policy.resolve_policy('auto', {A: None, B: None}, release='v0.22.1rc1')
    assert guide['policy'] == 'cache_aware'
    assert_names(guide['reason'], 'declared release', 'v0.22.1rc1')
    gated = router_policy.resolve_policy('auto', {A: None}, release='v0.32.0')
    assert gated['policy'] == 'round_robin' and '403' in gated['reason']
    refused = router_policy.resolve_policy('cache_aware', {A: None}, release='v0.32.0')
    assert 'every request to one worker' in refused['error']
    assert router_policy.resolve_policy('cache_aware', {A: None}, release='v0.22.1rc1')['error'] == ''
    assert 'credited 0 tokens' in router_policy.resolve_policy('kv_aware', {}, release='v0.22.1rc1')['error']
    # One answer is enough to decide by the answers.
    assert router_policy.resolve_policy('auto', {A: None, B: 200}, release='v0.22.1rc1')['policy'] == 'round_robin'
