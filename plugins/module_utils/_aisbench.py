# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""AISBench (the guide's benchmark tool): its model config rendered from the benchmark's variables, and its
performance results parsed into the built-in client's summary shape (standard library only, Python 3.8+).

AISBench writes, per run, ``<work_dir>/<YYYYMMDD_HHMMSS>/performances/<model abbr>/<dataset abbr>.csv`` (rows
E2EL, TTFT, TPOT, ITL, InputTokens, OutputTokens, OutputTokenThroughput, ...; columns ``Performance
Parameters, Stage, Average, Min, Max, Median, P75, P90, P99, N`` by default, the statistics being configurable)
and ``<dataset abbr>.json`` (``{"Benchmark Duration": {"total": "98409.4916 ms"}, "Total Requests": {"total":
8}, ...}``). Values carry their unit as a suffix (``"2006.0 ms"``, ``"41.6254 token/s"``, ``"0.0813 req/s"``);
latencies are in milliseconds. Sources: AISBench/benchmark ``calculators/base_perf_metric_calculator.py``
(``_add_units_to_metrics``, ``_export_to_csv``) and ``summarizers/default_perf.py``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import csv
import io
import json
import math
import os
import re

from ansible_collections.ascend.kvpool.plugins.module_utils._errors import ParseError
from ansible_collections.ascend.kvpool.plugins.module_utils._validate import FileProblem, read_text_file

MODEL_ABBR = 'vllm-api-stream-chat'
# The AISBench release seen working (docs/benchmark.md) and how to install it where the benchmark's client runs:
# the one place of these lines - the module's messages and the docs say the same (a unit test holds the docs to
# them). torch from the CPU index (the default index pulls a CUDA build of several GB); pyarrow<16 beside AISBench's
# numpy<2 (a newer pyarrow needs numpy 2 and AISBench dies at import); setuptools<70 (mmengine imports
# pkg_resources).
VERSION = '3.1.20260630'
INSTALL_TORCH = 'pip install torch --index-url https://download.pytorch.org/whl/cpu'
INSTALL_AISBENCH = "pip install ais_bench_benchmark==%s 'numpy<2' 'pyarrow<16' 'setuptools<70'" % VERSION
INSTALL_HINT = '%s, then %s' % (INSTALL_TORCH, INSTALL_AISBENCH)
# Seconds ``ais_bench --help`` may take before a step (it imports torch, datasets, pyarrow: slow, never minutes).
START_TIMEOUT = 120
# Lines of AISBench's output kept in a failed step's message and report.
TAIL_LINES = 20
REDACTED = '********'
_SECRET_ASSIGN = re.compile(r"""(api[_-]?key["']?\s*[=:]\s*["']?"""
                            r"""|authorization["']?\s*[=:]\s*["']?(?:bearer\s+)?|bearer\s+)([^"'\s,)]+)""",
                            re.IGNORECASE)
# Statistic column -> key of the built-in client's statistics.
STAT_KEYS = {'average': 'mean', 'mean': 'mean', 'median': 'median', 'min': 'min', 'max': 'max'}
_VALUE = re.compile(r'^\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*(.*?)\s*$')
_TO_MS = {'ms': 1.0, 's': 1000.0, 'us': 0.001, 'μs': 0.001}


def _py(value):
    """A Python literal for the rendered config (strings quoted, booleans and numbers as Python writes them)."""
    if isinstance(value, bool):
        return 'True' if value else 'False'
    if isinstance(value, (int, float)):
        return repr(value)
    return json.dumps(str(value))


def model_settings(host_ip, host_port, model, path='', max_out_len=10, batch_size=25, temperature=0,
                   ignore_eos=True, request_rate=0, retry=2, abbr=MODEL_ABBR, api_key=''):
    """The guide's model entry (``models[0]``) as a dict of the values to render."""
    return {
        'abbr': abbr, 'path': path or '', 'model': model, 'request_rate': request_rate, 'retry': int(retry),
        'host_ip': host_ip, 'host_port': int(host_port), 'max_out_len': int(max_out_len),
        'batch_size': int(batch_size), 'temperature': temperature, 'ignore_eos': bool(ignore_eos),
        'api_key': api_key or '',
    }


