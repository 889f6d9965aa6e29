# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Controller-side logic of the NPU network verification: who pings whom, and the cluster summary.

Pure functions of plain data (used by the filter and action plugins), unit-tested without a cluster.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import random
import re
from collections import Counter


STRATEGIES = ('same_index', 'ring', 'sampled', 'full_mesh', 'none')
# Strategies whose pings grow linearly with the number of nodes (one or k per port).
LINEAR = ('ring', 'sampled')
SAMPLED_K_DEFAULT = 2
_EPOCH = datetime.date(1970, 1, 1)


def _dev_key(dev):
    try:
        return int(dev)
    except (TypeError, ValueError):
        return dev


def _node_key(node):
    """Natural order of node names: node2 before node10."""
    return [(0, int(part), '') if part.isdigit() else (1, 0, part) for part in re.split(r'(\d+)', str(node))]


def _dev_sort(dev):
    return (0, dev, '') if isinstance(dev, int) else (1, 0, str(dev))


def _layout(ips_by_node):
    """``[(node, {dev: ip})]`` in natural node order, devices as ints where they are numbers, NPUs without an IP
    dropped."""
    out = []
    for node in sorted(ips_by_node or {}, key=_node_key):
        ips = dict((_dev_key(d), ip) for d, ip in ((ips_by_node or {}).get(node) or {}).items() if ip)
        out.append((node, ips))
    return out


def default_round(today=None):
    """The rotation round of ``sampled`` when none is given: the UTC day number (days since 1970-01-01) on the
    controller. Every run of one day pings the same pairs (a failure can be checked again after the fix); the
    next day pings the next peers."""
    today = today or datetime.datetime.now(datetime.timezone.utc).date()
    return (today - _EPOCH).days


def _offsets(n_peers, seed, index):
    """The peer offsets 1..n_peers of one NPU index in a seeded order (``random.Random`` with a string seed is the
    same on every Python 3 and independent of PYTHONHASHSEED)."""
    offsets = list(range(1, n_peers + 1))
    random.Random('ascend.kvpool/%s/%s/%d' % (seed, index, n_peers)).shuffle(offsets)
    return offsets


def ping_plan(ips_by_node, strategy='same_index', k=SAMPLED_K_DEFAULT, seed=0, round_=0, only=None):
    """Every ping of the cluster: ``{node: [{'device', 'address', 'label'}]}`` for each node of ``ips_by_node``.

    ``ips_by_node`` maps each node of the play to ``{device id: ip or None}`` (hccn_facts' ``ips``). NPUs without
    an IP on either side are not pinged (the ip check reports them).

    - same_index: NPU i pings NPU i of every other node (N x (N-1) pings per index).
    - full_mesh: every NPU pings every NPU of every other node.
    - ring: per index i, the nodes that have NPU i in natural name order form a ring; NPU i of each pings NPU i of
      the next, the last pings the first (one ping per port).
    - sampled: per index i, NPU i of each node pings NPU i of ``k`` peers of that ring, at offsets taken from a
      seeded order of the offsets 1..n-1: round r takes the k offsets from position r x k on (cyclically), so
      consecutive rounds take the next ones and every same-index pair is pinged within ceil((n-1)/k) rounds.
      Every node uses the same offsets in a round: each port sends and receives k pings.
    - none: nothing.

    ``only`` (a node name) plans that node's pings alone (what each host's hccn_ping task needs).

    ring and sampled also ping a port whose index no other node has: it pings the lowest NPU of the next node
    that has one, so every port with an IP is pinged as long as another node has a port with an IP.
    """
    if strategy not in STRATEGIES:
        raise ValueError('npu_network_ping_strategy must be one of %s, got %r' % (', '.join(STRATEGIES), strategy))
    layout = _layout(ips_by_node)
    plan = dict((node, []) for node, dummy in layout)
    if strategy == 'none':
        return plan
    if strategy in ('same_index', 'full_mesh'):
        for node, local in layout:
            if only is not None and node != only:
                continue
            for other, remote in layout:
                if other == node:
                    continue
                for dev in sorted(local, key=_dev_sort):
                    rdevs = ([dev] if dev in remote else []) if strategy == 'same_index' \
                        else sorted(remote, key=_dev_sort)
                    plan[node].extend(_target(dev, other, rdev, remote[rdev]) for rdev in rdevs)
        return plan
    try:
        k = int(k)
    except (TypeError, ValueError):
        k = -1
    if strategy == 'sampled' and k < 1:
        raise ValueError('npu_network_ping_sample_k must be an integer of at least 1, got %r' % (k,))
    try:
        round_ = int(round_)
    except (TypeError, ValueError) as e:
        raise ValueError('npu_network_ping_round must be an integer, got %r' % (round_,)) from e
    devices = sorted(set(dev for dummy, ips in layout for dev in ips), key=_dev_sort)
    for dev in devices:
        ring = [(node, ips) for node, ips in layout if dev in ips]
        n = len(ring)
        if n == 1:
            if only is None or ring[0][0] == only:
                _orphan(plan, layout, ring[0][0], dev)
            continue
        if strategy == 'ring':
            offsets = [1]
        else:
            order = _offsets(n - 1, seed, dev)
            offsets = [order[(round_ * k + t) % (n - 1)] for t in range(min(k, n - 1))]
        for pos, node in enumerate(name for name, ips in ring):
            if only is not None and node != only:
                continue
            for off in offsets:
                other, remote = ring[(pos + off) % n]
                plan[node].append(_target(dev, other, dev, remote[dev]))
    for node in plan:
        plan[node].sort(key=lambda t: (_dev_sort(t['device']), _node_key(t['label'])))
    return plan


