# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The choice of vllm-router's routing policy (pure, controller side; filter ``kvpool_router_policy``).

From the requested policy (``auto`` or a name) and what the instances answered to the render probe of
``vllm_router_check`` (``POST /v1/chat/completions/render``, and ``POST /tokenize`` where render is absent), or,
when none answered, from the declared vllm-ascend release. The facts about vllm-router 0.1.17 it relies on are in
``module_utils/_router.py`` (the node side: the router's command line and answers) and docs/router.md.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.ascend.kvpool.plugins.module_utils._router import (
    RENDER_FALLBACK_CODES,
    RENDER_PATH,
    TOKENIZE_PATH,
)


def prepared_by(render, tokenize=None):
    """``{worker: 'render' | 'tokenize' | None}``: how vllm-router 0.1.17 gets each worker's token ids, from the
    status codes of ``POST /v1/chat/completions/render`` and of ``POST /tokenize`` (None: no answer)."""
    out = {}
    for url, code in (render or {}).items():
        if code == 200:
            out[url] = 'render'
        elif code in RENDER_FALLBACK_CODES and (tokenize or {}).get(url) == 200:
            out[url] = 'tokenize'
        else:
            out[url] = None
    return out


def _codes(urls, render, tokenize):
    parts = []
    for url in urls:
        text = '%s -> render %s' % (url, render.get(url) if render.get(url) is not None else 'no answer')
        if render.get(url) in RENDER_FALLBACK_CODES:
            code = (tokenize or {}).get(url)
            text += ', tokenize %s' % (code if code is not None else 'no answer')
        parts.append(text)
    return ', '.join(parts)


_RELEASE_RE = re.compile(r'^\s*v?(\d+)\.(\d+)(?:\.(\d+))?')


def release_token_source(version):
    """How vllm-router 0.1.17 gets token ids from plain ``vllm serve`` of a vllm-ascend (= vLLM) release, from the
    release table (docs/router.md): ``render`` (0.15 - 0.29), ``tokenize`` (before 0.15, and 0.30 - 0.31: render
    absent, 404), None (0.32+: render refused with 403 without --enable-scale-out), or '' when ``version`` does not
    parse."""
    match = _RELEASE_RE.match(str(version or ''))
    if not match:
        return ''
    release = (int(match.group(1)), int(match.group(2)))
    if release >= (0, 32):
        return None
    if (0, 15) <= release < (0, 30):
        return 'render'
    return 'tokenize'


