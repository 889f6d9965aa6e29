# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The TTFT benchmark report, built on the controller from the steps' results (``kvpool_benchmark`` module).

``build_report`` is pure (data in, data out): the steps in the guide's order, the guide's reference numbers
(clearly labelled as measured on other hardware), the checks that tell whether the run shows what the guide
shows (and, if not, the likely cause), and the summary lines. ``render_markdown`` gives the guide's table and
the per-step detail; ``render_chart`` draws the PNG with matplotlib (only imported there). Every artifact of a
run against the simulated mock cluster carries its SIMULATED label.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import math

# The seed guide's benchmark and result (2 x Atlas 800T A2, Qwen2.5-72B-Instruct, TP 4, vllm-ascend v0.22.1rc1,
# AISBench: 100 requests of 1024 input / 10 output tokens at concurrency 25).
REFERENCE = {
    'source': 'seed guide "PD co-located deployment with Mooncake multi-instance" (vllm-ascend v0.22.1rc1), '
              'benchmark section',
    'hardware': '2 x Atlas 800T A2, Qwen2.5-72B-Instruct, TP 4, AISBench',
    'requests': 100, 'concurrency': 25, 'input_tokens': 1024, 'output_tokens': 10,
    'ttft_ms': {'step1': 2322, 'step2': 739, 'step3': 948},
    'note': 'REFERENCE from other hardware (the guide), not measured by this run; compare the shape, not the values',
}

# The guide's sequence. ``flush`` is the preparation pass of dataset B.
STEPS = [
    {'id': 'step1', 'guide': 'TTFT1', 'title': 'Step 1: dataset A -> instance 1 (no cache)', 'instance': 'instance1',
     'dataset': 'A'},
    {'id': 'flush', 'guide': None, 'title': 'Step 2 preparation: dataset B -> instance 1 (pushes A out of device '
     'memory)', 'instance': 'instance1', 'dataset': 'B'},
    {'id': 'step2', 'guide': 'TTFT2', 'title': 'Step 2: dataset A -> instance 1 (local DRAM hit)',
     'instance': 'instance1', 'dataset': 'A'},
    {'id': 'step3', 'guide': 'TTFT3', 'title': 'Step 3: dataset A -> instance 2 (cross-node DRAM hit)',
     'instance': 'instance2', 'dataset': 'A'},
]
MEASURED = ('step1', 'step2', 'step3')
# A step whose client-side mean TTFT differs from the target instance's own (vllm:time_to_first_token_seconds)
# by more than this is flagged: that part of the reported TTFT is the client (or the network), not the pool.
TTFT_GAP_LIMIT = 0.10
# A step whose client held on average fewer than this share of the requests in flight it was asked for (the
# concurrency, or the step's request count when that is smaller) is flagged: its TTFT was measured at a lower load
# than the table's concurrency says. AISBench's own "Concurrency"; the built-in client's mean requests in flight.
CONCURRENCY_FLOOR = 0.5
CLIENTS = {'builtin': 'builtin client', 'aisbench': 'AISBench'}
CROSS_NODE_HINT = 'PYTHONHASHSEED mismatch or pool not shared'


