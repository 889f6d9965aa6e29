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
import functools
import random
import re
from collections import Counter


STRATEGIES = ('same_index', 'ring', 'sampled', 'full_mesh', 'none')
# Strategies whose pings grow linearly with the number of nodes (one or k per port).
LINEAR = ('ring', 'sampled')
SAMPLED_K_DEFAULT = 2
# The single-node checks of a port's own RoCE link (hccn_facts): one that failed on a port whose pings failed is
# joined to its suspect line, and tells which end of a failed link is bad.
LINK_CHECKS = ('link', 'net_health', 'ip', 'netdetect', 'gateway', 'lldp', 'optical', 'link_stat')
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


def ping_coverage(ips_by_node, strategy='same_index', k=SAMPLED_K_DEFAULT, seed=0, round_=0, plan=None):
    """What a plan covers, for the summary: pings, distinct cross-node NPU pairs pinged (unordered) of all
    cross-node pairs of NPUs with an IP, ports with an IP, those pinged at least once (sending or answering),
    the ones never pinged (``node/npuN``), and for sampled the rounds after which every same-index pair was
    pinged. ``plan``: the :func:`ping_plan` of these arguments when the caller has it already (it is not
    made again)."""
    if plan is None:
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


def _port(node, npu):
    return '%s/npu%s' % (node, npu)


def _split_port(port):
    """``node37/npu3`` -> ``('node37', 3)``; a text that names no port -> ``(text, None)``."""
    node, sep, npu = str(port).rpartition('/npu')
    return (node, _dev_key(npu)) if sep and node else (str(port), None)


@functools.lru_cache(maxsize=65536)
def _port_key(port):
    node, npu = _split_port(port)
    return (_node_key(node), (2, 0, '') if npu is None else _dev_sort(npu))


def _count(value):
    try:
        return int(value)
    except (TypeError, ValueError):
        return -1


def _plural(n, word):
    return '%d %s%s' % (n, word, '' if n == 1 else 's')


class _Ping:
    """One failed ping of the report: sender port, target port, its finding, and whether the sender's pings are
    known (:func:`_failed_pings`)."""
    __slots__ = ('src', 'dst', 'finding', 'known')

    def __init__(self, src, dst, finding, known):
        self.src, self.dst, self.finding, self.known = src, dst, finding, known


def _failed_pings(node_results, plan):
    """Every failed ping of the nodes' hccn_ping results as (:class:`_Ping` list, the senders whose pings are
    known). A sender's pings are known when it ran the plan's pings: hccn_ping answered (``failed_pairs``), with as
    many pings as the plan gives the node, and every failed one is one of the plan's; then its planned pings that
    did not fail passed. Without a plan nothing is known (the failed pings are listed one by one)."""
    pings = []
    known = set()
    plan = plan or {}
    for node in sorted(node_results, key=_node_key):
        ping = (node_results[node] or {}).get('ping') or {}
        pairs = ping.get('failed_pairs') or []
        targets = plan.get(node)
        index = {}
        if targets is not None and ping.get('failed_pairs') is not None and _count(ping.get('count')) == len(targets):
            if pairs:
                index = dict(((t['device'], t['address']), t['label']) for t in targets)
            if all((_dev_key(p.get('device')), p.get('address')) in index for p in pairs):
                known.add(node)
        for pair in pairs:
            dev = _dev_key(pair.get('device'))
            src = _port(node, dev)
            dst = index.get((dev, pair.get('address'))) or pair.get('label') or '?'
            message = 'ping %s -> %s (%s): %s' % (src, dst, pair.get('address'), pair.get('message'))
            finding = _finding(node, dev, 'ping', message, pair.get('raw'))
            finding['peer'] = dst
            pings.append(_Ping(src, dst, finding, node in known))
    return pings, known


def _through(plan, known):
    """The pings whose outcome is known through each port (sent or answered)."""
    through = Counter()
    for node in known:
        targets = plan[node]
        for dev, n in Counter(t['device'] for t in targets).items():
            through[_port(node, dev)] += n
        through.update(t['label'] for t in targets)
    return through


