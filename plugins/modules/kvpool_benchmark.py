#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: kvpool_benchmark
short_description: Run one step of the vLLM-Ascend KV pool TTFT benchmark against one instance
version_added: 1.0.0
description:
  - Sends one dataset of fully random prompts of exactly O(input_tokens) tokens (deterministic for
    O(dataset_seed)) to one OpenAI-compatible vLLM instance as streaming chat (or completions) requests, at most
    O(concurrency) at a time, and measures every request's time to first token (TTFT), time per output token
    (TPOT) and end-to-end latency, with mean, median, p90 and p99 over the step.
  - Failed requests (HTTP errors, error events, broken or timed-out streams) are counted and listed, never
    dropped; the statistics are over the requests that succeeded.
  - Scrapes the Prometheus C(/metrics) of every URL in O(metrics_urls) (both instances and the Mooncake master)
    right before and right after the step and returns the counter deltas, the prefix-cache and external (pool)
    hit rates of each instance and the master's key count and used bytes, so the step shows where its KV hits
    came from.
  - Runs the load from the host it executes on. The role M(ascend.kvpool.kvpool_benchmark) delegates it to the
    node of instance 1 by default (as the guide runs AISBench next to the instances), so the controller's link
    is not part of the measurement.
  - With O(tool=aisbench) the step is run by AISBench (C(ais_bench), the guide's tool) with the guide's model
    config rendered from the same options and the same prompts, and its CSV/JSON results are parsed into the
    same summary.
  - With O(tool=aisbench), before any request is sent (in check mode too), the module checks on its host that
    O(aisbench_model_path) exists, that O(aisbench_command) is found and that C(ais_bench --help) runs (within
    120 seconds, C(LANG=C)); each failure names the option, the host and the fix, with the install line of the
    versions that work (torch from the CPU index, C(pyarrow<16) beside AISBench's C(numpy<2)).
  - A failed AISBench run puts the last 20 lines of its output in C(msg) and C(output_tail) of RV(aisbench), the API key
    replaced by C(********).
  - The prompt length is fitted with the instance's own tokenizer (C(POST /tokenize)) when it serves one.
author:
  - ascend.kvpool contributors (@ascend-kvpool)
attributes:
  check_mode:
    support: full
    description: In check mode no request is sent (not even to C(/metrics)); the module returns what it would run.
  diff_mode:
    support: none
    description: The module manages no state, so there is nothing to diff.
  idempotent:
    support: none
    description:
      - A benchmark sends traffic and fills the instances' KV caches, so a second run measures something else
        (for example cache hits in a step that was cold the first time). It always reports C(changed=false)
        because it manages no configuration.
options:
  name:
    description:
      - Label of the step, returned as RV(step).
      - With O(tool=aisbench) it is also the name of the step's directory under O(aisbench_work_dir), so it must be
        1-64 letters, digits, C(.), C(_) or C(-), starting with a letter or digit (no C(/), no C(..)).
    type: str
    default: step
  url:
    description: Base URL of the vLLM instance, for example C(http://10.0.0.11:8002) (C(http://) or C(https://);
      C(HOST:PORT) alone gets C(http://)).
    type: str
    required: true
  model:
    description: Served model name sent in the requests; empty uses the first id of C(GET /v1/models).
    type: str
    default: ''
  api:
    description: C(chat) sends C(/v1/chat/completions) (AISBench's C(vllm_api_stream_chat), the guide), C(completions)
      sends C(/v1/completions).
    type: str
    choices: [chat, completions]
    default: chat
  dataset_seed:
    description: Seed of the dataset. The same seed, size and tokenizer give the very same prompts.
    type: int
    required: true
  num_requests:
    description: Number of prompts of the dataset, each sent once (the guide 100).
    type: int
    default: 100
  input_tokens:
    description: Prompt length in tokens, chat template included (the guide 1024).
    type: int
    default: 1024
  shared_prefixes:
    description:
      - 0 (the guide) sends fully random prompts. A number K above 0 sends K groups of prompts that share a prefix
        of O(prefix_tokens) words at the start of the user message (as a long shared system prompt would be), each
        ending with a question of its own of about
        O(input_tokens) tokens (0-9 more, so lengths differ), interleaved group by group - the workload on which
        a routing policy with prefix affinity differs from round robin.
      - Only with O(tool=builtin).
    type: int
    default: 0
  prefix_tokens:
    description: Length of each shared prefix with O(shared_prefixes), in words of the dataset (about one token each).
    type: int
    default: 896
  output_tokens:
    description: C(max_tokens) of every request (the guide 10).
    type: int
    default: 10
  concurrency:
    description: Requests in flight at once (AISBench C(batch_size); the guide 25).
    type: int
    default: 25
  temperature:
    description: Sampling temperature (the guide 0).
    type: float
    default: 0
  ignore_eos:
    description: Ask for exactly O(output_tokens) tokens (the guide C(ignore_eos=True)).
    type: bool
    default: true
  tokenize:
    description:
      - How prompt lengths are fitted. C(server) uses the instance's C(POST /tokenize) and fails without it;
        C(words) assumes one token per word plus the chat template overhead; C(auto) uses C(server) when the
        instance answers, else C(words).
    type: str
    choices: [auto, server, words]
    default: auto
  request_timeout:
    description: Seconds one request may take as a whole, from the connection to the last byte of its stream (a
      server that answers one byte at a time is cut there). Redirects are never followed.
    type: float
    default: 600
  api_key:
    description:
      - Bearer token of the instance (vLLM C(--api-key) or C(VLLM_API_KEY)); empty sends none. Never returned.
      - With O(tool=aisbench) it is written into AISBench's model config (the only way AISBench takes it); that file
        is 0600 and the step's directory under O(aisbench_work_dir) 0700.
    type: str
    default: ''
  metrics_urls:
    description:
      - C(/metrics) URLs scraped right before and after the step, by a name of your choice (for example
        C(instance1), C(instance2), C(master)). A scrape that fails is reported, not fatal.
      - Each must be an C(http://) or C(https://) URL (C(HOST:PORT/metrics) alone gets C(http://)); anything else
        (a C(file://) URL, an empty value) fails the task before any traffic is sent, naming the entry.
    type: dict
    default: {}
  metrics_prefixes:
    description: Metric name prefixes kept from the scrapes (the rest is dropped from the result).
    type: list
    elements: str
    default: ['vllm:prefix_cache', 'vllm:external_prefix_cache', 'vllm:prompt_tokens', 'vllm:generation_tokens',
              'vllm:request_success', 'vllm:num_requests', 'vllm:kv_cache_usage',
              'vllm:time_to_first_token_seconds', 'kvpool_sim_pool', 'master_']
  return_requests:
    description: Return every request's timings in RV(requests).
    type: bool
    default: true
  tool:
    description: C(builtin) uses the collection's streaming client; C(aisbench) runs C(ais_bench) (must be installed).
    type: str
    choices: [builtin, aisbench]
    default: builtin
  aisbench_command:
    description: The C(ais_bench) executable (name on C(PATH) or path).
    type: str
    default: ais_bench
  aisbench_model_path:
    description:
      - C(path) of the guide's AISBench model config (the model directory, used by AISBench's tokenizer).
      - With O(tool=aisbench) it must exist on the host the module runs on; empty fails before anything is sent.
        The role M(ascend.kvpool.kvpool_benchmark) passes the model the instances serve (from their plan).
    type: str
    default: ''
  aisbench_work_dir:
    description:
      - Directory for the rendered config, the dataset file and AISBench's outputs; empty makes a temporary one
        (C(kvpool-aisbench-*) in the temporary directory), removed again at the end of the step, on success or
        failure.
      - Each step uses its own C(<aisbench_work_dir>/<name>). A directory there that an earlier run of this module
        made (it holds C(.kvpool-benchmark-step)) is replaced; anything else at that path is never removed, and the
        task fails naming it.
    type: path
  aisbench_timeout:
    description:
      - Seconds the C(ais_bench) run of the step may take as a whole; after them it is killed with every process it
        started (the module's own deadline, coreutils C(timeout) is not needed) and the step fails naming this
        option.
      - Unset or null is 3600 (one hour) - generous for a step of the guide (100 requests at concurrency 25 take
        minutes, most of it AISBench loading the tokenizer), finite so that a hung run ends.
      - A finite number above 0 and at most 604800 (a week); 0, below, NaN and infinity are refused before anything
        is sent.
    type: float
  variable_prefix:
    description:
      - Put before an option's name where a message names it, so that a role's messages name its own variables
        (the role M(ascend.kvpool.kvpool_benchmark) passes C(kvpool_benchmark_), giving for example
        C(kvpool_benchmark_aisbench_model_path)). Empty names the module's options.
    type: str
    default: ''
notes:
  - Time to first token is measured from just before the request is written to the arrival of the first
    streamed chunk that carries content; end-to-end latency to C(data [DONE]); TPOT is
    (E2E - TTFT) / (output tokens - 1), as AISBench computes it.
  - Percentiles interpolate linearly between closest ranks (numpy's default, as AISBench).
seealso:
  - module: ascend.kvpool.kvpool_benchmark_report
"""

EXAMPLES = r"""
- name: Step 1 of the guide - dataset A to instance 1, no cache
  ascend.kvpool.kvpool_benchmark:
    name: step1
    url: http://10.0.0.11:8002
    dataset_seed: 1234
    metrics_urls:
      instance1: http://10.0.0.11:8002/metrics
      instance2: http://10.0.0.12:8002/metrics
      master: http://10.0.0.11:9003/metrics
  register: step1

- name: Show the TTFT
  ansible.builtin.debug:
    msg: >-
      median TTFT {{ step1.summary.ttft_ms.median }} ms,
      external hits {{ step1.metrics.instance1.hits.external_hits }}
"""

RETURN = r"""
step:
  description: The step label (O(name)).
  returned: always
  type: str
  sample: step1
url:
  description: The instance the requests went to.
  returned: always
  type: str
model:
  description: The served model name used.
  returned: always
  type: str
  sample: qwen
tool:
  description: C(builtin) or C(aisbench).
  returned: always
  type: str
check_mode:
  description: True when nothing was sent (check mode).
  returned: always
  type: bool
dataset:
  description: The dataset sent, without the prompts.
  returned: success
  type: dict
  contains:
    seed: {description: O(dataset_seed)., type: int}
    count: {description: Number of prompts., type: int}
    input_tokens: {description: Wanted prompt length., type: int}
    tokens: {description: Min / mean / max counted prompt length., type: dict}
    exact: {description: Whether every prompt has exactly the wanted length., type: bool}
    method: {description: C(tokenize) (server tokenizer) or C(words) (assumed)., type: str}
    fingerprint: {description: sha256 prefix over the prompts; equal fingerprints mean the same prompts., type: str}
    shared_prefixes: {description: O(shared_prefixes) (0 - fully random prompts)., type: int}
    prefix_tokens: {description: "O(prefix_tokens) with O(shared_prefixes), else null.", type: int}
summary:
  description:
    - Aggregate of the step; latencies in milliseconds.
    - C(concurrency) - C(requested) (O(concurrency)) and C(achieved), the concurrency the client really held
      (AISBench's own C(Concurrency), the mean it held in flight, beside its C(Max Concurrency) in C(max); for the
      built-in client the mean requests in flight, the sum of every request's time in flight divided by the
      step's wall time).
  returned: success
  type: dict
  sample:
    requests: 100
    succeeded: 100
    failed: 0
    errors: []
    ttft_ms: {count: 100, mean: 225.1, median: 221.0, p90: 260.3, p99: 281.9, min: 30.2, max: 283.0}
    tpot_ms: {count: 100, mean: 4.1, median: 4.0, p90: 4.3, p99: 4.9, min: 3.9, max: 5.0}
    e2e_ms: {count: 100, mean: 262.0, median: 258.3, p90: 300.1, p99: 320.2, min: 66.1, max: 321.0}
    duration_s: 1.05
    request_throughput: 95.2
    concurrency: {requested: 25, achieved: 22.4, source: 'builtin - mean requests in flight'}
requests:
  description: Every request in dataset order (O(return_requests)); failed ones carry C(ok=false) and C(error).
  returned: success
  type: list
  elements: dict
  sample:
    - {index: 0, ok: true, status: 200, error: null, ttft_ms: 31.2, tpot_ms: 4.0, e2e_ms: 67.5, output_tokens: 10,
       start_s: 0.0}
metrics:
  description:
    - Per name of O(metrics_urls) - C(url), C(error) (null when both scrapes worked), C(before), C(after) and
      C(delta) (selected series), and C(hits) (vLLM instances - prefix and external query/hit tokens and rates,
      pool loads from the instance's own / another segment on the simulated stand-in) or C(master) (the Mooncake
      master's C(key_count), C(allocated_bytes), C(capacity_bytes), C(active_clients) before and after).
    - vLLM instances also get C(server_ttft) - the instance's own TTFT over the step from the change of its
      C(vllm:time_to_first_token_seconds) histogram - C(count) (requests observed), C(mean_ms) (change of
      C(_sum) / change of C(_count)), C(p50_ms) and C(p90_ms) (interpolated in the changed buckets as
      Prometheus' C(histogram_quantile), so only as fine as vLLM's bucket bounds); null when the scrapes hold
      no such histogram (keep C(vllm:time_to_first_token_seconds) in O(metrics_prefixes)).
  returned: success
  type: dict
aisbench:
  description:
    - With O(tool=aisbench) - the rendered config, the command, its result files, C(kept) (false - a temporary
      work directory, removed at the end of the step, so the paths are gone) and C(output_tail) (the last 20
      lines of its output, the API key replaced by C(********)), C(timeout_s) (the run's deadline, O(aisbench_timeout))
      and C(wall_s).
  returned: when O(tool=aisbench) and the step ran
  type: dict
started:
  description: Wall-clock start of the step (ISO 8601, UTC).
  returned: success
  type: str
"""

import io
import os
import shutil
import socket
import tempfile
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.ascend.kvpool.plugins.module_utils import _aisbench
from ansible_collections.ascend.kvpool.plugins.module_utils import _errors
from ansible_collections.ascend.kvpool.plugins.module_utils import _loadgen
from ansible_collections.ascend.kvpool.plugins.module_utils import _prometheus
from ansible_collections.ascend.kvpool.plugins.module_utils import _validate
from ansible_collections.ascend.kvpool.plugins.module_utils._errors import KvpoolError
from ansible_collections.ascend.kvpool.plugins.module_utils._runner import execute


def scrape(metrics_urls, prefixes, timeout):
    out = {}
    for name, url in sorted((metrics_urls or {}).items()):
        text, error = _loadgen.get_text(url, timeout=timeout)
        out[name] = {'url': url, 'samples': _prometheus.parse(text, prefixes) if text is not None else None,
                     'error': error}
    return out


def compare(before, after):
    out = {}
    for name in sorted(set(before) | set(after)):
        first = before.get(name) or {}
        last = after.get(name) or {}
        errors = [e for e in (first.get('error'), last.get('error')) if e]
        entry = {'url': last.get('url') or first.get('url'), 'error': '; '.join(errors) or None,
                 'before': first.get('samples'), 'after': last.get('samples'), 'delta': None}
        if first.get('samples') is not None and last.get('samples') is not None:
            entry['delta'] = _loadgen.diff(first['samples'], last['samples'])
        samples = last.get('samples') or first.get('samples') or {}
        if any(key.startswith('master_') for key in samples):
            entry['master'] = {
                'before': _loadgen.master_state(first['samples']) if first.get('samples') is not None else None,
                'after': _loadgen.master_state(last['samples']) if last.get('samples') is not None else None,
            }
        if any(key.startswith('vllm:') or key.startswith('kvpool_sim_') for key in samples):
            entry['hits'] = _loadgen.vllm_hits(entry['delta']) if entry['delta'] is not None else None
            entry['server_ttft'] = _loadgen.server_ttft(entry['delta']) if entry['delta'] is not None else None
        out[name] = entry
    return out


def dataset_info(data):
    tokens = data['tokens']
    return {
        'seed': data['seed'], 'count': data['count'], 'input_tokens': data['input_tokens'],
        'tokens': {'min': min(tokens) if tokens else None, 'max': max(tokens) if tokens else None,
                   'mean': round(float(sum(tokens)) / len(tokens), 1) if tokens else None},
        'exact': data['exact'], 'method': data['method'], 'fingerprint': data['fingerprint'],
        'shared_prefixes': data.get('groups', 0), 'prefix_tokens': data.get('prefix_tokens'),
    }


STEP_MARKER = '.kvpool-benchmark-step'


def prepare_step_dir(work, name):
    """``<work>/<name>``, new and empty, mode 0700; a directory this module made earlier (it holds
    ``STEP_MARKER``) is removed first. Anything else at that path is left alone and refused: the module never
    removes what it did not create. ``name`` is a checked path component (``_validate.path_component``)."""
    step_dir = os.path.join(work, name)
    if os.path.islink(step_dir) or (os.path.lexists(step_dir) and not os.path.isdir(step_dir)):
        raise KvpoolError('aisbench_work_dir: %s exists and is not a directory this module made: remove it or '
                          'choose another name or aisbench_work_dir' % step_dir)
    if os.path.isdir(step_dir):
        if not os.path.exists(os.path.join(step_dir, STEP_MARKER)):
            raise KvpoolError('aisbench_work_dir: %s exists but was not made by kvpool_benchmark (no %s in it), so it '
                              'is not removed: remove it yourself or choose another name or aisbench_work_dir'
                              % (step_dir, STEP_MARKER))
        shutil.rmtree(step_dir)
    # AISBench's model config holds the API key (when set), and AISBench copies its config into its outputs: the
    # step's directory is the owner's only, and the config file 0600 in any case.
    try:
        os.makedirs(step_dir, 0o700)
        os.chmod(step_dir, 0o700)
        with open(os.path.join(step_dir, STEP_MARKER), 'w') as handle:
            handle.write('made by ascend.kvpool.kvpool_benchmark: removed and made again by the next run of this '
                         'step\n')
    except (IOError, OSError) as exc:
        raise KvpoolError('aisbench_work_dir: cannot create %s: %s' % (step_dir, exc.strerror or exc)) from exc
    return step_dir


# The ais_bench run's deadline when none is given (seconds), and the largest one taken (a week: more is a typo).
AISBENCH_TIMEOUT = 3600
MAX_AISBENCH_TIMEOUT = 7 * 86400


def check_params(params):
    """Everything the argument spec cannot say, in one place; returns the instance URL. Raises KvpoolError."""
    url = _validate.http_url(params['url'], 'url')
    for key in ('num_requests', 'input_tokens', 'output_tokens', 'concurrency'):
        if params[key] < 1:
            raise KvpoolError('%s must be at least 1 (got %d)' % (key, params[key]))
    if params['input_tokens'] < 8:
        raise KvpoolError('input_tokens must be at least 8 (got %d)' % params['input_tokens'])
    # NaN passes a plain "<= 0" test (every comparison with it is false): a timeout of NaN would never end.
    _validate.number_range(params['request_timeout'], 'request_timeout', above=0, why='seconds')
    _validate.number_range(params['temperature'], 'temperature', low=0)
    params['aisbench_timeout'] = aisbench_timeout(params)
    for name in sorted(params['metrics_urls'] or {}):
        params['metrics_urls'][name] = _validate.http_url(params['metrics_urls'][name], 'metrics_urls.%s' % name)
    if params['shared_prefixes'] < 0 or params['shared_prefixes'] > params['num_requests']:
        raise KvpoolError('shared_prefixes must be between 0 and num_requests (got %d)' % params['shared_prefixes'])
    if params['shared_prefixes'] and params['prefix_tokens'] < 8:
        raise KvpoolError('prefix_tokens must be at least 8 (got %d)' % params['prefix_tokens'])
    if params['shared_prefixes'] and params['tool'] != 'builtin':
        raise KvpoolError('shared_prefixes needs tool=builtin (AISBench generates its own prompts from a file)')
    if params['tool'] == 'aisbench':
        if params['api'] != 'chat':
            raise KvpoolError('tool=aisbench runs the guide\'s vllm_api_stream_chat: api must be chat')
        _validate.path_component(params['name'], 'name')
    return url


def aisbench_timeout(params):
    """The seconds the ais_bench run may take: AISBENCH_TIMEOUT when unset or null, else a finite number above 0 and
    at most a week. 0 or below would end the run at once (or, given to timeout(1), mean no limit), NaN and infinity
    never. Raises KvpoolError naming the option (the role's variable) and the fix."""
    value = params.get('aisbench_timeout')
    if value is None:
        return AISBENCH_TIMEOUT
    name = _name(params, 'aisbench_timeout')
    try:
        return _validate.number_range(value, name, above=0, high=MAX_AISBENCH_TIMEOUT,
                                      why='seconds of the whole ais_bench run')
    except KvpoolError as exc:
        raise KvpoolError('%s. Fix: set %s to the seconds a step may take, or leave it unset (null) for %d'
                          % (exc, name, AISBENCH_TIMEOUT)) from exc


def _name(params, option):
    """How a message names an option: the role's variable when the role says its prefix (O(variable_prefix))."""
    return (params.get('variable_prefix') or '') + option


def check_aisbench(module, params):
    """Before any request is sent: the model path exists, ``ais_bench`` is found and starts. Returns the executable;
    raises KvpoolError naming the option (or the role's variable), the host and the fix."""
    host = socket.gethostname()
    path_var, command_var = _name(params, 'aisbench_model_path'), _name(params, 'aisbench_command')
    path = params['aisbench_model_path']
    if not path:
        raise KvpoolError('%s is empty: AISBench needs the served model\'s directory on %s (its tokenizer); set %s '
                          'to that directory on %s (the role takes it from the instance plan: the model the '
                          'instances serve)' % (path_var, host, path_var, host))
    if not os.path.exists(path):
        raise KvpoolError('%s=%s does not exist on %s, where the benchmark\'s client runs: AISBench reads the '
                          'model\'s tokenizer from there; set %s to a directory on %s that holds the served model\'s '
                          'tokenizer files, or run the client on a node that has the model (kvpool_benchmark_client_'
                          'host)' % (path_var, path, host, path_var, host))
    command = params['aisbench_command']
    exe = command if os.path.sep in command else module.get_bin_path(command)
    if not exe or not os.path.exists(exe):
        raise KvpoolError('%s=%s: not found on %s; install AISBench %s there (%s) and set %s to its ais_bench '
                          '(for example /opt/aisbench/bin/ais_bench)'
                          % (command_var, command, host, _aisbench.VERSION, _aisbench.INSTALL_HINT, command_var))
    # Our own deadline (its process group killed after it), with or without coreutils' timeout on the host.
    rc, out, err = execute(_aisbench.start_argv(exe), timeout=_aisbench.START_TIMEOUT)
    if rc != 0:
        tail = _aisbench.output_tail(out + '\n' + err, [params['api_key']], 8)
        why = ('did not answer within %d s' % _aisbench.START_TIMEOUT) if rc == -9 else ('exited with rc %s' % rc)
        raise KvpoolError('%s=%s cannot start on %s (ais_bench --help %s): %s; install the versions that work '
                          'there: %s' % (command_var, exe, host, why, ' | '.join(tail) or 'no output',
                                         _aisbench.INSTALL_HINT))
    return exe


def run_aisbench(params, url, model, data, exe):
    scheme, host, port, base = _loadgen.split_url(url)
    if scheme != 'http' or base:
        raise KvpoolError('tool=aisbench needs a plain http://host:port instance URL (got %s)' % url)
    # A temporary work directory is this step's own: removed at the end, whatever happens. A work directory the
    # operator named keeps the step's files (prepare_step_dir's rules).
    temporary = None if params['aisbench_work_dir'] else tempfile.mkdtemp(prefix='kvpool-aisbench-')
    try:
        return _run_aisbench(params, host, port, model, data, exe, temporary or params['aisbench_work_dir'],
                             temporary is not None)
    finally:
        if temporary:
            shutil.rmtree(temporary, ignore_errors=True)


def _run_aisbench(params, host, port, model, data, exe, work, temporary):
    step_dir = prepare_step_dir(work, params['name'])
    settings = _aisbench.model_settings(host, port, model, params['aisbench_model_path'], params['output_tokens'],
                                        params['concurrency'], params['temperature'], params['ignore_eos'],
                                        api_key=params['api_key'])
    dataset_path = os.path.join(step_dir, 'dataset_%d.jsonl' % data['seed'])
    with io.open(dataset_path, 'w', encoding='utf-8') as handle:
        handle.write(_aisbench.dataset_jsonl(data['prompts']))
    config_dir = os.path.join(step_dir, 'configs')
    os.makedirs(os.path.join(config_dir, 'models'))
    config_path = os.path.join(config_dir, 'models', _aisbench.MODEL_CONFIG_NAME + '.py')
    with io.open(os.open(config_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), 'w', encoding='utf-8') as handle:
        handle.write(_aisbench.render_model_config(settings))
    outputs = os.path.join(step_dir, 'outputs')
    argv = _aisbench.command(exe, config_dir, dataset_path, outputs)
    # The whole run under the module's deadline (its process group killed after it): never unbounded, also where
    # coreutils' timeout is missing.
    limit = params['aisbench_timeout']
    started = time.perf_counter()
    rc, out, err = execute(argv, timeout=limit, cwd=step_dir,
                           locale={'LANG': 'C.UTF-8', 'LC_ALL': 'C.UTF-8'})
    wall = time.perf_counter() - started
    tail = _aisbench.output_tail(out + '\n' + err, [params['api_key']])
    info = {'command': argv, 'rc': rc, 'work_dir': step_dir, 'config': config_path, 'dataset': dataset_path,
            'output_tail': tail, 'wall_s': round(wall, 3), 'kept': not temporary, 'timeout_s': limit}
    last = ('; its last %d lines:\n%s' % (len(tail), '\n'.join(tail))) if tail else '; it printed nothing'
    if rc == -9 and wall >= limit:
        name = _name(params, 'aisbench_timeout')
        raise KvpoolError('ais_bench did not finish within %s=%s s on %s, so it was killed with its children and '
                          'the step has no result. Fix: raise %s (the step\'s requests, concurrency and the model\'s '
                          'speed set how long a run takes), or find why it hangs%s'
                          % (name, '%g' % limit, socket.gethostname(), name, last), result=dict(aisbench=info))
    try:
        results = _aisbench.read_results(outputs, concurrency=params['concurrency'])
    except KvpoolError as exc:
        raise KvpoolError('ais_bench (rc %s) on %s: %s%s' % (rc, socket.gethostname(), exc, last),
                          result=dict(aisbench=info)) from exc
    if rc != 0 or results is None:
        raise KvpoolError('ais_bench failed (rc %s) on %s%s%s'
                          % (rc, socket.gethostname(),
                             '' if results else ', no performance results under %s' % outputs, last),
                          result=dict(aisbench=info))
    info.update(run_dir=results['run_dir'], csv=results['csv'], json=results['json'])
    return results['summary'], info


def main():
    module = AnsibleModule(
        argument_spec=dict(
            name=dict(type='str', default='step'),
            url=dict(type='str', required=True),
            model=dict(type='str', default=''),
            api=dict(type='str', default='chat', choices=['chat', 'completions']),
            dataset_seed=dict(type='int', required=True),
            num_requests=dict(type='int', default=100),
            input_tokens=dict(type='int', default=1024, no_log=False),
            output_tokens=dict(type='int', default=10, no_log=False),
            shared_prefixes=dict(type='int', default=0),
            prefix_tokens=dict(type='int', default=896, no_log=False),
            concurrency=dict(type='int', default=25),
            temperature=dict(type='float', default=0),
            ignore_eos=dict(type='bool', default=True),
            tokenize=dict(type='str', default='auto', choices=['auto', 'server', 'words']),
            request_timeout=dict(type='float', default=600),
            api_key=dict(type='str', default='', no_log=True),
            metrics_urls=dict(type='dict', default={}),
            metrics_prefixes=dict(type='list', elements='str',
                                  default=['vllm:prefix_cache', 'vllm:external_prefix_cache', 'vllm:prompt_tokens',
                                           'vllm:generation_tokens', 'vllm:request_success', 'vllm:num_requests',
                                           'vllm:kv_cache_usage', 'vllm:time_to_first_token_seconds',
                                           'kvpool_sim_pool', 'master_']),
            return_requests=dict(type='bool', default=True),
            tool=dict(type='str', default='builtin', choices=['builtin', 'aisbench']),
            aisbench_command=dict(type='str', default='ais_bench'),
            aisbench_model_path=dict(type='str', default=''),
            aisbench_work_dir=dict(type='path'),
            aisbench_timeout=dict(type='float'),
            variable_prefix=dict(type='str', default=''),
        ),
        supports_check_mode=True,
    )
    failed, result = _errors.outcome(module, run, module)
    if failed:
        module.fail_json(**result)
    module.exit_json(**result)


def run(module):
    params = module.params
    url = check_params(params)
    result = {'changed': False, 'step': params['name'], 'url': url, 'model': params['model'], 'tool': params['tool'],
              'check_mode': module.check_mode}
    # AISBench is checked before anything is sent (in check mode too: the checks send nothing).
    exe = None
    if params['tool'] == 'aisbench':
        try:
            exe = check_aisbench(module, params)
        except KvpoolError as exc:
            exc.result = dict(result, **exc.result)
            raise
    if module.check_mode:
        result['msg'] = ('check mode: would send %d %s requests of %d prompt tokens (seed %d, max_tokens %d, '
                         'concurrency %d) to %s with %s, and scrape %s before and after'
                         % (params['num_requests'], params['api'], params['input_tokens'], params['dataset_seed'],
                            params['output_tokens'], params['concurrency'], url, params['tool'],
                            ', '.join(sorted(params['metrics_urls'])) or 'no /metrics'))
        return result

    timeout = max(1.0, params['request_timeout'])
    model = params['model']
    if not model:
        try:
            names = _loadgen.served_models(url, params['api_key'] or None, timeout=min(timeout, 30.0))
        except Exception as exc:  # pylint: disable=broad-except
            raise KvpoolError('cannot list the served models of %s: %s' % (url, exc), result=result) from exc
        if not names:
            raise KvpoolError('%s/v1/models lists no model; set model' % url, result=result)
        model = names[0]
    result['model'] = model

    counter = None
    if params['tokenize'] in ('auto', 'server'):
        counter = _loadgen.tokenize_counter(url, model, params['api'], params['api_key'] or None,
                                            timeout=min(timeout, 60.0))
        if counter is None and params['tokenize'] == 'server':
            raise KvpoolError('tokenize=server but %s/tokenize does not answer' % url, result=result)
    overhead = _loadgen.CHAT_OVERHEAD
    if params['tool'] == 'aisbench':
        # AISBench sends "Question: <prompt>\nAnswer: " (its custom qa template): fit that text to the length.
        inner = counter
        counter = (lambda text: inner(_aisbench.wrap_prompt(text))) if inner is not None else None
        overhead += 2
    if params['shared_prefixes']:
        data = _loadgen.make_shared_prefix_dataset(params['dataset_seed'], params['shared_prefixes'],
                                                   params['num_requests'], params['prefix_tokens'],
                                                   params['input_tokens'], counter, overhead)
    else:
        data = _loadgen.make_dataset(params['dataset_seed'], params['num_requests'], params['input_tokens'], counter,
                                     overhead)
    result['dataset'] = dataset_info(data)

    result['started'] = time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())
    prefixes = params['metrics_prefixes'] or None
    before = scrape(params['metrics_urls'], prefixes, min(timeout, 30.0))
    if params['tool'] == 'aisbench':
        try:
            summary, info = run_aisbench(params, url, model, data, exe)
        except KvpoolError as exc:
            exc.result = dict(result, **exc.result)
            raise
        result['aisbench'] = info
        requests = []
    else:
        requests, wall = _loadgen.run_load(url, model, data['prompts'], params['concurrency'],
                                           params['output_tokens'], params['temperature'], params['ignore_eos'],
                                           params['api'], params['api_key'] or None, timeout)
        summary = _loadgen.summarize(requests, wall, params['output_tokens'] if params['ignore_eos'] else None,
                                     params['concurrency'])
    after = scrape(params['metrics_urls'], prefixes, min(timeout, 30.0))
    result['summary'] = summary
    result['requests'] = requests if params['return_requests'] else []
    result['metrics'] = compare(before, after)
    return result


if __name__ == '__main__':
    main()