def _num(value):
    """A finite number, else None (booleans, NaN and infinities are no measurement)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value if not (math.isnan(value) or math.isinf(value)) else None


def _d(value):
    """``value`` if it is a dict, else an empty one: results come from registered task output and may be anything."""
    return value if isinstance(value, dict) else {}


def _stat(step, metric, key):
    return _num(_d(_d(_d(step).get('summary')).get(metric)).get(key))


def _hits(step, which):
    entry = _d(_d(_d(step).get('metrics')).get(which))
    hits = entry.get('hits')
    return (hits if isinstance(hits, dict) else None), entry.get('error')


def _server_ttft(step, which):
    server = _d(_d(_d(step).get('metrics')).get(which)).get('server_ttft')
    if not isinstance(server, dict):
        return None
    return dict((k, _num(server.get(k))) for k in ('count', 'mean_ms', 'p50_ms', 'p90_ms'))


def _gap(client, server):
    client, server = _num(client), _num(server)
    if client is None or server is None or server <= 0:
        return None
    return round((client - server) / server, 4)


def _master(step):
    for name, entry in sorted(_d(_d(step).get('metrics')).items()):
        if isinstance(entry, dict) and isinstance(entry.get('master'), dict):
            return name, entry['master'], entry.get('error')
    return None, None, None


def _is_simulated(steps):
    for step in steps.values():
        for entry in _d(_d(step).get('metrics')).values():
            for series in _d(_d(entry).get('after')):
                if str(series).startswith('kvpool_sim_'):
                    return True
    return False


def _usable(result):
    return isinstance(result, dict) and not result.get('skipped') and isinstance(result.get('summary'), dict)


def _unusable(step_id, res):
    """The status of a step whose result cannot be reported (not run, check mode, error), or None."""
    if res is None or (isinstance(res, dict) and res.get('skipped')):
        return {'status': 'not run', 'summary': None}
    if isinstance(res, dict) and res.get('check_mode') and res.get('summary') is None:
        return {'status': 'check mode', 'summary': None, 'message': res.get('msg')}
    if not isinstance(res, dict):
        return {'status': 'error', 'summary': None,
                'error': 'the result of %s is a %s, not a kvpool_benchmark result: pass the registered result of the '
                         'step\'s kvpool_benchmark task' % (step_id, type(res).__name__)}
    if not _usable(res):
        out = {'status': 'error', 'error': str(res.get('msg') or 'no result').split('\n', 1)[0], 'summary': None,
               'tool': res.get('tool')}
        tail = _d(res.get('aisbench')).get('output_tail')
        if isinstance(tail, list) and tail:
            out['output_tail'] = [str(line) for line in tail]
        return out
    return None


def _fmt(value, digits=1, unit=''):
    if value is None or (isinstance(value, float) and _num(value) is None):
        return '-'
    if isinstance(value, float):
        text = ('%.' + str(digits) + 'f') % value
    else:
        text = str(value)
    return text + unit


def _pct(rate):
    rate = _num(rate)
    return '-' if rate is None else '%.1f%%' % (100.0 * rate)


def build_report(results, settings=None, instances=None, label='', reference=None, generated=None,
                 test_equipment=''):
    """The report of one run.

    ``results`` maps a step id (``step1``, ``flush``, ``step2``, ``step3``) to the registered result of the
    ``kvpool_benchmark`` module (missing, skipped or failed steps are reported as such). ``settings`` and
    ``instances`` are stored as given. The label gets a ``SIMULATED`` prefix when the instances' ``/metrics``
    show the simulated stand-in and the label does not say so already. ``test_equipment`` names the real engine a run
    used that is no hardware either (``real vLLM engine (CPU build, tiny model)``): its artifacts say so, where a
    simulated run says SIMULATED.
    """
    results = dict(results or {})
    reference = reference or REFERENCE
    simulated = _is_simulated(results) or 'SIMULATED' in (label or '').upper()
    if simulated and 'SIMULATED' not in (label or '').upper():
        label = ('SIMULATED (vllm stand-in) ' + (label or '')).strip()
    elif not simulated and test_equipment and str(test_equipment) not in (label or ''):
        label = ', '.join(x for x in (str(test_equipment), label or '') if x)
    steps = []
    for spec in STEPS:
        res = results.get(spec['id'])
        step = dict(spec)
        unusable = _unusable(spec['id'], res)
        if unusable:
            step.update(unusable)
            steps.append(step)
            continue
        hits, hits_error = _hits(res, spec['instance'])
        other = 'instance2' if spec['instance'] == 'instance1' else 'instance1'
        other_hits, _other_error = _hits(res, other)
        master_name, master, master_error = _master(res)
        step.update(
            status='check mode' if res.get('check_mode') else 'ok',
            url=res.get('url'), model=res.get('model'), tool=res.get('tool'), started=res.get('started'),
            dataset=res.get('dataset'), summary=res.get('summary'), hits=hits, hits_error=hits_error,
            other_instance_hits=other_hits, master=master, master_source=master_name, master_error=master_error,
            reference_ttft_ms=(reference.get('ttft_ms') or {}).get(spec['id']),
            server_ttft=_server_ttft(res, spec['instance']),
        )
        step['ttft_gap'] = _gap(_stat(res, 'ttft_ms', 'mean'), (step['server_ttft'] or {}).get('mean_ms'))
        step['concurrency'] = _concurrency(res, settings)
        if isinstance(res.get('aisbench'), dict):
            step['aisbench'] = dict((k, v) for k, v in res['aisbench'].items() if k != 'output_tail')
        steps.append(step)
    by_id = dict((s['id'], s) for s in steps)
    routing = routing_section(results, (settings or {}).get('router_policy', ''))
    checks = _checks(by_id, routing)
    findings = [c for c in checks if not c['ok']]
    flags = _ttft_flags(steps)
    low = _concurrency_flags(steps + list(_d(routing).get('steps') or []))
    report = {
        'title': 'vLLM-Ascend KV pool TTFT benchmark (the guide\'s three steps)',
        'label': label or '',
        'simulated': simulated,
        'test_equipment': '' if simulated else str(test_equipment or ''),
        'generated': generated or datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ'),
        'settings': settings or {},
        'instances': instances or {},
        'steps': steps,
        'ttft_ms': dict((sid, {'mean': _stat(by_id.get(sid), 'ttft_ms', 'mean'),
                               'median': _stat(by_id.get(sid), 'ttft_ms', 'median'),
                               'p90': _stat(by_id.get(sid), 'ttft_ms', 'p90'),
                               'p99': _stat(by_id.get(sid), 'ttft_ms', 'p99')}) for sid in MEASURED),
        'reference': reference,
        'checks': checks,
        'findings': findings,
        'ttft_flags': flags,
        'concurrency_flags': low,
        'ok': not findings,
        'routing': routing,
    }
    report['summary'] = summary_lines(report)
    return report


# The steps through the router (docs/router.md): dataset A through the deployed router, then the same workload of
# shared prefixes through a temporary round-robin router and through the deployed router (its own seed each).
ROUTER_STEPS = [
    {'id': 'router', 'guide': 'router', 'title': 'Dataset A through the router (hit sources per instance)'},
    {'id': 'routing_rr', 'guide': 'RR', 'title': 'Shared prefixes through a round-robin router'},
    {'id': 'routing_policy', 'guide': 'policy', 'title': 'Shared prefixes through the deployed router'},
]
INSTANCES = ('instance1', 'instance2')


def _sum_hits(res):
    """Hits of every instance of the step added up (``prefix_*``, ``external_*``), with the per-instance ones and
    the requests each instance served (``vllm:request_success_total``)."""
    total = {'prefix_queries': 0.0, 'prefix_hits': 0.0, 'external_queries': 0.0, 'external_hits': 0.0}
    per, served = {}, {}
    for name in INSTANCES:
        entry = _d(_d(_d(res).get('metrics')).get(name))
        hits = entry.get('hits') if isinstance(entry.get('hits'), dict) else None
        per[name] = hits
        delta = _d(entry.get('delta'))
        served[name] = sum(v for k, v in delta.items() if str(k).startswith('vllm:request_success_total')
                           and _num(v) is not None) if delta else None
        for key in total:
            if hits and _num(hits.get(key)) is not None:
                total[key] += hits[key]
    total['prefix_hit_rate'] = (total['prefix_hits'] / total['prefix_queries']) if total['prefix_queries'] else None
    total['external_hit_rate'] = ((total['external_hits'] / total['external_queries'])
                                  if total['external_queries'] else None)
    return total, per, served


def routing_section(results, policy=''):
    """The steps through the router, and the comparison of the deployed policy against round robin on the shared
    prefixes: ``steps`` (as the guide's, with ``hits`` added up over both instances, ``per_instance`` and
    ``served``) and ``comparison`` (ratios policy / round robin of the median TTFT and of the device hit rate, and
    whether the goal - device hit rate up, median TTFT down - is met). None when no router step was asked for."""
    results = dict(results or {})
    if not any(results.get(spec['id']) is not None for spec in ROUTER_STEPS):
        return None
    steps = []
    for spec in ROUTER_STEPS:
        res = results.get(spec['id'])
        step = dict(spec)
        unusable = _unusable(spec['id'], res)
        if unusable:
            step.update(unusable)
        else:
            hits, per, served = _sum_hits(res)
            step.update(status='ok', url=res.get('url'), dataset=res.get('dataset'), summary=res.get('summary'),
                        hits=hits, per_instance=per, served=served, tool=res.get('tool'),
                        concurrency=_concurrency(res))
        steps.append(step)
    by_id = dict((s['id'], s) for s in steps)
    rr, chosen = by_id['routing_rr'], by_id['routing_policy']
    comparison = None
    if rr['status'] == 'ok' and chosen['status'] == 'ok':
        ttft_rr, ttft_p = _stat(rr, 'ttft_ms', 'median'), _stat(chosen, 'ttft_ms', 'median')
        dev_rr, dev_p = rr['hits'].get('prefix_hit_rate'), chosen['hits'].get('prefix_hit_rate')
        ttft_ratio = round(ttft_p / ttft_rr, 3) if ttft_rr and ttft_p is not None else None
        dev_ratio = round(dev_p / dev_rr, 3) if dev_rr and dev_p is not None else None
        met = (dev_p is not None and dev_rr is not None and dev_p > dev_rr
               and ttft_p is not None and ttft_rr is not None and ttft_p < ttft_rr)
        comparison = {'policy': policy or 'the deployed policy', 'median_ttft_ratio': ttft_ratio,
                      'device_hit_rate_ratio': dev_ratio, 'goal_met': met,
                      'device_hit_rate': {'round_robin': dev_rr, 'policy': dev_p},
                      'median_ttft_ms': {'round_robin': ttft_rr, 'policy': ttft_p}}
    return {'steps': steps, 'comparison': comparison}


def routing_lines(section):
    """The summary lines of the router steps."""
    if not section:
        return []
    lines = []
    for step in section['steps']:
        if step['status'] != 'ok':
            error = (': ' + step['error']) if step.get('error') else ''
            lines.append('  %-6s %s%s' % (step['guide'], step['status'], error))
            lines += _tail_lines(step)
            continue
        ttft = _d(step['summary'].get('ttft_ms'))
        hits = step['hits']
        served = ', '.join('%s %s' % (k, _fmt(v, 0)) for k, v in sorted((step.get('served') or {}).items()))
        lines.append('  %-6s TTFT median %s / p90 %s ms; device prefix hits %s, external (pool) hits %s; served: %s; '
                     '%s/%s ok; %s' % (step['guide'], _fmt(ttft.get('median')), _fmt(ttft.get('p90')),
                                       _pct(hits.get('prefix_hit_rate')), _pct(hits.get('external_hit_rate')), served,
                                       step['summary'].get('succeeded'), step['summary'].get('requests'),
                                       _concurrency_text(step)))
    comp = section.get('comparison')
    if comp:
        lines.append('  routing %s vs round robin: median TTFT x%s, device hit rate x%s (goal: hit rate up and TTFT '
                     'down: %s)' % (comp['policy'], _fmt(comp['median_ttft_ratio'], 3),
                                    _fmt(comp['device_hit_rate_ratio'], 3), 'met' if comp['goal_met'] else 'MISSED'))
    return lines


def _check(name, ok, message, step=None):
    return {'check': name, 'ok': bool(ok), 'step': step, 'message': message}


def _router_checks(routing):
    """Findings of the steps through the router: a step that could not run, requests that failed."""
    out = []
    for step in (routing or {}).get('steps') or []:
        if step['status'] == 'error':
            out.append(_check('step_failed', False, '%s could not run: %s' % (step['title'], step.get('error')),
                              step['id']))
        elif step['status'] == 'ok':
            failed = _num(_d(step.get('summary')).get('failed')) or 0
            out.append(_check('router_requests_ok', failed == 0, '%s: %s of %s requests failed' % (
                step['title'], _fmt(failed, 0), _fmt(_d(step.get('summary')).get('requests'), 0)), step['id']))
    return out


def _checks(by_id, routing=None):
    out = []
    ran = [sid for sid in ('step1', 'flush', 'step2', 'step3') if by_id.get(sid, {}).get('status') == 'ok']
    attempted = [sid for sid in MEASURED if by_id.get(sid, {}).get('status') not in ('not run', 'check mode')]
    attempted += [s['id'] for s in (routing or {}).get('steps') or [] if s['status'] not in ('not run', 'check mode')]
    out += _router_checks(routing)
    if not attempted and not any(by_id.get(sid, {}).get('status') == 'check mode' for sid in MEASURED):
        out.append(_check('no_step_ran', False, 'no step of the benchmark ran (every result is missing or skipped): '
                          'nothing was measured; run benchmark.yml without --tags / --limit that skip its steps'))
    for sid in ('step1', 'flush', 'step2', 'step3'):
        step = by_id.get(sid) or {}
        if step.get('status') == 'error':
            out.append(_check('step_failed', False, '%s could not run: %s' % (step['title'], step.get('error')), sid))
            continue
        summary = step.get('summary') or {}
        if step.get('status') == 'ok' and _num(summary.get('failed')):
            errors = '; '.join('%s x%s' % (_d(e).get('error'), _d(e).get('count'))
                               for e in (summary.get('errors') if isinstance(summary.get('errors'), list) else []))
            out.append(_check('failed_requests', False, '%s: %d of %d requests failed: %s'
                              % (step['title'], summary['failed'], summary.get('requests') or 0, errors), sid))
    for sid in ran:
        step = by_id[sid]
        if step.get('hits') is None:
            out.append(_check('metrics', False, '%s: /metrics of %s not scraped before and after (%s): where the '
                              'hits came from is unknown' % (step['title'], step['instance'],
                                                             step.get('hits_error') or 'no data'), sid))
    step1, flush, step2, step3 = (by_id.get(s) or {} for s in ('step1', 'flush', 'step2', 'step3'))
    fingerprints = set((s.get('dataset') or {}).get('fingerprint') for s in (step1, step2, step3)
                       if s.get('status') == 'ok')
    if len(fingerprints) > 1:
        out.append(_check('same_dataset', False, 'steps 1-3 did not send the same dataset A (fingerprints %s): '
                          'set kvpool_benchmark_seed when running steps separately' % ', '.join(sorted(fingerprints))))
    hits1 = step1.get('hits') or {}
    if step1.get('status') == 'ok' and step1.get('hits') is not None:
        cached = (hits1.get('external_hits') or 0) + (hits1.get('prefix_hits') or 0)
        out.append(_check('step1_cold', cached == 0,
                          'step 1 was cold: no prefix or external hits on instance 1' if cached == 0 else
                          'step 1 was not cold: %d prompt tokens of dataset A were already cached (prefix %s, '
                          'external %s): TTFT1 is not a no-cache figure; use a new kvpool_benchmark_seed'
                          % (cached, _fmt(hits1.get('prefix_hits'), 0), _fmt(hits1.get('external_hits'), 0)),
                          'step1'))
    hits2 = step2.get('hits') or {}
    if step2.get('status') == 'ok' and step2.get('hits') is not None:
        device = hits2.get('prefix_hits') or 0
        out.append(_check('flush_evicted', device == 0,
                          'dataset B pushed dataset A out of device memory (no device prefix hits in step 2)'
                          if device == 0 else
                          'step 2 still hit %d tokens in device memory: dataset B (%s requests) did not push A out; '
                          'raise kvpool_benchmark_flush_requests' % (device, _fmt((flush.get('summary') or {})
                                                                                  .get('requests'), 0)), 'step2'))
        pool = hits2.get('external_hits') or 0
        out.append(_check('step2_pool_hits', pool > 0,
                          'step 2: %d tokens from the pool on instance 1 (local DRAM)' % pool if pool > 0 else
                          'step 2: no external (pool) hits on instance 1: the KV connector stored or loaded '
                          'nothing (kv-transfer-config, MOONCAKE_CONFIG_PATH, the master)', 'step2'))
    hits3 = step3.get('hits') or {}
    if step3.get('status') == 'ok' and step3.get('hits') is not None:
        pool = hits3.get('external_hits') or 0
        out.append(_check('step3_cross_node_hits', pool > 0,
                          'step 3: %d tokens from the pool on instance 2 (cross-node)' % pool if pool > 0 else
                          'step 3: no external hits on instance 2: %s (instance 2 could not find the KV blocks '
                          'instance 1 stored)' % CROSS_NODE_HINT, 'step3'))
    medians = [_stat(by_id.get(s), 'ttft_ms', 'median') for s in MEASURED]
    if all(m is not None for m in medians):
        t1, t2, t3 = medians
        out.append(_check('ttft_order', t1 > t3 > t2,
                          'median TTFT1 %.1f > TTFT3 %.1f > TTFT2 %.1f ms, as in the guide' % (t1, t3, t2)
                          if t1 > t3 > t2 else
                          'median TTFT1 %.1f, TTFT2 %.1f, TTFT3 %.1f ms: not the guide\'s TTFT1 > TTFT3 > TTFT2'
                          % (t1, t2, t3)))
    return out


def _client(tool):
    return CLIENTS.get(tool, str(tool)) if tool else None


def _concurrency(res, settings=None):
    """The concurrency a step asked for and the one its client held: ``requested``, ``achieved`` (AISBench's own
    ``Concurrency``; the built-in client's mean requests in flight), ``ratio`` (achieved / the most it could hold:
    the requested concurrency, or the step's request count when smaller), ``client`` and ``source``."""
    summary = _d(_d(res).get('summary'))
    held = _d(summary.get('concurrency'))
    requested = _num(held.get('requested'))
    if requested is None:
        try:
            requested = _num(float(_d(settings).get('concurrency')))
        except (TypeError, ValueError):
            requested = None
    achieved = _num(held.get('achieved'))
    most = requested
    requests = _num(summary.get('requests'))
    if most is not None and requests:
        most = min(most, requests)
    ratio = round(achieved / most, 4) if achieved is not None and most else None
    return {'requested': int(requested) if requested is not None else None, 'achieved': achieved, 'ratio': ratio,
            'client': _client(_d(res).get('tool')), 'source': held.get('source')}


def _concurrency_flags(steps):
    """The steps whose client held less than CONCURRENCY_FLOOR of the requests in flight it was asked for.

    Like the client-vs-server TTFT flag, a flag is about the measurement (the load that was really applied), not
    about the pool: it is listed next to the findings and does not make the run fail.
    """
    out = []
    for step in steps:
        held = step.get('concurrency') or {}
        if step.get('status') != 'ok' or held.get('ratio') is None or held['ratio'] >= CONCURRENCY_FLOOR:
            continue
        out.append({'step': step['id'], 'requested': held['requested'], 'achieved': held['achieved'],
                    'ratio': held['ratio'], 'client': held['client'],
                    'message': '%s: the client (%s) held %.1f requests in flight on average (%s), %.0f%% of the '
                               '%s asked for, below %d%%: its TTFT was measured at a lower load than the '
                               'concurrency in the table; the client did not start requests as fast as they '
                               'finished (its own time per request - building, sending, parsing, AISBench\'s worker '
                               'processes and tokenizer - or a busy client host), most visibly in steps whose '
                               'requests are short (cache hits)'
                               % (step['guide'] or step['id'], held['client'] or 'client', held['achieved'],
                                  'AISBench\'s own Concurrency' if held['client'] == CLIENTS['aisbench'] else
                                  'mean requests in flight', 100.0 * held['ratio'], held['requested'],
                                  int(round(100 * CONCURRENCY_FLOOR)))})
    return out


def _concurrency_text(step):
    held = step.get('concurrency') or {}
    if held.get('achieved') is None:
        return 'concurrency %s' % _fmt(held.get('requested'), 0)
    return 'concurrency %s held of %s' % (_fmt(held['achieved']), _fmt(held.get('requested'), 0))


def _ttft_flags(steps):
    """The steps whose client mean TTFT is more than TTFT_GAP_LIMIT away from the target instance's own mean.

    A flag is about the measurement (the client's share of the TTFT), not about the pool: it is listed next to the
    findings, and does not make the run fail.
    """
    out = []
    for step in steps:
        gap = step.get('ttft_gap')
        if step.get('status') != 'ok' or gap is None or abs(gap) <= TTFT_GAP_LIMIT:
            continue
        client = _stat(step, 'ttft_ms', 'mean')
        server = step['server_ttft']['mean_ms']
        out.append({'step': step['id'], 'client_mean_ms': client, 'server_mean_ms': server, 'gap': gap,
                    'message': '%s: client mean TTFT %.1f ms is %+.1f%% off the server-side mean %.1f ms of %s '
                               '(vllm:time_to_first_token_seconds), more than %d%%: that part of the reported TTFT '
                               'is the client or the network, not the pool'
                               % (step['guide'] or step['id'], client, 100.0 * gap, server, step['instance'],
                                  int(round(100 * TTFT_GAP_LIMIT)))})
    return out


def _server_text(step):
    server = step.get('server_ttft') or {}
    if server.get('mean_ms') is None:
        return 'server TTFT -'
    return 'server TTFT mean %s / p50 %s / p90 %s ms (client %s)' % (
        _fmt(server.get('mean_ms')), _fmt(server.get('p50_ms')), _fmt(server.get('p90_ms')),
        '-' if step.get('ttft_gap') is None else '%+.1f%%' % (100.0 * step['ttft_gap']))


def summary_lines(report):
    label = (' [%s]' % report['label']) if report.get('label') else ''
    verdict = 'as in the guide' if report['ok'] else '%d finding(s)' % len(report['findings'])
    missing = [s['guide'] for s in report['steps'] if s['id'] in MEASURED and s['status'] != 'ok']
    if report['ok'] and missing:
        verdict = 'partial run, no finding in what ran (%s not run or in check mode)' % ', '.join(missing)
    lines = ['KV pool TTFT benchmark%s: %s' % (label, verdict)]
    for step in report['steps']:
        if step['id'] == 'flush':
            summary = step.get('summary') or {}
            state = step['status']
            if state == 'ok':
                state = '%s requests, %s failed' % (summary.get('requests'), summary.get('failed'))
            lines.append('  %-6s dataset B -> %s: %s' % ('prep', step['instance'], state))
            lines += _tail_lines(step)
            continue
        if step['status'] != 'ok':
            state = step['status'] + (': ' + step['error'] if step.get('error') else '')
            lines.append('  %-6s %s' % (step['guide'] or step['id'], state))
            lines += _tail_lines(step)
            continue
        ttft = _d(step['summary'].get('ttft_ms'))
        hits = step.get('hits') or {}
        lines.append('  %-6s TTFT mean %s / median %s / p90 %s ms (guide %s ms, other hardware); %s; prefix hits '
                     '%s, external hits %s; %s/%s ok; %s (%s)'
                     % (step['guide'], _fmt(ttft.get('mean')), _fmt(ttft.get('median')), _fmt(ttft.get('p90')),
                        _fmt(step.get('reference_ttft_ms'), 0), _server_text(step), _pct(hits.get('prefix_hit_rate')),
                        _pct(hits.get('external_hit_rate')), step['summary'].get('succeeded'),
                        step['summary'].get('requests'), _concurrency_text(step),
                        (step.get('concurrency') or {}).get('client') or 'client ?'))
    lines += routing_lines(report.get('routing'))
    for finding in report['findings']:
        lines.append('  FINDING %s: %s' % (finding['check'], finding['message']))
    for flag in report.get('ttft_flags') or []:
        lines.append('  FLAG client_server_ttft: %s' % flag['message'])
    for flag in report.get('concurrency_flags') or []:
        lines.append('  FLAG low_concurrency: %s' % flag['message'])
    return lines


def _tail_lines(step):
    """The last lines of a failed AISBench step's output (the API key already replaced), under its line."""
    tail = step.get('output_tail') or []
    if not tail:
        return []
    return ['         ais_bench output, last %d lines:' % len(tail)] + ['         | %s' % line for line in tail]


def render_markdown(report, chart_name=None):
    """The report as Markdown: the guide's table next to the reference, then per step detail and the checks."""
    ref = report.get('reference') or REFERENCE
    settings = report.get('settings') or {}
    ttft = report.get('ttft_ms') or {}
    title = report['title']
    out = []
    if report.get('label'):
        out.append('# %s [%s]' % (title, report['label']))
        if report.get('simulated'):
            out.append('')
            out.append('> **SIMULATED**: this run targets the mock cluster (the `vllm` stand-in with a documented '
                       'timing model and the real Mooncake pool). Its timings are not hardware figures.')
        elif report.get('test_equipment'):
            out.append('')
            out.append('> **TEST EQUIPMENT, %s**: a real engine and the real Mooncake pool, but not the hardware the '
                       'guide measured. Its timings are not hardware figures.' % report['test_equipment'])
    else:
        out.append('# %s' % title)
    out += ['', 'Generated %s.' % report.get('generated'), '']
    out += ['## The guide\'s table', '',
            '| | requests | concurrency | TTFT1 (ms) | TTFT2 (ms) | TTFT3 (ms) |',
            '|---|---|---|---|---|---|']
    measured = [s for s in report['steps'] if s['id'] in MEASURED]
    clients = sorted(set(c for c in ((s.get('concurrency') or {}).get('client') or _client(s.get('tool'))
                                     for s in measured) if c)) or [_client(settings.get('tool')) or 'client ?']
    what = [('SIMULATED' if report.get('simulated') else report['test_equipment'])] \
        if report.get('simulated') or report.get('test_equipment') else []
    run_name = 'this run (%s)' % ', '.join(what + [' / '.join(clients)])
    held = [(s.get('concurrency') or {}).get('achieved') for s in measured]
    concurrency = _fmt(settings.get('concurrency'), 0)
    if any(h is not None for h in held):
        concurrency += ' (held %s)' % ' / '.join(_fmt(h) for h in held)
    for stat in ('mean', 'median', 'p90'):
        out.append('| %s, %s | %s | %s | %s | %s | %s |' % (
            run_name, stat, _fmt(settings.get('num_requests'), 0), concurrency,
            _fmt((ttft.get('step1') or {}).get(stat)), _fmt((ttft.get('step2') or {}).get(stat)),
            _fmt((ttft.get('step3') or {}).get(stat))))
    rt = ref.get('ttft_ms') or {}
    out.append('| REFERENCE (the guide, other hardware: %s) | %s | %s | %s | %s | %s |' % (
        ref.get('hardware'), ref.get('requests'), ref.get('concurrency'), rt.get('step1'), rt.get('step2'),
        rt.get('step3')))
    out += ['', '_%s._' % ref.get('note', ''), '']
    out += ['Concurrency: the one asked for, and in brackets the one the client really held in TTFT1 / TTFT2 / '
            'TTFT3 (AISBench\'s own `Concurrency`; for the builtin client the mean requests in flight, the sum of '
            'the requests\' durations over the step\'s wall time). Below %d%% of what was asked a step is flagged: '
            'its TTFT was measured at a lower load.' % int(round(100 * CONCURRENCY_FLOOR)), '']
    out += ['## Steps', '',
            '| step | instance | requests ok/failed | TTFT mean / median / p90 / p99 (ms) | server TTFT mean / p50 / '
            'p90 (ms) | client vs server mean | TPOT median (ms) | E2E median (ms) | prefix hit rate | external '
            '(pool) hit rate | pool hits own / other segment (tokens) | master keys / used MiB after | client | '
            'concurrency held / asked |',
            '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|']
    low = set(f['step'] for f in report.get('concurrency_flags') or [])
    flagged = set(f['step'] for f in report.get('ttft_flags') or [])
    for step in report['steps']:
        name = step['guide'] or 'prep (B)'
        if step['status'] != 'ok':
            state = step['status'] + (': ' + step['error'] if step.get('error') else '')
            out.append('| %s | %s | %s | | | | | | | | | | %s | |'
                       % (name, step['instance'], state, _client(step.get('tool')) or ''))
            continue
        summary = step['summary']
        ttft_s = _d(summary.get('ttft_ms'))
        hits = step.get('hits') or {}
        master_after = _d(_d(step.get('master')).get('after'))
        used = _num(master_after.get('allocated_bytes'))
        server = step.get('server_ttft') or {}
        gap = step.get('ttft_gap')
        gap_text = '-' if gap is None else '%+.1f%%' % (100.0 * gap)
        if step['id'] in flagged:
            gap_text += ' **FLAG**'
        held = step.get('concurrency') or {}
        held_text = '%s / %s' % (_fmt(held.get('achieved')), _fmt(held.get('requested'), 0))
        if step['id'] in low:
            held_text += ' **FLAG**'
        row = ('| %s | %s | %s/%s | %s / %s / %s / %s | %s / %s / %s | %s | %s | %s | %s | %s | %s / %s | %s / %s '
               '| %s | %s |')
        out.append(row % (
            name, step['instance'], summary.get('succeeded'), summary.get('failed'),
            _fmt(ttft_s.get('mean')), _fmt(ttft_s.get('median')), _fmt(ttft_s.get('p90')), _fmt(ttft_s.get('p99')),
            _fmt(server.get('mean_ms')), _fmt(server.get('p50_ms')), _fmt(server.get('p90_ms')), gap_text,
            _fmt(_d(summary.get('tpot_ms')).get('median')), _fmt(_d(summary.get('e2e_ms')).get('median')),
            _pct(hits.get('prefix_hit_rate')), _pct(hits.get('external_hit_rate')),
            _fmt(hits.get('pool_own_segment_tokens'), 0), _fmt(hits.get('pool_other_segment_tokens'), 0),
            _fmt(master_after.get('key_count'), 0), _fmt(used / 1048576.0 if used is not None else None),
            held.get('client') or '-', held_text))
    out += ['', 'Prefix hit rate: vLLM\'s own (device) prefix cache, `vllm:prefix_cache_hits_total / '
            'vllm:prefix_cache_queries_total`. External hit rate: tokens loaded through the KV connector from the '
            'Mooncake pool, `vllm:external_prefix_cache_hits_total / vllm:external_prefix_cache_queries_total`. '
            'Both are the counters\' change over the step on the instance the step targets.', '',
            'Server TTFT: the target instance\'s own `vllm:time_to_first_token_seconds` over the step (mean = change '
            'of `_sum` / change of `_count`; p50 / p90 interpolated in the changed histogram buckets, as Prometheus\' '
            '`histogram_quantile`, so only as fine as the bucket bounds). "client vs server mean" is (client mean - '
            'server mean) / server mean; beyond %d%% the step is flagged: that share of the TTFT is the client or '
            'the network, not the pool.' % int(round(100 * TTFT_GAP_LIMIT)), '']
    failed = [s for s in report['steps'] if s.get('output_tail')]
    if failed:
        out += ['## AISBench output of the failed steps', '']
        for step in failed:
            out += ['%s (last %d lines, the API key replaced):'
                    % (step['guide'] or 'prep (B)', len(step['output_tail'])), '', '```'] \
                + step['output_tail'] + ['```', '']
    section = report.get('routing')
    if section:
        out += ['## Through the router', '',
                '| step | requests ok/failed | TTFT median / p90 (ms) | device prefix hit rate | external (pool) hit '
                'rate | requests served per instance |', '|---|---|---|---|---|---|']
        for step in section['steps']:
            if step['status'] != 'ok':
                out.append('| %s | %s | | | | |' % (step['title'], step['status']))
                continue
            ttft_s = _d(step['summary'].get('ttft_ms'))
            out.append('| %s | %s/%s | %s / %s | %s | %s | %s |' % (
                step['title'], step['summary'].get('succeeded'), step['summary'].get('failed'),
                _fmt(ttft_s.get('median')), _fmt(ttft_s.get('p90')), _pct(step['hits'].get('prefix_hit_rate')),
                _pct(step['hits'].get('external_hit_rate')),
                ', '.join('%s %s' % (k, _fmt(v, 0)) for k, v in sorted((step.get('served') or {}).items()))))
        comp = section.get('comparison')
        if comp:
            out += ['', '%s against round robin on the same workload (shared prefixes): median TTFT x%s, device hit '
                    'rate x%s. Goal (device hit rate up, median TTFT down): **%s**.' % (
                        comp['policy'], _fmt(comp['median_ttft_ratio'], 3), _fmt(comp['device_hit_rate_ratio'], 3),
                        'met' if comp['goal_met'] else 'MISSED')]
        out += ['', 'Hit rates here are added up over both instances.', '']
    out += ['## Checks', '']
    for check in report.get('checks') or []:
        out.append('- %s **%s**: %s' % ('OK' if check['ok'] else 'FINDING', check['check'], check['message']))
    if not report.get('checks'):
        out.append('- no step ran')
    for flag in report.get('ttft_flags') or []:
        out.append('- FLAG **client_server_ttft**: %s' % flag['message'])
    for flag in report.get('concurrency_flags') or []:
        out.append('- FLAG **low_concurrency**: %s' % flag['message'])
    out += ['', '## Settings', '']
    for key in sorted(settings):
        out.append('- `%s`: %s' % (key, settings[key]))
    for name, inst in sorted((report.get('instances') or {}).items()):
        if isinstance(inst, dict):
            text = ', '.join('%s %s' % (k, inst[k]) for k in ('host', 'name', 'url', 'metrics_url') if inst.get(k))
        else:
            text = str(inst)
        out.append('- %s: %s' % (name, text or '-'))
    if chart_name:
        out += ['', '![TTFT per step](%s)' % chart_name]
    out.append('')
    return '\n'.join(out)


def render_chart(report, path, metadata=None):
    """Draw the PNG: median and p90 TTFT of the three steps, with prefix / external hit rates under each bar pair.
    ``metadata``: the PNG's text chunks (the report action's proof, ``Software: ascend.kvpool.<action>``).

    Returns None on success, else why no chart was drawn (matplotlib missing, no measured step).
    """
    try:
        import matplotlib
        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
    except ImportError as exc:
        return 'matplotlib is not installed on the controller (%s): no chart' % exc
    steps = [s for s in report['steps'] if s['id'] in MEASURED]
    steps += [s for s in (_d(report.get('routing')).get('steps') or []) if s['status'] == 'ok']
    if not any(s['status'] == 'ok' for s in steps):
        return 'no measured step: no chart'
    labels, medians, p90s, notes = [], [], [], []
    for step in steps:
        ttft = _d(_d(step.get('summary')).get('ttft_ms'))
        hits = step.get('hits') or {}
        labels.append('%s\n%s' % (step['guide'], step['title'].split(': ', 1)[-1]))
        medians.append(_num(ttft.get('median')) or 0.0)
        p90s.append(_num(ttft.get('p90')) or 0.0)
        notes.append('prefix hits %s\nexternal hits %s'
                     % (_pct(hits.get('prefix_hit_rate')), _pct(hits.get('external_hit_rate'))))
    fig, axis = plt.subplots(figsize=(9.5 if len(steps) <= 3 else 14, 5.6), dpi=110)
    xs = list(range(len(steps)))
    width = 0.36
    bars1 = axis.bar([x - width / 2 for x in xs], medians, width, label='median TTFT', color='#4C72B0')
    bars2 = axis.bar([x + width / 2 for x in xs], p90s, width, label='p90 TTFT', color='#DD8452')
    for rect in list(bars1) + list(bars2):
        axis.annotate('%.1f' % rect.get_height(), (rect.get_x() + rect.get_width() / 2, rect.get_height()),
                      ha='center', va='bottom', fontsize=8, xytext=(0, 2), textcoords='offset points')
    top = max(p90s + medians + [1.0])
    for x, note in zip(xs, notes):
        axis.text(x, top * 1.13, note, ha='center', va='bottom', fontsize=8, color='#333333')
    axis.set_ylim(0, top * 1.35)
    axis.set_xticks(xs)
    axis.set_xticklabels(labels, fontsize=8)
    axis.set_ylabel('time to first token (ms)')
    settings = report.get('settings') or {}
    title = 'KV pool TTFT benchmark: %s requests x %s tokens, concurrency %s' % (
        settings.get('num_requests', '?'), settings.get('input_tokens', '?'), settings.get('concurrency', '?'))
    if report.get('label'):
        title = '[%s]\n%s' % (report['label'], title)
    axis.set_title(title, fontsize=10)
    ref = (report.get('reference') or {}).get('ttft_ms') or {}
    axis.legend(loc='upper right', fontsize=8)
    fig.text(0.01, 0.01, 'Guide REFERENCE (other hardware, not this run): TTFT1 %s / TTFT2 %s / TTFT3 %s ms'
             % (ref.get('step1'), ref.get('step2'), ref.get('step3')), fontsize=7, color='#555555')
    if report.get('simulated'):
        fig.text(0.99, 0.01, 'SIMULATED', fontsize=9, color='#B00020', ha='right', weight='bold')
    elif report.get('test_equipment'):
        fig.text(0.99, 0.01, 'TEST EQUIPMENT, not hardware figures', fontsize=9, color='#B00020', ha='right',
                 weight='bold')
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    fig.savefig(path, metadata=metadata)
    plt.close(fig)
    return None