def _between(plan, known, pairs):
    """Known pings between the two ports of each of ``pairs`` (either direction)."""
    wanted = set(pairs)
    nodes = set(_split_port(p)[0] for pair in pairs for p in pair) & set(known)
    out = Counter()
    for node in nodes:
        for t in plan[node]:
            src = _port(node, t['device'])
            for pair in ((src, t['label']), (t['label'], src)):
                if pair in wanted:
                    out[pair] += 1
    return out


def _checks_text(findings, ports=None, named=False):
    """The port's own failed checks, joined to its suspect line; with ``ports`` (a node's line) each distinct
    check and message once, with the NPUs that have it; ``named`` (a line of several ports) with the port."""
    groups = []
    seen = {}
    for f in findings:
        key = (f['check'], f['message']) + ((f['node'], f['npu']) if named else ())
        if key not in seen:
            seen[key] = len(groups)
            groups.append([f, []])
        groups[seen[key]][1].append(f['npu'])
    parts = []
    for f, npus in groups:
        where = ''
        if ports is not None:
            where = ' on every port' if len(npus) == ports else ' on %s' % ', '.join(
                'npu%s' % n for n in sorted(set(npus), key=lambda n: _dev_sort(_dev_key(n))))
        if named:
            where = ' on %s' % _port(f['node'], f['npu'])
        parts.append('%s%s: %s%s' % (f['check'], where, f['message'], ' (raw: %s)' % f['raw'] if f['raw'] else ''))
    return '; also failed here: %s' % '; '.join(parts) if parts else ''


def _example(pings, sender=None):
    """One of the failed pings a line explains, with the tool's line: the first one ``sender`` sent, if any."""
    first = min(pings, key=lambda p: (p.src != sender, _port_key(p.src), _port_key(p.dst)))
    raw = first.finding['raw']
    return ' | e.g. %s%s' % (first.finding['message'], ' | raw: %s' % raw
                             if raw and not first.finding['message'].endswith(': ' + raw) else '')


