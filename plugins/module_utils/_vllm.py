# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Pure helpers of the ``vllm_server`` module on the node: the ``vllm serve`` command line, the settings'
fingerprint and diff text, the API key's handling, and the answers of the health polls.

Nothing here touches a host. The release-aware rendering and the per-host plan of the ``vllm_instance`` role run on
the controller only: ``plugins/plugin_utils/vllm_plan.py`` (docs/DEVELOPING.md, "Where code lives").
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import re

from ansible_collections.ascend.kvpool.plugins.module_utils import _shared

NAME_RE = re.compile(r'^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$')
ENV_NAME_RE = re.compile(r'^[A-Za-z_][A-Za-z0-9_]*$')
# vLLM reads its API key from VLLM_API_KEY or --api-key; only the variable keeps it out of `ps` listings.
API_KEY_ENV = 'VLLM_API_KEY'
API_KEY_FLAG = '--api-key'


# --- command line, fingerprint, diff -------------------------------------------------------------------------

def format_number(value):
    """A CLI number: ints as ints, floats without a spurious trailing zero (0.9, not 0.90000001)."""
    if isinstance(value, bool):
        return 'true' if value else 'false'
    if isinstance(value, float):
        text = repr(value)
        return text[:-2] if text.endswith('.0') else text
    return str(value)


def kv_config_json(config):
    """The kv-transfer-config argument: compact JSON with sorted keys (stable, so the fingerprint is too)."""
    return json.dumps(config, sort_keys=True, separators=(',', ':'))


# (parameter, flag) in the order of the guide's command line.
SERVE_FLAGS = (
    ('served_model_name', '--served-model-name'),
    ('dtype', '--dtype'),
    ('max_model_len', '--max-model-len'),
    ('tensor_parallel_size', '--tensor-parallel-size'),
    ('host', '--host'),
    ('port', '--port'),
    ('max_num_batched_tokens', '--max-num-batched-tokens'),
    ('gpu_memory_utilization', '--gpu-memory-utilization'),
)


def build_argv(binary, params):
    """``vllm serve`` argv from structured parameters (None values are left out, so vLLM's defaults apply)."""
    argv = [str(binary), 'serve', str(params['model'])]
    for key, flag in SERVE_FLAGS:
        value = params.get(key)
        if value is None or value == '':
            continue
        argv.extend([flag, format_number(value)])
    if params.get('kv_transfer_config'):
        argv.extend(['--kv-transfer-config', kv_config_json(params['kv_transfer_config'])])
    argv.extend(str(a) for a in (params.get('extra_args') or []))
    return argv


def api_key_digest(api_key, salt):
    """sha256 of an API key and a per-instance salt: what is recorded (and compared) instead of the key.

    The salt lives only in the instance's settings file (mode 0600), so neither the digest nor a fingerprint that
    includes it (both appear in the task's output) can be checked against guessed keys.
    """
    return hashlib.sha256(('%s\0%s' % (salt, api_key)).encode('utf-8')).hexdigest()


def is_api_key_flag(arg):
    """Whether a command-line argument is vLLM's ``--api-key`` as vLLM's parser reads it: argparse takes any
    unambiguous prefix of a long option (``--api-k``), and vLLM's ``FlexibleArgumentParser`` turns ``_`` into
    ``-`` in option names (``--api_key``). Every prefix from ``--a`` on counts: an ambiguous one makes argparse
    print the argument, value included, in its error."""
    text = str(arg)
    if not text.startswith('--'):
        return False
    name = text.split('=', 1)[0].replace('_', '-')
    return len(name) >= 3 and API_KEY_FLAG.startswith(name)


def forbidden_key_settings(env=None, extra_args=None):
    """Where an API key was given past the ``api_key`` option: ``VLLM_API_KEY`` in the environment or
    ``--api-key`` in the arguments (both would be recorded and shown; an argument also in every ``ps`` listing)."""
    found = []
    if API_KEY_ENV in (env or {}):
        found.append('%s in the environment' % API_KEY_ENV)
    flags = sorted(set(str(a).split('=', 1)[0] for a in (extra_args or []) if is_api_key_flag(a)))
    if flags:
        found.append('%s in the arguments' % ' / '.join(flags))
    return found


def api_key_values(args):
    """The values given to the API key flag in ``args`` (every spelling :func:`is_api_key_flag` knows): what a
    module masks (``no_log_values``) before it reports the refusal, so the key is not echoed with its input."""
    values, taking = [], False
    for arg in (str(a) for a in (args or [])):
        if taking and not arg.startswith('--'):
            values.append(arg)
            continue
        taking = False
        if is_api_key_flag(arg):
            if '=' in arg:
                values.append(arg.split('=', 1)[1])
            else:
                taking = True
    return [v for v in values if v]