def _model_block(settings, indent='    '):
    lines = [
        'dict(',
        '    attr="service",',
        '    type=VLLMCustomAPIChatStream,',
        '    abbr=%s,' % _py(settings['abbr']),
        '    path=%s,' % _py(settings['path']),
        '    model=%s,' % _py(settings['model']),
        '    request_rate = %s,' % _py(settings['request_rate']),
        '    retry = %s,' % _py(settings['retry']),
        '    host_ip = %s,' % _py(settings['host_ip']),
        '    host_port = %s,' % _py(settings['host_port']),
        '    max_out_len = %s,' % _py(settings['max_out_len']),
        '    batch_size= %s,' % _py(settings['batch_size']),
        '    trust_remote_code=False,',
    ]
    if settings.get('api_key'):
        lines.append('    api_key=%s,' % _py(settings['api_key']))
    lines += [
        '    generation_kwargs = dict(',
        '        temperature = %s,' % _py(settings['temperature']),
        '        ignore_eos = %s,' % _py(settings['ignore_eos']),
        '    ),',
        ')',
    ]
    return '\n'.join(indent + line for line in lines)


def render_model_config(settings):
    """The guide's ``vllm_api_stream_chat.py`` model config with these settings (what the guide edits by hand)."""
    return '\n'.join([
        'from ais_bench.benchmark.models import VLLMCustomAPIChatStream',
        'from ais_bench.benchmark.utils.model_postprocessors import extract_non_reasoning_content',
        '',
        'models = [',
        _model_block(settings),
        ']',
        '',
    ])


MODEL_CONFIG_NAME = 'kvpool_vllm_api_stream_chat'


def command(executable, config_dir, dataset_path, work_dir, warmups=0):
    """The guide's ``ais_bench --models vllm_api_stream_chat ... --summarizer default_perf --mode perf`` for one
    step: the model config is the rendered one under ``<config_dir>/models/`` (``--config-dir``; a name of its own
    so that AISBench's packaged ``vllm_api_stream_chat`` is not matched too), the dataset the step's prompts as a
    custom ``qa`` dataset, no warm-up request (one would cache a prompt of dataset A before step 1 is measured)."""
    return [executable, '--models', MODEL_CONFIG_NAME, '--custom-dataset-path', dataset_path,
            '--custom-dataset-data-type', 'qa', '--summarizer', 'default_perf', '--mode', 'perf', '--debug',
            '--num-warmups', str(int(warmups)), '--config-dir', config_dir, '--work-dir', work_dir]


def wrap_prompt(question):
    """The text AISBench sends for a custom ``qa`` item ``{"question": q, "answer": ""}``: its default template
    ``Question: {question}\nAnswer: {answer}`` with the answer left out for generation. (Without an answer column
    AISBench builds a template it then rejects: "Prompt template must be a str or a dict".)"""
    return 'Question: %s\nAnswer: ' % question


def dataset_jsonl(prompts):
    """The prompts as an AISBench custom ``qa`` dataset: one ``{"question": ..., "answer": ""}`` per line."""
    return ''.join(json.dumps({'question': p, 'answer': ''}) + '\n' for p in prompts)


def start_argv(executable):
    """The check that AISBench can start at all (its CLI imports torch, datasets, pyarrow): ``ais_bench --help``."""
    return [executable, '--help']


def output_tail(text, secrets=(), lines=TAIL_LINES):
    """The last ``lines`` non-empty lines of AISBench's output, with every secret (the API key, which its model
    config holds and which it may print back) and anything that looks like a key or bearer token replaced by
    ``REDACTED``."""
    kept = [line.rstrip() for line in (text or '').splitlines() if line.strip()][-lines:] if lines else []
    out = []
    for line in kept:
        for secret in secrets or ():
            if secret:
                line = line.replace(secret, REDACTED)
        out.append(_SECRET_ASSIGN.sub(lambda m: m.group(1) + REDACTED, line))
    return out


# --- results --------------------------------------------------------------------------------------------------
def parse_value(text):
    """``"2006.0 ms"`` -> ``(2006.0, 'ms')``; ``"8"`` -> ``(8.0, '')``; ``8`` -> ``(8.0, '')``;
    anything else -> ``(None, text)``."""
    if isinstance(text, bool):
        return None, str(text)
    if isinstance(text, (int, float)):
        value = float(text)
        return (None, str(text)) if math.isnan(value) or math.isinf(value) else (value, '')
    match = _VALUE.match(str(text or ''))
    if not match:
        return None, str(text or '').strip()
    value = float(match.group(1))
    if math.isnan(value) or math.isinf(value):
        return None, str(text).strip()
    return value, match.group(2)