def _target(dev, other, rdev, rip):
    return {'device': dev, 'address': rip, 'label': '%s/npu%s' % (other, rdev)}


def _orphan(plan, layout, node, dev):
    """A port whose index no other node has: ping the lowest NPU of the next node (natural order) with one."""
    names = [name for name, dummy in layout]
    start = names.index(node)
    for step in range(1, len(layout)):
        other, remote = layout[(start + step) % len(layout)]
        if remote:
            rdev = sorted(remote, key=_dev_sort)[0]
            plan[node].append(_target(dev, other, rdev, remote[rdev]))
            return


def hccn_ping_targets(ips_by_node, node, strategy='same_index', k=SAMPLED_K_DEFAULT, seed=0, round_=0):
    """Targets for hccn_ping on ``node``: its part of :func:`ping_plan`."""
    return ping_plan(ips_by_node, strategy, k, seed, round_, only=node).get(node, [])


def ping_coverage(ips_by_node, strategy='same_index', k=SAMPLED_K_DEFAULT, seed=0, round_=0):
    """What a plan covers, for the summary: pings, distinct cross-node NPU pairs pinged (unordered) of all
    cross-node pairs of NPUs with an IP, ports with an IP, those pinged at least once (sending or answering),
    the ones never pinged (``node/npuN``), and for sampled the rounds after which every same-index pair was
    pinged."""
    plan = ping_plan(ips_by_node, strategy, k, seed, round_)
    layout = _layout(ips_by_node)
    ports = sum(len(ips) for dummy, ips in layout)
    total_pairs = (ports * ports - sum(len(ips) * len(ips) for dummy, ips in layout)) // 2
    by_ip = dict((ip, '%s/npu%s' % (node, dev)) for node, ips in layout for dev, ip in ips.items())
    pairs = set()
    pinged = set()
    pings = 0
    for node, targets in plan.items():
        for t in targets:
            src = '%s/npu%s' % (node, t['device'])
            dst = by_ip.get(t['address'], t['label'])
            pings += 1
            pairs.add((min(src, dst), max(src, dst)))
            pinged.update((src, dst))
    all_ports = ['%s/npu%s' % (node, dev) for node, ips in layout for dev in sorted(ips, key=_dev_sort)]
    out = {
        'strategy': strategy,
        'pings': pings,
        'pairs': len(pairs),
        'total_pairs': total_pairs,
        'ports': ports,
        'ports_pinged': len([p for p in all_ports if p in pinged]),
        'not_pinged': [p for p in all_ports if p not in pinged],
    }
    if strategy == 'sampled':
        widest = max([len([1 for dummy, ips in layout if dev in ips]) for dummy, ips in layout for dev in ips] or [0])
        out.update(k=int(k), seed=seed, round=int(round_),
                   full_cycle=-(-(widest - 1) // int(k)) if widest > 1 else 0)
    return out


def coverage_line(cov):
    """The summary's coverage sentence, e.g. ``ring: 512 of 129,024 cross-node NPU pairs; every port pinged at
    least once``."""
    name = cov['strategy']
    if name == 'sampled':
        name = 'sampled (k=%d, seed %s, round %d)' % (cov['k'], cov['seed'], cov['round'])
    line = '%s: {:,} of {:,} cross-node NPU pairs; '.format(cov['pairs'], cov['total_pairs']) % name
    if name == 'none':
        line += 'no port pinged (ping strategy none)'
    elif not cov['not_pinged']:
        line += 'every port pinged at least once' if cov['ports'] else 'no port with an IP'
    else:
        shown = cov['not_pinged'][:8]
        line += '%d of %d port(s) not pinged: %s%s' % (
            len(cov['not_pinged']), cov['ports'], ', '.join(shown), ', ...' if len(cov['not_pinged']) > 8 else '')
    if cov.get('full_cycle'):
        line += '; every same-index pair within %d round(s)' % cov['full_cycle']
    return line


def node_result(hccn=None, ping=None):
    """One node's part of the report from its registered hccn_facts and hccn_ping results (either may be absent,
    failed or skipped): NPUs checked, errors (a module that failed as a whole), failed checks, TLS, pings."""
    hccn = hccn if isinstance(hccn, dict) else {}
    ping = ping if isinstance(ping, dict) else {}
    errors = []
    if hccn.get('failed'):
        errors.append({'check': 'tool', 'message': hccn.get('msg') or 'hccn_facts failed'})
    if ping.get('failed'):
        errors.append({'check': 'ping', 'message': ping.get('msg') or 'hccn_ping failed'})
    return {
        'npus': len(hccn.get('device_ids') or []),
        'errors': errors,
        'findings': hccn.get('failed_checks') or [],
        'tls': hccn.get('tls') or {},
        'ping': ({'count': ping['results#'] if 'results#' in ping else len(ping.get('results') or []),
                  'failed_pairs': ping['failed_pairs']}
                 if ping.get('failed_pairs') is not None else {}),
    }


def _is_npu_id(value):
    return not isinstance(value, bool) and isinstance(value, int) and 0 <= value <= 15


def input_errors(values_by_host):
    """The role's input checks, once for the whole play: ``values_by_host`` maps host -> (npu_network_devices,
    npu_network_checks[, npu_network_npu_groups, npu_network_link_flap_threshold]). Returns one message per host
    with a bad value, naming the host, the variable and the fix."""
    out = []
    for host in sorted(values_by_host, key=_node_key):
        devices, checks = values_by_host[host][:2]
        groups, threshold = (tuple(values_by_host[host][2:4]) + ([], 0))[:2]
        if isinstance(threshold, str) and threshold.strip().isdigit():
            threshold = int(threshold)  # -e npu_network_link_flap_threshold=5 arrives as text
        bad_groups = not isinstance(groups, list) or any(
            not isinstance(g, list) or not all(_is_npu_id(n) for n in g) for g in groups)
        bad_threshold = isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 0
        if bad_groups or bad_threshold:
            out.append('%s: npu_network_npu_groups must be a list of lists of NPU ids 0-15, one list per instance '
                       '(got %r), and npu_network_link_flap_threshold a count of 0 or more (got %r). Fix the variable '
                       'in your inventory, or leave npu_network_npu_groups as [] to check all NPUs of the node as '
                       'one group' % (host, groups, threshold))
        bad_devices = not isinstance(devices, list) or any(
            isinstance(d, bool) or not isinstance(d, int) or not 0 <= d <= 15 for d in devices)
        if bad_devices:
            out.append('%s: npu_network_devices must be NPU physical ids 0-15 (got %r); fix the variable in your '
                       'inventory, or leave it as [] to discover the NPUs' % (host, devices))
        if not isinstance(checks, list) or not checks:
            out.append('%s: npu_network_checks must not be empty (got %r); fix the variable in your inventory'
                       % (host, checks))
    return out


def _finding(node, npu, check, message, raw=None):
    return {'node': node, 'npu': npu, 'check': check, 'message': message, 'raw': raw}


def _tls_findings(node_results):
    """The guide: TLS settings must be the same on all nodes. Name every NPU that differs from the majority."""
    values = []
    for node in sorted(node_results):
        for dev, tls in sorted(((node_results[node] or {}).get('tls') or {}).items(), key=lambda kv: str(kv[0])):
            if tls and tls.get('switch') is not None:
                values.append((node, _dev_key(dev), tls.get('switch'), tls.get('raw')))
    counts = Counter(v[2] for v in values)
    if len(counts) <= 1:
        return []
    majority, majority_n = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[0]
    out = []
    for node, dev, switch, raw in values:
        if switch != majority:
            out.append(_finding(node, dev, 'tls_consistency',
                                'tls switch %s differs from the %s on %d other NPUs; make TLS identical on all nodes'
                                % (switch, majority, majority_n), raw))
    return out


def npu_network_report(node_results, all_hosts=None, label='', coverage=None):
    """Merge every node's results into one report.

    ``node_results`` maps node -> dict with optional keys: ``errors`` (why the node could not be queried:
    check, message, raw), ``findings`` (failed findings of hccn_facts: npu, check, message, raw),
    ``tls`` ({dev: {switch, raw}}), ``ping`` (hccn_ping failed_pairs and a count), ``npus`` (NPUs checked).
    ``all_hosts`` lists every host the play started with; missing ones are reported unreachable.
    ``coverage`` (:func:`ping_coverage`) adds the ping plan's coverage as the summary's second line.
    """
    node_results = dict(node_results or {})
    findings = []
    for host in all_hosts or []:
        if host not in node_results:
            findings.append(_finding(host, None, 'unreachable',
                                     'host did not answer (unreachable or failed before the checks)', None))
    npus_checked = 0
    pings = 0
    for node in sorted(node_results):
        res = node_results[node] or {}
        npus_checked += int(res.get('npus') or 0)
        for err in res.get('errors') or []:
            findings.append(_finding(node, None, err.get('check', 'tool'), err.get('message'), err.get('raw')))
        for f in res.get('findings') or []:
            findings.append(_finding(node, f.get('npu'), f.get('check'), f.get('message'), f.get('raw')))
        ping = res.get('ping') or {}
        pings += int(ping.get('count') or 0)
        for pair in ping.get('failed_pairs') or []:
            findings.append(_finding(node, pair.get('device'), 'ping',
                                     'ping to %s (%s): %s' % (pair.get('label') or '?', pair.get('address'),
                                                              pair.get('message')), pair.get('raw')))
    findings.extend(_tls_findings(node_results))
    findings.sort(key=lambda f: (str(f['node']), -1 if f['npu'] is None else int(f['npu']), str(f['check'])))

    nodes = sorted(set(list(node_results) + list(all_hosts or [])))
    head = 'NPU network verification%s: %d node(s), %d NPU(s), %d cross-node ping(s): %s' % (
        ' [%s]' % label if label else '', len(nodes), npus_checked, pings,
        'all checks passed' if not findings else '%d problem(s)' % len(findings))
    lines = [head]
    if coverage:
        lines.append('ping plan %s' % coverage_line(coverage))
    for f in findings:
        lines.append('%-10s %-6s %-16s %s%s' % (
            f['node'], '-' if f['npu'] is None else 'npu%s' % f['npu'], f['check'], f['message'],
            ' | raw: %s' % f['raw'] if f['raw'] else ''))
    return {
        'ok': not findings,
        'label': label,
        'nodes': nodes,
        'npus_checked': npus_checked,
        'pings': pings,
        'findings': findings,
        'coverage': coverage,
        'summary': lines,
    }