def resolve_policy(requested, render, allow_unsafe=False, tokenize=None, release=''):
    """The policy to run, from the ``requested`` one (``auto`` or a name), ``render`` (``{worker URL: HTTP status of
    POST /v1/chat/completions/render}``, None: no answer) and ``tokenize`` (the same for ``POST /tokenize``, asked
    where render is absent). Returns ``{'policy', 'reason', 'warnings', 'error'}``; ``error`` is '' or why the
    request is refused (with the fix), turned into a warning by ``allow_unsafe``."""
    render = render or {}
    refused = sorted(u for u, code in render.items() if code == 401)
    if refused:
        return {'policy': requested, 'reason': 'probe refused', 'warnings': [],
                'error': '%s answered the render probe with 401 Unauthorized: set kvpool_router_api_key (default: the '
                         'first worker host\'s vllm_instance_api_key) to the instances\' API key'
                         % ', '.join(refused)}
    if release and not any(code is not None for code in render.values()):
        return _by_release(requested, release, allow_unsafe)
    how = prepared_by(render, tokenize)
    lacking = sorted(u for u, way in how.items() if way is None)
    fallback = sorted(u for u, way in how.items() if way == 'tokenize')
    no_prep = ''
    if lacking:
        no_prep = ('%d of %d worker(s) give vllm-router no token ids (%s)'
                   % (len(lacking), len(render), _codes(lacking, render, tokenize)))
    out = {'policy': requested, 'reason': 'as set', 'warnings': [], 'error': ''}
    fallback_note = ''
    if fallback:
        fallback_note = ('%d worker(s) do not serve %s and are asked %s instead (%s): requests with tools or a '
                         'response format get no prefix routing there'
                         % (len(fallback), RENDER_PATH, TOKENIZE_PATH, ', '.join(fallback)))
    if requested == 'auto':
        if render and not lacking:
            out.update(policy='cache_aware', reason='auto: every worker serves %s%s' % (
                RENDER_PATH, ' or %s' % TOKENIZE_PATH if fallback else ''))
            if fallback_note:
                out['warnings'].append(fallback_note)
        else:
            out.update(policy='round_robin',
                       reason='auto: %s, so cache_aware would send every request to one worker' % (
                           no_prep or 'no worker was asked for ' + RENDER_PATH))
            out['warnings'].append(
                'vllm-router runs round_robin, not cache_aware: %s. cache_aware needs render (or, where render is '
                'absent, /tokenize) on every instance; vLLM 0.32+ answers 403 unless started with '
                '--enable-scale-out; see docs/router.md' % (no_prep or 'no render probe'))
        return out
    refusal = ''
    if requested == 'kv_aware':
        refusal = ('kv_aware credited 0 tokens from the KV events of vLLM in vllm-router 0.1.17 (docs/router.md): '
                   'it routes no better than load alone. Use auto (cache_aware where the instances give token ids, '
                   'else round_robin)')
    elif requested == 'cache_aware' and lacking:
        refusal = ('cache_aware needs token ids from every instance (POST %s, or %s where render is absent), and %s: '
                   'vllm-router would send every request to one worker (it logs preparation_rejected) with no error. '
                   'Use auto or round_robin, or open the endpoint on the instances (vLLM 0.32+: --enable-scale-out)'
                   % (RENDER_PATH, TOKENIZE_PATH, no_prep))
    elif requested == 'cache_aware' and fallback_note:
        out['warnings'].append(fallback_note)
    elif requested == 'consistent_hash':
        out['warnings'].append('consistent_hash hashes session headers or the whole body: requests that share only '
                               'a system prompt get no prefix affinity')
    if refusal:
        if allow_unsafe:
            out['warnings'].append(refusal)
        else:
            out['error'] = refusal
    return out


def _by_release(requested, release, allow_unsafe):
    """No instance answered the probe (not running yet, or --check before the first deploy): the release table
    decides, and says so."""
    source = release_token_source(release)
    where = 'no instance answered the render probe (not running yet, check mode, or all down)'
    out = {'policy': requested, 'reason': 'as set', 'warnings': [], 'error': ''}
    if source == '':
        if requested == 'auto':
            out.update(policy='round_robin', reason='auto: %s and the release %r is not a version' % (where, release))
            out['warnings'].append('vllm-router runs round_robin: %s, and kvpool_router_vllm_ascend_version=%r is not '
                                   'a release such as v0.22.1rc1' % (where, release))
        return out
    if source == 'tokenize' and requested in ('auto', 'cache_aware'):
        out['warnings'].append('by the declared release %s the instances do not serve %s and vllm-router asks %s '
                               'instead: requests with tools or a response format get no prefix routing'
                               % (release, RENDER_PATH, TOKENIZE_PATH))
    if requested == 'auto':
        if source:
            out.update(policy='cache_aware', reason='auto: %s; by the declared release %s, vLLM serves token ids '
                                                    'through %s' % (where, release, source))
        else:
            out.update(policy='round_robin', reason='auto: %s; the declared release %s answers render with 403 '
                                                    'without --enable-scale-out' % (where, release))
        return out
    if requested == 'kv_aware' or (requested == 'cache_aware' and source is None):
        return resolve_policy(requested, {'(declared release %s)' % release: 403 if source is None else 200},
                              allow_unsafe)
    return out