def _localize_pings(pings, known, plan, port_findings=None):
    """Which ports and links the failed pings point at.

    ``pings``: :class:`_Ping` of every failed ping; ``known``: the senders whose pings are known
    (:func:`_failed_pings`); ``plan``: the :func:`ping_plan` of the run; ``port_findings``: ``{port: [finding]}``
    of the failed checks of each port's own link (:data:`LINK_CHECKS`, from hccn_facts).

    - a **suspect port** is an end of failed pings every known ping through which (sent or answered) failed,
      while a peer of it has another ping that passed, or whose own checks failed too;
    - ports whose every ping failed and whose peers too have no ping that passed cannot be told apart
      (**undecided**: the link between them or either port; e.g. the two ports of one index on 2 nodes);
    - a failed ping whose both ends have other pings that passed is a **bad link**; a port that is an end of such
      links to 2 or more peers, or whose own checks failed (and the other end's did not), is a suspect port
      (``partial``: some of its pings passed) rather than as many links.

    Returns ``{'suspects', 'links', 'lines', 'folded', 'nodes', 'grouped'}``: the report's entries, the summary
    lines (suspect nodes and ports first, then undecided groups, then links), ``{id(finding): what explains it}``
    of the findings those lines fold in (the report gives each ``explained_by``: the suspect's port or the link's
    ``a <-> b``), the number of node lines and of the ports they group."""
    port_findings = port_findings or {}
    through = _through(plan or {}, known)
    edges = [p for p in pings if p.known]
    failed = Counter()
    failed_from = Counter()
    peers = {}
    for e in edges:
        failed[e.src] += 1
        failed[e.dst] += 1
        failed_from[e.src] += 1
        peers.setdefault(e.src, set()).add(e.dst)
        peers.setdefault(e.dst, set()).add(e.src)
    dead = set(p for p in failed if failed[p] >= through[p])
    suspects = set(p for p in dead if p in port_findings or any(q not in dead for q in peers[p]))
    undecided_ports = dead - suspects

    owner = {}  # id(_Ping) -> ('port', port) | ('undecided', root) | ('link', (a, b)) | ('partial', port)
    parent = dict((p, p) for p in undecided_ports)

    def root(p):
        while parent[p] != p:
            parent[p] = parent[parent[p]]
            p = parent[p]
        return p

    candidates = {}
    for e in edges:
        if e.src in suspects or e.dst in suspects:
            owner[id(e)] = ('port', e.src if e.src in suspects else e.dst)
        elif e.src in undecided_ports and e.dst in undecided_ports:
            a, b = root(e.src), root(e.dst)
            if a != b:
                parent[max(a, b, key=_port_key)] = min(a, b, key=_port_key)
        else:
            pair = tuple(sorted((e.src, e.dst), key=_port_key))
            candidates.setdefault(pair, []).append(e)
    for e in edges:
        if id(e) not in owner and e.src in undecided_ports:
            owner[id(e)] = ('undecided', root(e.src))

    # Links with one end whose own checks failed: that end is the suspect. Then links that share an end with 2 or
    # more peers: that end (greedy, most peers first).
    link_peers = {}
    for a, b in candidates:
        link_peers.setdefault(a, set()).add(b)
        link_peers.setdefault(b, set()).add(a)
    flagged = sorted((p for p in link_peers if p in port_findings
                      and any(q not in port_findings for q in link_peers[p])), key=_port_key)
    partial = []
    while True:
        best = [p for p in flagged if p in link_peers] or [p for p in link_peers if len(link_peers[p]) >= 2]
        if not best:
            break
        port = min(best, key=lambda p: (p not in port_findings, -len(link_peers[p]), _port_key(p)))
        partial.append(port)
        for q in link_peers.pop(port):
            link_peers[q].discard(port)
            if not link_peers[q]:
                del link_peers[q]
            pair = tuple(sorted((port, q), key=_port_key))
            for e in candidates.pop(pair):
                owner[id(e)] = ('partial', port)
    links = sorted(candidates, key=lambda pair: (_port_key(pair[0]), _port_key(pair[1])))
    for pair in links:
        for e in candidates[pair]:
            owner[id(e)] = ('link', pair)
    between = _between(plan or {}, known, links)

    explained = {}
    for e in edges:
        explained.setdefault(owner[id(e)], []).append(e)
    entries = []
    lines = []
    folded = {}

    def fold(findings, by):
        for f in findings:
            folded[id(f)] = by

    # Suspect ports whose every ping failed; a node whose every pinged port is one gets one line.
    by_node = {}
    for p in suspects:
        by_node.setdefault(_split_port(p)[0], []).append(p)
    node_ports = {}
    for p in through:
        node_ports.setdefault(_split_port(p)[0], set()).add(p)
    grouped = set()
    node_lines = []
    for node in sorted(by_node, key=_node_key):
        ports = sorted(by_node[node], key=_port_key)
        if len(ports) >= 2 and set(ports) == node_ports.get(node):
            grouped.update(ports)
            outside = set(q for p in ports for q in peers[p]) - set(ports)
            passed = [q for q in outside if q not in dead]
            own = [f for p in ports for f in port_findings.get(p, [])]
            pings = [e for p in ports for e in explained.get(('port', p), [])]
            n_failed = sum(failed[p] for p in ports)  # two ports of one node never ping each other
            n_from = sum(failed_from[p] for p in ports)
            node_lines.append('suspect node %s: all %d pinged ports, %d of %d pings through them failed '
                              '(%d from them, %d to them); %s%s%s' % (
                                  node, len(ports), n_failed, sum(through[p] for p in ports), n_from,
                                  n_failed - n_from,
                                  'their peers\' other pings passed' if len(passed) == len(outside)
                                  else '%d of their %d peers\' other pings passed' % (len(passed), len(outside)),
                                  _checks_text(own, len(ports)), _example(pings, ports[0]) if pings else ''))
    lines.extend(node_lines)
    for kind, group in (('port', sorted(suspects, key=_port_key)), ('partial', sorted(partial, key=_port_key))):
        for p in group:
            node, npu = _split_port(p)
            own = port_findings.get(p, [])
            pings = explained.get((kind, p), [])
            confirmed = sorted((q for q in peers[p] if q not in dead), key=_port_key)
            unconfirmed = sorted((q for q in peers[p] if q in undecided_ports), key=_port_key)
            others = sorted((q for q in peers[p] if q in suspects), key=_port_key)
            entries.append({'kind': kind, 'port': p, 'node': node, 'npu': npu, 'failed': failed[p],
                            'through': through[p], 'failed_from': failed_from[p],
                            'failed_to': failed[p] - failed_from[p], 'peers': len(peers[p]),
                            'checks': [f['check'] for f in own], 'unconfirmed_peers': unconfirmed})
            fold([e.finding for e in pings] + list(own), p)
            if p in grouped:
                continue
            n_peers = len(peers[p])
            if len(confirmed) == n_peers:
                why = 'its peer\'s other pings passed' if n_peers == 1 else \
                    'its %d peers\' other pings passed' % n_peers
            else:
                parts = ['%d of its %d peers\' other pings passed' % (len(confirmed), n_peers)] if confirmed else []
                if others:
                    parts.append('%s: suspect too' % _names(others))
                if unconfirmed:
                    parts.append('%s: no other ping to tell' % _names(unconfirmed))
                why = '; '.join(parts)
            if kind == 'partial':
                why = 'the rest passed; %s%s' % (why, '' if own else ': a lossy port, or its links')
            lines.append('suspect port %s: %d of %d pings through it failed (%d from it, %d to it); %s%s%s' % (
                p, failed[p], through[p], failed_from[p], failed[p] - failed_from[p], why, _checks_text(own),
                _example(pings, p) if pings else ''))
    # Undecided groups: every ping of these ports failed and none of them has one that passed.
    groups = {}
    for p in undecided_ports:
        groups.setdefault(root(p), []).append(p)
    for key in sorted(groups, key=_port_key):
        pings = explained.get(('undecided', key), [])
        if not pings:
            continue  # its pings all went to suspect ports: named there (no other ping to tell)
        ports = sorted(groups[key], key=_port_key)
        own = [f for p in ports for f in port_findings.get(p, [])]
        name = ' <-> '.join(ports) if len(ports) <= 4 else '%s <-> ... (%d ports)' % (ports[0], len(ports))
        entries.append({'kind': 'undecided', 'name': name, 'ports': ports, 'failed': len(pings),
                        'through': len(pings), 'checks': [f['check'] for f in own]})
        fold([e.finding for e in pings] + own, name)
        if len(ports) == 2:
            text = '%d of %d pings between them failed and neither port has another ping that passed: the link or ' \
                   'either port' % (len(pings), len(pings))
        else:
            text = '%d pings among them failed and none has another ping that passed: their links or any of them' \
                % len(pings)
        lines.append('undecided %s: %s%s%s' % (name, text, _checks_text(own, named=True), _example(pings)))
    for pair in links:
        pings = candidates[pair]
        own = [f for p in pair for f in port_findings.get(p, [])]
        name = ' <-> '.join(pair)
        entries.append({'kind': 'link', 'name': name, 'ports': list(pair), 'failed': len(pings),
                        'through': max(between[pair], len(pings)), 'checks': [f['check'] for f in own]})
        fold([e.finding for e in pings] + own, name)
        lines.append('suspect link %s: %d of %d pings between them failed; both ports\' other pings passed%s%s' % (
            name, len(pings), max(between[pair], len(pings)), _checks_text(own, named=True), _example(pings)))
    return {'suspects': [e for e in entries if e['kind'] in ('port', 'partial')],
            'links': [e for e in entries if e['kind'] in ('link', 'undecided')],
            'lines': lines, 'folded': folded, 'nodes': len(node_lines), 'grouped': len(grouped)}