def drop_api_key_args(args):
    """(args without ``--api-key VALUE...`` / ``--api-key=VALUE``, whether any was dropped); abbreviations and
    the ``_`` spelling count (:func:`is_api_key_flag`).

    vLLM's ``--api-key`` takes one or more values: everything up to the next ``--`` option goes with it.
    """
    kept, dropped, skip = [], False, False
    for arg in args:
        if skip and not arg.startswith('--'):
            continue
        skip = False
        if is_api_key_flag(arg) and '=' not in arg:
            dropped, skip = True, True
        elif is_api_key_flag(arg):
            dropped = True
        else:
            kept.append(arg)
    return kept, dropped


def fingerprint(argv, env=None, path_prepend=None, key_digest=None):
    """sha256 of the full command line, environment and path prepends (and the API key's digest, when set)."""
    doc = {'argv': [str(a) for a in argv],
           'env': dict((str(k), str(v)) for k, v in (env or {}).items()),
           'path_prepend': dict((str(k), [str(p) for p in v]) for k, v in (path_prepend or {}).items())}
    if key_digest:
        doc['api_key_sha256'] = str(key_digest)
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode('utf-8')).hexdigest()


def settings_text(argv, env=None, path_prepend=None, key_digest=None):
    """The effective settings one item per line, for diffs: argv flags with their values, then the environment
    (an API key as ``<secret ...>`` with the start of its salted digest, so a new key shows as a change)."""
    if not argv:
        return ''
    lines = [' '.join(argv[:3])]
    rest = list(argv[3:])
    i = 0
    while i < len(rest):
        item = rest[i]
        if item.startswith('--') and '=' not in item and i + 1 < len(rest) and not rest[i + 1].startswith('--'):
            value = rest[i + 1]
            if item == '--kv-transfer-config':
                try:
                    value = json.dumps(json.loads(value), sort_keys=True)
                except ValueError:
                    pass
            lines.append('  %s %s' % (item, value))
            i += 2
        else:
            lines.append('  %s' % item)
            i += 1
    shown = dict(env or {})
    if key_digest:
        shown[API_KEY_ENV] = '<secret, salted sha256 %s...>' % str(key_digest)[:12]
    for key, value in sorted(shown.items()):
        lines.append('  env %s=%s' % (key, value))
    for key, value in sorted((path_prepend or {}).items()):
        lines.append('  env %s=%s:$%s' % (key, ':'.join(value), key))
    return '\n'.join(lines) + '\n'


# --- health answers --------------------------------------------------------------------------------------------

def parse_models(body):
    """Model ids listed by a ``GET /v1/models`` answer (OpenAI list format); [] when it is not one."""
    try:
        doc = json.loads(body) if body else None
    except ValueError:
        return []
    if not isinstance(doc, dict) or not isinstance(doc.get('data'), list):
        return []
    return [str(m.get('id')) for m in doc['data'] if isinstance(m, dict) and m.get('id') is not None]


# Where the health polls connect (all addresses -> loopback), and ``host:port`` of an endpoint (IPv6 in brackets):
# the collection's one rule each (module_utils/_shared.py), used by vllm_server and plugin_utils/vllm_plan.py.
probe_host = _shared.probe_host
format_host_port = _shared.format_host_port


def log_errors(text, limit=5):
    """The last error-looking lines of a vLLM log (tracebacks' final lines, ERROR records)."""
    if not text:
        return []
    if isinstance(text, bytes):
        text = text.decode('utf-8', 'replace')
    found = []
    for line in text.splitlines():
        s = line.strip()
        if not s:
            continue
        if (re.match(r'^[A-Za-z_][A-Za-z0-9_.]*(Error|Exception|Exit)\b.*:', s) or ' ERROR ' in s
                or s.startswith('ERROR') or 'error:' in s.lower()[:80]):
            found.append(s[:400])
    return found[-limit:]


def main_error(text):
    """The line that says why a vLLM start failed, or None.

    The last error line, except that vLLM ends an engine failure with ``RuntimeError: Engine core initialization
    failed. See root cause above.``: then the root cause (the error line before it) comes first.
    """
    errors = log_errors(text, limit=10)
    if not errors:
        return None
    if 'root cause above' in errors[-1]:
        causes = [e for e in errors[:-1] if 'failed to start' not in e and 'root cause above' not in e]
        if causes:
            return '%s (%s)' % (causes[-1], errors[-1])
    return errors[-1]
