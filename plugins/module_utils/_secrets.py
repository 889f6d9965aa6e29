# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Secrets masked at the source: command lines, environments and log texts read from a node (pure).

Whatever the collection reads from a node and may put into a result or a message (the command line of the process
that holds a port, of its parents, a journal tail) goes through one of these first, so an API key, a token, a
password or an ``Authorization`` value never leaves the node in a task's output:

- ``mask_argv(argv)``: the value of every flag whose name says it is a secret (``--api-key K``, ``--api-key=K``,
  ``--hf_token=T``, ``--password P``, ``--auth-token ...``), ``NAME=VALUE`` words with such a name, the password of
  a URL (``http://user:pw@host``) and ``Bearer`` / ``Authorization`` values;
- ``mask_env(env)``: the values of variables whose name says it is a secret (``VLLM_API_KEY``, ``HF_TOKEN``, ...);
- ``mask_text(text, values)``: the same in free text (log lines), and every one of ``values`` (the secrets the
  module was given) wherever it appears.

Masking errs on the side of hiding: a flag such as ``--key-file`` keeps its path masked too. Names a finding needs
(the program, ``serve``, ``--port``, the model) are never secret-shaped, so the judgements still read them.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import difflib
import re

MASK = '********'

# A flag or variable name that holds a secret: API keys, access or private keys, tokens, passwords, secrets,
# credentials, anything "auth" (Authorization, --auth-token). Matched on the name folded to lower case with "_"
# and "-" removed. Not secrets: counts of tokens and the tokenizer (vLLM's --max-num-batched-tokens 8192,
# --tokenizer <path>), an author: their values are numbers and paths a message must show.
_SECRET_NAME = re.compile(r'(apikey|accesskey|secretkey|privatekey|token(?!s|izer)|passw(or)?d|secret|credential|'
                          r'auth(?!or)|bearer|cookie|session)')
# --name=value, NAME=value, name: value inside free text; the name ends where the separator starts.
_ASSIGN = re.compile(r'''(?P<name>[A-Za-z_][A-Za-z0-9_.-]*)(?P<sep>["']?\s*[=:]\s*["']?)(?P<value>[^\s"',;)}\]]+)''')
_FLAG_SPACE = re.compile(r'''(?<![\w-])(?P<name>--?[A-Za-z][A-Za-z0-9_-]*)(?P<sep>\s+)'''
                         r'''(?P<value>[^\s"'-][^\s"',;)}\]]*)''')
_BEARER = re.compile(r'(?i)\b(bearer)(\s+)([A-Za-z0-9._~+/=:-]+)')
# Authorization: <scheme> <credentials> (or the credentials alone): all of it after the separator.
_AUTHORIZATION = re.compile(r'''(?i)(authorization["']?\s*[=:]\s*["']?)((?:[A-Za-z]+\s+)?[^\s"',;)}\]]+)''')
_URL_PASSWORD = re.compile(r'(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*:)(?P<pw>[^/\s@]+)(?P<at>@)')


def secret_name(name):
    """Whether a flag or variable ``name`` (``--api-key``, ``HF_TOKEN``, ``password``) says it holds a secret."""
    folded = str(name).lstrip('-').lower().replace('_', '').replace('-', '').replace('.', '')
    # argparse takes an abbreviation of a long flag: --api-k is --api-key
    return bool(folded) and (_SECRET_NAME.search(folded) is not None
                             or (len(folded) >= 4 and 'apikey'.startswith(folded)))


def _mask_url(text):
    return _URL_PASSWORD.sub(lambda m: m.group('head') + MASK + m.group('at'), text)


def mask_word(word):
    """One argument with its secret part masked (``--api-key=K``, ``TOKEN=T``, a URL's password,
    ``Authorization: Bearer T``, ``Bearer T``)."""
    text = str(word)
    if any(c.isspace() for c in text):  # a whole command in one word (sh -c "vllm serve --api-key K"): as text
        return mask_text(text)
    name, sep, value = text.partition('=')
    if sep and value and secret_name(name):
        return '%s=%s' % (name, MASK)
    return _BEARER.sub(lambda m: m.group(1) + m.group(2) + MASK, _AUTHORIZATION.sub(lambda m: m.group(1) + MASK,
                                                                                    _mask_url(text)))


def mask_argv(argv):
    """``argv`` (a list of words, as read from ``/proc/<pid>/cmdline``) with every secret value masked; None stays
    None. A flag with a secret name masks the value after it (``--api-key K``) unless that is another flag; the
    words ``Authorization:`` and ``Bearer`` mask the word after them."""
    if argv is None:
        return None
    out = []
    hide_next = False
    for word in argv:
        text = str(word)
        if hide_next and not text.startswith('-'):
            if text.lower() in ('bearer', 'basic'):  # Authorization: Bearer K - the scheme, then the credentials
                out.append(text)
            else:
                out.append(MASK)
                hide_next = False
            continue
        hide_next = False
        masked = mask_word(text)
        out.append(masked)
        if masked == text and '=' not in text:
            hide_next = (text.startswith('-') and secret_name(text)) or \
                text.lower().rstrip(':') in ('bearer', 'authorization')
    return out


def mask_env(env):
    """A copy of the environment ``env`` (a dict) with the value of every secret-named variable masked."""
    return dict((k, MASK if secret_name(k) and v not in (None, '') else v) for k, v in (env or {}).items())


def split_env(env):
    """``(plain, secret)``: the environment ``env`` (a dict) in two, the variables whose name says they hold a
    secret (``HF_TOKEN``, ``MY_API_KEY``, ``DB_PASSWORD``, ...) and have a value apart from the others. A service
    gets the secret ones from its 0600 ``EnvironmentFile=`` (or, in container mode, filled in by the action plugin),
    never from its world-readable unit file, the diff or a result."""
    plain, secret = {}, {}
    for key, value in (env or {}).items():
        if secret_name(key) and value not in (None, ''):
            secret[key] = value
        else:
            plain[key] = value
    return plain, secret


def env_secret_values(env):
    """The values of the secret-named variables of ``env``, for a module's ``no_log_values`` (so Ansible masks them
    in the task's echoed input too); as :func:`secret_values`, none under 3 characters."""
    return [str(v) for v in split_env(env)[1].values() if len(str(v)) >= 3]


def mask_text(text, values=()):
    """``text`` (a log tail, an answer, a message) with every one of ``values`` and every secret-shaped assignment
    (``--api-key K``, ``api_key=K``, ``"token": "T"``, ``Authorization: Bearer T``, a URL's password) masked."""
    if not text:
        return text
    out = str(text)
    for value in sorted((str(v) for v in values or () if v), key=len, reverse=True):
        if len(value) >= 3:  # a one- or two-character "secret" would mask half the text
            out = out.replace(value, MASK)
    out = _AUTHORIZATION.sub(lambda m: m.group(1) + MASK, out)
    out = _BEARER.sub(lambda m: m.group(1) + m.group(2) + MASK, out)
    out = _mask_url(out)

    def assign(match):
        if secret_name(match.group('name')) and match.group('value') != MASK:
            return match.group('name') + match.group('sep') + MASK
        return match.group(0)
    out = _ASSIGN.sub(assign, out)
    return _FLAG_SPACE.sub(assign, out)


def secret_values(argv):
    """The secret values :func:`mask_argv` hides in ``argv``: what a module adds to ``no_log_values`` before it
    refuses an argument, so that Ansible masks them in the task's echoed input too. Values under 3 characters are
    left out: Ansible masks a no_log value wherever it occurs, and one letter would mask half the message."""
    words = [str(w) for w in argv or []]
    out = []
    for word, masked in zip(words, mask_argv(words)):
        if word == masked:
            continue
        if masked == MASK:
            out.append(word)
        elif '=' in word and masked.endswith('=' + MASK) and secret_name(word.split('=', 1)[0]):
            out.append(word.split('=', 1)[1])
        else:
            out.extend(_hidden(word, masked))
    return [v for v in out if len(v) >= 3]


def _hidden(text, masked):
    """The pieces of ``text`` that ``masked`` (its masked copy) replaced with MASK."""
    matcher = difflib.SequenceMatcher(None, text, masked, autojunk=False)
    return [text[i1:i2].strip() for tag, i1, i2, j1, j2 in matcher.get_opcodes()
            if tag == 'replace' and '*' in masked[j1:j2]]


def flag_values(argv, flag):
    """The values ``argv`` gives the long option ``flag`` (``--flag=V`` or ``--flag V``), for a flag refused under
    any spelling a prefix-taking parser reads (``--api-k=K``); as :func:`secret_values`, none under 3 characters."""
    words = [str(w) for w in argv or []]
    out = []
    for index, word in enumerate(words):
        name, sep, value = word.partition('=')
        if not name.startswith('--') or len(name) < 3 or not flag.startswith(name.replace('_', '-')):
            continue
        if sep:
            out.append(value)
        elif index + 1 < len(words) and not words[index + 1].startswith('--'):
            out.append(words[index + 1])
    return [v for v in out if len(v) >= 3]