def _names(ports):
    return ', '.join(ports[:4]) + (', ...' if len(ports) > 4 else '')


def npu_network_report(node_results, all_hosts=None, label='', coverage=None, plan=None):
    """Merge every node's results into one report.

    ``node_results`` maps node -> dict with optional keys: ``errors`` (why the node could not be queried:
    check, message, raw), ``findings`` (failed findings of hccn_facts: npu, check, message, raw),
    ``tls`` ({dev: {switch, raw}}), ``ping`` (hccn_ping failed_pairs and a count), ``npus`` (NPUs checked).
    ``all_hosts`` lists every host the play started with; missing ones are reported unreachable.
    ``coverage`` (:func:`ping_coverage`) adds the ping plan's coverage as the summary's second line.
    ``plan`` (the run's :func:`ping_plan`) tells which pings passed, so the failed ones are localized
    (:func:`_localize_pings`): the summary names the suspect ports and links first, each with the failed pings and
    the port's own failed checks it explains, then the rest; the findings keep every failed ping, with both ends.
    """
    node_results = dict(node_results or {})
    findings = []
    for host in all_hosts or []:
        if host not in node_results:
            findings.append(_finding(host, None, 'unreachable',
                                     'host did not answer (unreachable or failed before the checks)', None))
    npus_checked = 0
    pings = 0
    port_findings = {}
    for node in sorted(node_results):
        res = node_results[node] or {}
        npus_checked += int(res.get('npus') or 0)
        for err in res.get('errors') or []:
            findings.append(_finding(node, None, err.get('check', 'tool'), err.get('message'), err.get('raw')))
        for f in res.get('findings') or []:
            finding = _finding(node, f.get('npu'), f.get('check'), f.get('message'), f.get('raw'))
            findings.append(finding)
            if f.get('npu') is not None and f.get('check') in LINK_CHECKS:
                port_findings.setdefault(_port(node, _dev_key(f.get('npu'))), []).append(finding)
        pings += int(((res.get('ping') or {}).get('count')) or 0)
    failed_pings, known = _failed_pings(node_results, plan)
    findings.extend(p.finding for p in failed_pings)
    findings.extend(_tls_findings(node_results))
    findings.sort(key=lambda f: (str(f['node']), -1 if f['npu'] is None else int(f['npu']), str(f['check'])))

    local = {'suspects': [], 'links': [], 'lines': [], 'folded': {}, 'nodes': 0, 'grouped': 0}
    if any(p.known for p in failed_pings):
        local = _localize_pings(failed_pings, known, plan, port_findings)
    for f in findings:
        if local['folded'].get(id(f)):
            f['explained_by'] = local['folded'][id(f)]
    rest = [f for f in findings if id(f) not in local['folded']]

    nodes = sorted(set(list(node_results) + list(all_hosts or [])))
    verdict = 'all checks passed' if not findings else '%d problem(s)' % len(findings)
    named = []
    n_ports = len(local['suspects']) - local['grouped']
    if local['nodes']:
        named.append(_plural(local['nodes'], 'suspect node'))
    if n_ports:
        named.append(_plural(n_ports, 'suspect port'))
    n_links = sum(1 for s in local['links'] if s['kind'] == 'link')
    if n_links:
        named.append(_plural(n_links, 'suspect link'))
    if len(local['links']) > n_links:
        named.append('%d undecided' % (len(local['links']) - n_links))
    if named and rest:
        named.append('%d other' % len(rest))
    if named:
        verdict += ': %s' % ', '.join(named)
    head = 'NPU network verification%s: %d node(s), %d NPU(s), %d cross-node ping(s): %s' % (
        ' [%s]' % label if label else '', len(nodes), npus_checked, pings, verdict)
    lines = [head]
    if coverage:
        lines.append('ping plan %s' % coverage_line(coverage))
    lines.extend(local['lines'])
    for f in rest:
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
        'suspects': local['suspects'],
        'links': local['links'],
        'coverage': coverage,
        'summary': lines,
    }
