# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Pure helpers of the ``vllm_server`` module on the node: the table of the ``vllm serve`` flags the collection
renders (:data:`SERVE_FLAGS`), the rules of an instance's values (``check_*``), the ``vllm serve`` command line, the
settings' fingerprint and diff text, the API key's handling, and the answers of the health polls.

The rules are the collection's one copy of each: ``vllm_server`` calls them for its options, and the controller
plan of the ``vllm_instance`` role (``plugin_utils/vllm_plan.py``) for the role's variables, so both give the same
message for the same bad value. Each raises :class:`KvpoolError` naming the option (the caller's name for it), the
value and the fix.

Nothing here touches a host. The release-aware rendering and the per-host plan of the ``vllm_instance`` role run on
the controller only: ``plugins/plugin_utils/vllm_plan.py`` (docs/DEVELOPING.md, "Where code lives").
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import json
import re
from collections import namedtuple

from ansible_collections.ascend.kvpool.plugins.module_utils import _shared, _validate
from ansible_collections.ascend.kvpool.plugins.module_utils._errors import KvpoolError

NAME_RE = _shared.NAME_RE
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


# --- the vllm serve flags the collection renders ----------------------------------------------------------------

class ServeFlag(namedtuple('ServeFlag', 'name flag type low high above why own doc')):
    """One ``vllm serve`` flag: ``name`` (the module's option, the role's ``vllm_instance_<name>`` and the key of
    an instance's override), ``flag`` (its CLI spelling), ``type`` (``str``, ``int`` or ``float``), its range
    (``low``/``high`` inclusive, ``above`` exclusive; None: no bound) and ``why`` (said with a value out of range),
    ``own`` (a top-level option of ``vllm_server``, which uses it itself: the health gate's served name, the
    visible devices' count, the endpoint; the others are the suboptions of its ``serve_flags``) and ``doc`` (its
    meaning, for the module's documentation)."""

    __slots__ = ()


def _flag(name, flag, kind, low=None, high=None, above=None, why='', own=False, doc=''):
    return ServeFlag(name, flag, kind, low, high, above, why, own, doc)


# The fix said with a value out of range of a flag that may be left unset. It depends on who passes the value: a
# module user omits the option; a role variable (or an instance's key) omitted gives the role's default, so the role
# says "set it to null" (check_serve_flag's ``unset``).
UNSET = "omit it for vLLM's default"
UNSET_ROLE = "set it to null for vLLM's default"

# In the order of the command line (the guide's order; a new flag goes last, so the command line, and with it the
# fingerprint of running instances, stays the same until the flag is set). The one place a vllm serve flag is
# described: vllm_server takes the flags that are not ``own`` as ``serve_flags`` (argument spec and documentation
# made from this table: doc_fragments/vllm_serve_flags.py), and the vllm_instance role passes its variables of the
# same names to the plan, which checks them with the same rule (:func:`check_serve_flag`).
SERVE_FLAGS = (
    _flag('served_model_name', '--served-model-name', 'str', own=True),
    _flag('dtype', '--dtype', 'str', doc='The weights\' and activations\' data type (the guide uses C(bfloat16)).'),
    _flag('max_model_len', '--max-model-len', 'int', low=1, why=UNSET,
          doc='Maximum length of a request, prompt and output, in tokens (the guide: 25600).'),
    _flag('tensor_parallel_size', '--tensor-parallel-size', 'int', low=1, why=UNSET, own=True),
    _flag('host', '--host', 'str', own=True),
    _flag('port', '--port', 'int', low=1, high=65535, why='a TCP port', own=True),
    _flag('max_num_batched_tokens', '--max-num-batched-tokens', 'int', low=1, why=UNSET,
          doc='Maximum number of tokens the scheduler batches in one step (the guide: 4096).'),
    _flag('gpu_memory_utilization', '--gpu-memory-utilization', 'float', above=0, high=1,
          why='the share of NPU memory vLLM may use, for example 0.9',
          doc='Share of NPU memory vLLM may use (the guide: 0.9).'),
    _flag('max_num_seqs', '--max-num-seqs', 'int', low=1, why=UNSET,
          doc='Maximum number of requests the scheduler runs in one step; the others wait (vLLM: 256 in most '
              'releases; the guide does not set it).'),
)
FLAGS_BY_NAME = dict((f.name, f) for f in SERVE_FLAGS)


def serve_flag_options():
    """The argument spec of ``vllm_server``'s ``serve_flags`` option: one typed suboption per flag that is not
    ``own``."""
    return dict((f.name, dict(type=f.type, no_log=False)) for f in SERVE_FLAGS if not f.own)


def own_flag_options():
    """The argument spec of ``vllm_server``'s top-level flag options (the ``own`` flags)."""
    return dict((f.name, dict(type=f.type, no_log=False)) for f in SERVE_FLAGS if f.own)


def _whole_number(value):
    if isinstance(value, str) and re.match(r'^\s*[-+]?\d+\s*$', value):
        return int(value)
    return value


def _number(value):
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    return value


# The flags whose value is one address (no port, no scheme: _validate.host_address).
ADDRESS_FLAGS = ('host',)


def check_serve_flag(name, value, option=None, unset=UNSET):
    """The value of flag ``name`` (a whole number, a number or text, as the table says), checked against the
    table's range; None and '' are "unset" (vLLM's default) and come back as None. A whole number given as text
    (a templated value) is read as one. Raises KvpoolError naming ``option`` (default: the flag's name) and, for a
    flag that may be unset, the fix ``unset`` (:data:`UNSET` for a module's option, :data:`UNSET_ROLE` for a role's
    variable)."""
    flag = FLAGS_BY_NAME[name]
    option = option or name
    why = unset if flag.why == UNSET else flag.why
    if value is None or value == '':
        return None
    if flag.type == 'int':
        return _validate.int_range(_whole_number(value), option, flag.low, flag.high, why)
    if flag.type == 'float':
        value = _number(value)
        if isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        return _validate.number_range(value, option, low=flag.low, high=flag.high, above=flag.above, why=why)
    if name in ADDRESS_FLAGS:  # --host 127.0.0.1:8000 is read by vLLM only at its start
        return str(_validate.host_address(str(value), option, 'port', example='172.31.250.11'))
    return str(value)


# --- the other rules of an instance ------------------------------------------------------------------------------

def check_name(value, option='name'):
    """An instance's name: it names the unit (``kvpool-vllm-<name>``) and the container."""
    text = '' if value is None else str(value)
    if not NAME_RE.match(text):
        raise KvpoolError('%s=%r must be 1-63 letters, digits, ".", "_" or "-", starting with a letter or digit (it '
                          'names the instance\'s unit kvpool-vllm-<name>)' % (option, text))
    return text


def check_model(value, option='model'):
    """The model (path or name), the positional argument of ``vllm serve``: never empty."""
    if value is None or str(value).strip() == '':
        raise KvpoolError('%s is not set: give the model\'s path (or name), the positional argument of vllm serve'
                          % option)
    return str(value)


def check_devices(value, option='visible_devices'):
    """An instance's NPU ids: a non-empty list of whole numbers 0-MAX_DEVICE_ID, each once. Returns them as ints."""
    if not isinstance(value, list) or not value:
        raise KvpoolError('%s=%r must list the NPU ids of the instance (for example [0, 1, 2, 3]): an empty list '
                          'hides every NPU from it' % (option, value))
    devices = [_whole_number(d) for d in value]
    bad = [d for d in devices if isinstance(d, bool) or not isinstance(d, int) or not 0 <= d <= _shared.MAX_DEVICE_ID]
    if bad:
        raise KvpoolError('%s=%r: NPU ids are whole numbers 0-%d, got %s'
                          % (option, value, _shared.MAX_DEVICE_ID, ', '.join(repr(d) for d in bad)))
    twice = sorted(set(d for d in devices if devices.count(d) > 1))
    if twice:
        raise KvpoolError('%s=%s lists NPU %s more than once: list each NPU of the instance once'
                          % (option, devices, ', '.join(str(d) for d in twice)))
    return devices


def check_tensor_parallel(size, devices, option='tensor_parallel_size', devices_option='visible_devices'):
    """The tensor parallel size (checked by :func:`check_serve_flag`) against the instance's NPUs: vLLM starts one
    worker per NPU it sees and fails when their number differs."""
    if size and devices and size != len(devices):
        raise KvpoolError('%s %d does not match the %d NPU(s) %s of %s: vLLM would fail at start; give as many NPUs '
                          'as %s, or leave it unset' % (option, size, len(devices), devices, devices_option, option))
    return size


def check_lookup_rpc_port(value, option='lookup_rpc_port'):
    """The connector's ``lookup_rpc_port`` (``mooncake_rpc_port`` before v0.12): a whole number 0 or more (the
    guide writes it as text, ``"0"``); it names an IPC path, unique per instance on a host."""
    number = _whole_number(value)
    if isinstance(number, bool) or not isinstance(number, int) or number < 0:
        raise KvpoolError('%s=%r must be a whole number, 0 or more (it names the connector\'s IPC path, one per '
                          'instance of a host)' % (option, value))
    return number


def check_kv_transfer_ports(config, option='kv_transfer_config'):
    """:func:`check_lookup_rpc_port` for the port keys of a kv-transfer-config's ``kv_connector_extra_config``."""
    extra = (config or {}).get('kv_connector_extra_config') or {}
    if isinstance(extra, dict):
        for key in ('lookup_rpc_port', 'mooncake_rpc_port'):
            if key in extra:
                check_lookup_rpc_port(extra[key], '%s.kv_connector_extra_config.%s' % (option, key))


def check_key_placement(env, extra_args, key_option='api_key'):
    """The API key is given with its own option only (``key_option``), never as ``VLLM_API_KEY`` in the environment
    or ``--api-key`` in the arguments: both would be recorded and shown, an argument also in every ``ps``
    listing. The message names where it was found, never the key."""
    misplaced = forbidden_key_settings(env, extra_args)
    if misplaced:
        raise KvpoolError('set the API key with %s (kept out of the command line, the unit file and the output), '
                          'not %s' % (key_option, ' or '.join(misplaced)))


# --- command line -------------------------------------------------------------------------------------------------

def build_argv(binary, params):
    """``vllm serve`` argv from structured parameters: the flags of :data:`SERVE_FLAGS` in its order, each from
    ``params`` (``own`` flags) or ``params['serve_flags']``; None values are left out, so vLLM's defaults apply."""
    flags = params.get('serve_flags') or {}
    argv = [str(binary), 'serve', str(params['model'])]
    for flag in SERVE_FLAGS:
        value = params.get(flag.name) if flag.own else flags.get(flag.name)
        if value is None or value == '':
            continue
        argv.extend([flag.flag, format_number(value)])
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
    except (ValueError, TypeError, RecursionError):
        return []
    if not isinstance(doc, dict) or not isinstance(doc.get('data'), list):
        return []
    return [m['id'] for m in doc['data'] if isinstance(m, dict) and isinstance(m.get('id'), str)]


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