def to_ms(value, unit):
    """A latency value in milliseconds (AISBench writes ms; s and us are converted; no unit is taken as ms)."""
    if value is None:
        return None
    return value * _TO_MS.get((unit or 'ms').strip().lower(), 1.0)


def parse_perf_csv(text):
    """AISBench's per-request statistics CSV -> ``{metric: {stage: {column: (value, unit)}}}``.

    Column names are kept as written (``Average``, ``Median``, ``P90``, ``N``, ...); a BOM, CRLF and blank lines
    are tolerated; rows without a metric name are skipped.
    """
    try:
        return _parse_perf_csv(text)
    except csv.Error as exc:
        raise ParseError('not the CSV AISBench writes: %s' % exc) from exc


def _parse_perf_csv(text):
    out = {}
    reader = csv.reader(io.StringIO((text or '').lstrip('\ufeff')))
    header = None
    for row in reader:
        if not row or not any(cell.strip() for cell in row):
            continue
        if header is None:
            header = [cell.strip() for cell in row]
            continue
        cells = dict(zip(header, [cell.strip() for cell in row]))
        metric = cells.get(header[0], '')
        if not metric:
            continue
        stage = cells.get('Stage', 'total') or 'total'
        values = {}
        for column in header[1:]:
            if column == 'Stage':
                continue
            values[column] = parse_value(cells.get(column, ''))
        out.setdefault(metric, {})[stage] = values
    return out


def parse_perf_json(text):
    """AISBench's common-metrics JSON -> ``{metric: {stage: (value, unit)}}``; raises ``ParseError`` for text that
    is not a JSON object."""
    try:
        data = json.loads(text) if isinstance(text, str) else text
    except ValueError as exc:
        raise ParseError('not the JSON AISBench writes: %s' % exc) from exc
    if data is not None and not isinstance(data, dict):
        raise ParseError('not the JSON object AISBench writes (got a %s)' % type(data).__name__)
    out = {}
    for metric, stages in (data or {}).items():
        if isinstance(stages, dict):
            out[metric] = dict((str(stage), parse_value(value)) for stage, value in stages.items())
        else:
            out[metric] = {'total': parse_value(stages)}
    return out


def _stage(table, preferred='total'):
    """The stage to read: ``preferred`` if present (case-insensitive), else the first one."""
    for stage in table:
        if stage.lower() == preferred.lower():
            return stage
    return next(iter(table), None)


def _latency(stats_by_stage, stage):
    if not stats_by_stage:
        return None
    row = stats_by_stage.get(_stage(stats_by_stage, stage)) or {}
    out = {'count': None, 'mean': None, 'median': None, 'p90': None, 'p99': None, 'min': None, 'max': None}
    for column, (value, unit) in row.items():
        key = column.strip().lower()
        if key == 'n':
            out['count'] = int(value) if value is not None else None
        elif key in STAT_KEYS:
            out[STAT_KEYS[key]] = _round(to_ms(value, unit))
        elif re.match(r'^p\d+$', key):
            out[key] = _round(to_ms(value, unit))
    return out


def _plain(stats_by_stage, stage):
    if not stats_by_stage:
        return None
    row = stats_by_stage.get(_stage(stats_by_stage, stage)) or {}
    out = {}
    for column, (value, _unit) in row.items():
        key = column.strip().lower()
        if key == 'n':
            out['count'] = int(value) if value is not None else None
        else:
            out[STAT_KEYS.get(key, key)] = value
    return out


def _round(value):
    return round(value, 3) if value is not None else None


def _common(common, name, stage):
    entry = None
    for key in common or {}:
        if key.lower() == name.lower():
            entry = common[key]
            break
    if not entry:
        return None, ''
    return entry.get(_stage(entry, stage), (None, ''))


