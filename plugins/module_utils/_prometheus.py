# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The one reader of the Prometheus text exposition format in the collection (standard library only, Python 3.8+).

Every ``/metrics`` the collection reads goes through ``parse`` (or ``samples``): vLLM's and the Mooncake master's
(``kvpool_benchmark``, through ``_loadgen``) and vllm-router's (``vllm_router_check``, through ``_router``).

The format (https://prometheus.io/docs/instrumenting/exposition_formats/, text format 0.0.4), as read here:

- a line is a comment when its first non-blank character is ``#`` (``# HELP``, ``# TYPE`` and any other comment),
  and blank lines are skipped;
- a sample is ``metric_name [ "{" label_name "=" '"' label_value '"' { "," ... } [ "," ] "}" ] value [ timestamp ]``;
  a label value may hold any character, with ``\\\\``, ``\\"`` and ``\\n`` escaped (so a ``,``, a ``}`` or a
  space inside the quotes is part of the value);
- ``value`` is a float as Go's ``ParseFloat`` reads it, ``NaN``, ``+Inf`` and ``-Inf`` included;
- ``timestamp`` (optional) is an integer of milliseconds since the epoch: it is never the value.

A line that does not follow that (a label without quotes, a label name twice, a value that is no number, text after
the timestamp) is skipped, so a reader gets every well-formed sample of a partly broken answer and no exception.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

_NAME = re.compile(r'[a-zA-Z_:][a-zA-Z0-9_:]*')
_LABEL = re.compile(r'[ \t]*([a-zA-Z_][a-zA-Z0-9_]*)[ \t]*=[ \t]*"((?:[^"\\]|\\.)*)"[ \t]*', re.S)
_ESCAPE = re.compile(r'\\(.)', re.S)
_TIMESTAMP = re.compile(r'^[+-]?[0-9]+$')
# What Go's ParseFloat reads besides plain decimals (Python's float() reads them too, and also "1_0", which Go
# does not).
_NUMBER = re.compile(r'^[+-]?(?:[0-9]+\.?[0-9]*(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?|inf|infinity|nan)$',
                     re.I)


def number(text):
    """The float of a sample value or an ``le`` bound (``NaN``, ``+Inf``, ``-Inf`` included); ValueError
    otherwise."""
    text = str(text).strip()
    if not _NUMBER.match(text):
        raise ValueError('not a Prometheus number: %r' % text)
    return float(text)


def _unescape(value):
    """Label value escapes (``\\\\``, ``\\"``, ``\\n``) undone in one pass, so an escaped backslash followed by
    ``n`` stays a backslash and an ``n``."""
    return _ESCAPE.sub(lambda m: '\n' if m.group(1) == 'n' else m.group(1), value)


def _labels_at(line, pos):
    """(labels, position after the closing brace) of the label set opening at ``line[pos] == '{'``, or None when it
    is malformed."""
    labels = {}
    pos += 1
    while True:
        while pos < len(line) and line[pos] in ' \t':
            pos += 1
        if pos < len(line) and line[pos] == '}':
            return labels, pos + 1
        match = _LABEL.match(line, pos)
        if not match or match.group(1) in labels:
            return None
        labels[match.group(1)] = _unescape(match.group(2))
        pos = match.end()
        if pos < len(line) and line[pos] == ',':
            pos += 1
        elif not (pos < len(line) and line[pos] == '}'):
            return None


def parse_line(line):
    """``(name, labels, value, timestamp)`` of one sample line (timestamp None when absent), or None for a comment,
    a blank line or a malformed one."""
    line = (line or '').strip()
    if not line or line.startswith('#'):
        return None
    match = _NAME.match(line)
    if not match:
        return None
    name, pos, labels = match.group(0), match.end(), {}
    brace = pos
    while brace < len(line) and line[brace] in ' \t':
        brace += 1  # blanks may stand between the name and its labels
    if brace < len(line) and line[brace] == '{':
        found = _labels_at(line, brace)
        if found is None:
            return None
        labels, pos = found
    rest = line[pos:]
    if not rest[:1].isspace():
        return None  # "name-x 1", "name{a=\"1\"}1": no blank before the value
    words = rest.split()
    if len(words) not in (1, 2) or (len(words) == 2 and not _TIMESTAMP.match(words[1])):
        return None
    try:
        value = number(words[0])
    except ValueError:
        return None
    return name, labels, value, int(words[1]) if len(words) == 2 else None


def samples(text, prefixes=None):
    """Every well-formed sample of ``text`` as ``(name, labels, value, timestamp)``, in order; ``prefixes`` keeps
    only the metric names starting with one of them."""
    # Lines end at \n only: str.splitlines() would also split inside a label value holding \x85 or \u2028.
    for raw in (text or '').split('\n'):
        sample = parse_line(raw)
        if sample is not None and (not prefixes or any(sample[0].startswith(p) for p in prefixes)):
            yield sample


def parse(text, prefixes=None):
    """Prometheus text -> ``{series key: float}`` (``series_key``: the name and its sorted labels); comments and
    malformed lines are skipped, a timestamp is dropped. ``prefixes`` keeps only the metric names starting with
    one of them."""
    return dict((series_key(name, labels), value) for name, labels, value, _ts in samples(text, prefixes))


def parse_labels(text):
    """``{a="x",b="y"}`` -> dict (escaped quotes, backslashes and newlines handled); {} when malformed."""
    inner = (text or '').strip()
    if not inner.startswith('{'):
        return {}
    found = _labels_at(inner, 0)
    return found[0] if found else {}


def _escape(value):
    return str(value).replace('\\', '\\\\').replace('"', '\\"').replace('\n', '\\n')


def series_key(name, labels):
    """Canonical series name: ``name{a="x",b="y"}`` with sorted labels (just ``name`` without labels)."""
    if not labels:
        return name
    return '%s{%s}' % (name, ','.join('%s="%s"' % (k, _escape(labels[k])) for k in sorted(labels)))


def split_series(key):
    """Inverse of ``series_key``: ``(name, labels)``."""
    brace = key.find('{')
    if brace < 0:
        return key, {}
    return key[:brace], parse_labels(key[brace:])


def metric_sum(parsed, name, **labels):
    """Sum of the series of ``parsed`` (``parse``'s dict) named ``name`` whose labels include ``labels``; None
    when there is no such series."""
    total = None
    for key, value in (parsed or {}).items():
        sname, slabels = split_series(key)
        if sname != name:
            continue
        if any(slabels.get(k) != str(v) for k, v in labels.items()):
            continue
        total = (total or 0.0) + value
    return total
