# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""_secrets: what is read from a node (a command line, an environment, a log tail) leaves it with its secrets
masked; what a judgement needs (the program, serve, --port, the model) is kept."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.ascend.kvpool.plugins.module_utils import _secrets
from ansible_collections.ascend.kvpool.plugins.module_utils._secrets import MASK

VLLM = ['/usr/bin/python3', '/usr/local/bin/vllm', 'serve', '/models/qwen', '--port', '8002']


@pytest.mark.parametrize('words', [
    ['--api-key', 'K1'], ['--api-key=K1'], ['--api_key', 'K1'], ['--api-k=K1'], ['--hf-token', 'K1'],
    ['--password=K1'], ['--auth-token', 'K1'], ['VLLM_API_KEY=K1'], ['-H', 'Authorization: Bearer K1'],
    ['-H', 'Authorization:', 'Bearer', 'K1'], ['http://user:K1@10.0.0.1:2379/x'], ['--secret', 'K1'],
])
def test_a_secret_in_a_command_line_is_masked_and_the_rest_kept(words):
    masked = _secrets.mask_argv(VLLM + words + ['--max-model-len', '4096'])
    assert 'K1' not in ' '.join(masked) and MASK in ' '.join(masked)
    assert masked[:len(VLLM)] == VLLM and masked[-2:] == ['--max-model-len', '4096']


def test_a_command_line_without_secrets_is_unchanged():
    argv = VLLM + ['--trust-remote-code', '--kv-transfer-config', '{"kv_role": "kv_both"}', '--key-file', '/k']
    assert _secrets.mask_argv(argv) == argv
    assert _secrets.mask_argv(None) is None


def test_an_environment_keeps_its_names_and_masks_secret_values():
    env = {'VLLM_API_KEY': 'K1', 'HF_TOKEN': 'K2', 'DB_PASSWORD': 'K3', 'PATH': '/bin',
           'ASCEND_RT_VISIBLE_DEVICES': '0'}
    assert _secrets.mask_env(env) == {'VLLM_API_KEY': MASK, 'HF_TOKEN': MASK, 'DB_PASSWORD': MASK, 'PATH': '/bin',
                                      'ASCEND_RT_VISIBLE_DEVICES': '0'}


def test_a_log_tail_is_masked():
    text = ('error: unrecognized arguments: --api-key K1\n{"api_key": "K2"} token=K3 Authorization: Bearer K4\n'
            'curl http://u:K5@h/ given GIVEN-K6 here\nINFO generated token 5 of 10, port 8002')
    out = _secrets.mask_text(text, ['GIVEN-K6'])
    for secret in ('K1', 'K2', 'K3', 'K4', 'K5', 'K6'):
        assert secret not in out
    assert 'generated token 5 of 10, port 8002' in out


SECRET = st.text(alphabet='ABCDEFGHJKLMNPQRSTUVWXYZ0123456789_.~+/', min_size=8, max_size=24).map(lambda s: 'Q' + s)
WORD = st.text(alphabet=st.characters(blacklist_categories=('Cs',), blacklist_characters='\x00'), max_size=12)


@settings(max_examples=300, deadline=None)
@given(st.lists(WORD, max_size=6),
       st.sampled_from(['--api-key', '--api_key', '--hf-token', '--password', '--auth-token', '--secret-key']),
       st.booleans(), SECRET, st.lists(WORD, max_size=6))
def test_a_secret_flag_value_never_survives_whatever_surrounds_it(before, flag, joined, secret, after):
    """Any words a process may have around a secret flag: its value is masked, the number of words kept."""
    argv = before + ([flag + '=' + secret] if joined else [flag, secret]) + after
    masked = _secrets.mask_argv(argv)
    assert len(masked) == len(argv)
    assert not any(secret in word for word in masked[len(before):len(before) + (1 if joined else 2)])


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200), SECRET, st.text(max_size=200))
def test_a_given_secret_never_survives_in_any_text(head, secret, tail):
    """Arbitrary text (a journal tail, a peer's answer) around a secret the module was given: the secret is gone,
    and the function returns text for any input."""
    out = _secrets.mask_text(head + secret + tail, [secret])
    assert isinstance(out, str) and secret not in out.replace(MASK, '\x00')


@pytest.mark.parametrize('name', ['--max-num-batched-tokens', 'max_tokens', '--tokenizer', '--tokenizer-mode',
                                  '--author'])
def test_counts_of_tokens_the_tokenizer_and_an_author_are_no_secret_names(name):
    """vLLM's --max-num-batched-tokens 8192 and --tokenizer <path>: values a message must show, never masked."""
    assert not _secrets.secret_name(name)
    assert _secrets.mask_argv([name, '8192']) == [name, '8192']


@pytest.mark.parametrize('name', ['--hf-token', 'HF_TOKEN', '--auth-token', 'ACCESS_TOKEN', '--api-k'])
def test_token_and_auth_names_stay_secret(name):
    assert _secrets.secret_name(name)