def to_summary(perf, common=None, stage='total', concurrency=None):
    """AISBench results in the shape of ``_loadgen.summarize`` (latencies in ms). ``concurrency`` is the requested
    one (``batch_size``); the achieved one is AISBench's own ``Concurrency`` (the mean it held in flight), beside
    its ``Max Concurrency``."""
    total = _common(common, 'Total Requests', stage)[0]
    failed = _common(common, 'Failed Requests', stage)[0]
    success = _common(common, 'Success Requests', stage)[0]
    duration, unit = _common(common, 'Benchmark Duration', stage)
    duration_ms = to_ms(duration, unit)
    summary = {
        'requests': int(total) if total is not None else None,
        'succeeded': int(success) if success is not None else None,
        'failed': int(failed) if failed is not None else None,
        'errors': [],
        'failed_indexes': [],
        'short_outputs': [],
        'ttft_ms': _latency(perf.get('TTFT'), stage),
        'tpot_ms': _latency(perf.get('TPOT'), stage),
        'e2e_ms': _latency(perf.get('E2EL'), stage),
        'itl_ms': _latency(perf.get('ITL'), stage),
        'output_tokens': _plain(perf.get('OutputTokens'), stage),
        'input_tokens': _plain(perf.get('InputTokens'), stage),
        'duration_s': round(duration_ms / 1000.0, 3) if duration_ms is not None else None,
        'request_throughput': _common(common, 'Request Throughput', stage)[0],
        'output_token_throughput': _common(common, 'Output Token Throughput', stage)[0],
    }
    held = _common(common, 'Concurrency', stage)[0]
    most = _common(common, 'Max Concurrency', stage)[0]
    summary['concurrency'] = {
        'requested': int(concurrency) if concurrency else (int(most) if most is not None else None),
        'achieved': _round(held), 'max': int(most) if most is not None else None,
        'source': 'AISBench Concurrency (its mean in flight) beside Max Concurrency',
    }
    if summary['succeeded'] is None and summary['ttft_ms']:
        summary['succeeded'] = summary['ttft_ms'].get('count')
    if summary['requests'] is None and summary['succeeded'] is not None:
        summary['requests'] = summary['succeeded'] + (summary['failed'] or 0)
    return summary


def find_results(work_dir, abbr=MODEL_ABBR):
    """The newest run under ``work_dir``: ``(run dir, [(csv path, json path or None), ...])``.

    ``work_dir`` may also be a run directory itself (one that holds ``performances/``).
    """
    candidates = []
    if os.path.isdir(os.path.join(work_dir, 'performances')):
        candidates.append(work_dir)
    elif os.path.isdir(work_dir):
        for name in sorted(os.listdir(work_dir), reverse=True):
            path = os.path.join(work_dir, name)
            if os.path.isdir(os.path.join(path, 'performances')):
                candidates.append(path)
    for run in candidates:
        perf_dir = os.path.join(run, 'performances', abbr)
        if not os.path.isdir(perf_dir):
            dirs = sorted(d for d in os.listdir(os.path.join(run, 'performances'))
                          if os.path.isdir(os.path.join(run, 'performances', d)))
            if not dirs:
                continue
            perf_dir = os.path.join(run, 'performances', dirs[0])
        pairs = []
        for name in sorted(os.listdir(perf_dir)):
            if name.endswith('.csv'):
                json_path = os.path.join(perf_dir, name[:-4] + '.json')
                pairs.append((os.path.join(perf_dir, name), json_path if os.path.exists(json_path) else None))
        if pairs:
            return run, pairs
    return None, []


RESULT_LIMIT = 16 << 20  # bytes: a result file is a few kilobytes


def _read(path, parse):
    """``parse`` of the text of ``path``; ``ParseError`` naming the file when it cannot be read or parsed. Only a
    regular file is opened (``_validate.read_text_file``): a FIFO or a device named like a result never blocks the
    step; line ends are read as ``io.open`` reads them (CRLF and CR as LF)."""
    try:
        text = read_text_file(path, RESULT_LIMIT).replace('\r\n', '\n').replace('\r', '\n')
        return parse(text)
    except (FileProblem, IOError, OSError, UnicodeDecodeError, csv.Error, ParseError) as exc:
        raise ParseError('AISBench result %s cannot be read: %s' % (path, exc)) from exc


def read_results(work_dir, abbr=MODEL_ABBR, stage='total', concurrency=None):
    """Parse the newest run's first dataset result: ``{'run_dir', 'csv', 'json', 'summary'}`` or None."""
    run, pairs = find_results(work_dir, abbr)
    if not pairs:
        return None
    csv_path, json_path = pairs[0]
    perf = _read(csv_path, parse_perf_csv)
    common = _read(json_path, parse_perf_json) if json_path else {}
    return {'run_dir': run, 'csv': csv_path, 'json': json_path, 'summary': to_summary(perf, common, stage, concurrency)}
