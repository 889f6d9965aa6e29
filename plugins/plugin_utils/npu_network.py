# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Controller-side logic of the NPU network verification: who pings whom, and the cluster summary.

Pure functions of plain data (used by the filter and action plugins), unit-tested without a cluster.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from collections import Counter


STRATEGIES = ('same_index', 'full_mesh', 'none')


def _dev_key(dev):
    try:
        return int(dev)
    except (TypeError, ValueError):
        return dev


def hccn_ping_targets(ips_by_node, node, strategy='same_index'):
    """Targets for hccn_ping on ``node``.

    ``ips_by_node`` maps each node of the play to ``{device id: ip or None}`` (hccn_facts' ``ips``).
    same_index: NPU i pings NPU i of every other node; full_mesh: every local NPU pings every NPU of every
    other node; none: nothing. NPUs without an IP on either side are skipped (the ip check reports them).
    """
    if strategy not in STRATEGIES:
        raise ValueError('npu_network_ping_strategy must be one of %s, got %r' % (', '.join(STRATEGIES), strategy))
    if strategy == 'none':
        return []
    ips_by_node = ips_by_node or {}
    local = dict((_dev_key(d), ip) for d, ip in (ips_by_node.get(node) or {}).items())
    targets = []
    for other in sorted(ips_by_node):
        if other == node:
            continue
        remote = dict((_dev_key(d), ip) for d, ip in (ips_by_node.get(other) or {}).items())
        for dev in sorted(local, key=str):
            if not local[dev]:
                continue
            if strategy == 'same_index':
                pairs = [(dev, remote.get(dev))] if dev in remote else []
            else:
                pairs = [(rdev, remote[rdev]) for rdev in sorted(remote, key=str)]
            for rdev, rip in pairs:
                if rip:
                    targets.append({'device': dev, 'address': rip, 'label': '%s/npu%s' % (other, rdev)})
    return targets


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


def npu_network_report(node_results, all_hosts=None, label=''):
    """Merge every node's results into one report.

    ``node_results`` maps node -> dict with optional keys: ``errors`` (why the node could not be queried:
    check, message, raw), ``findings`` (failed findings of hccn_facts: npu, check, message, raw),
    ``tls`` ({dev: {switch, raw}}), ``ping`` (hccn_ping failed_pairs and a count), ``npus`` (NPUs checked).
    ``all_hosts`` lists every host the play started with; missing ones are reported unreachable.
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
        'summary': lines,
    }
