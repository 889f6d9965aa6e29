# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Controller-side logic of the vLLM instances: the per-host plan and the cluster summary.

Thin wrappers over the pure functions of ``module_utils/_vllm.py``; the plan's warnings (settings the declared
vllm-ascend version ignores) are also shown as Ansible warnings.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError
from ansible.utils.display import Display

from ansible_collections.ascend.kvpool.plugins.module_utils import _vllm

display = Display()


def vllm_instance_plan(instances, settings, host='this host', warn=True):
    """Plan of ``instances`` (the role's ``vllm_instance_instances``) with the role-level ``settings``.

    Returns a dict: ``instances`` (each with its rendered kv_transfer_config, env, argv inputs), ``devices``,
    ``ports``, ``total_tp``, ``warnings``, ``errors``, ``version``, ``profile``.
    """
    if not isinstance(settings, dict):
        raise AnsibleFilterError('vllm_instance_plan: settings must be a dict, got %s' % type(settings).__name__)
    plan = _vllm.plan_instances(instances, settings, str(host))
    if warn:
        for message in plan['warnings']:
            display.warning(message)
    return plan


def _by_name(results):
    out = {}
    for res in results or []:
        if not isinstance(res, dict) or res.get('skipped'):
            continue
        item = res.get('item') or {}
        if isinstance(item, dict) and item.get('name'):
            out[item['name']] = res
    return out


def _first_line(text):
    return (text or '').strip().split('\n')[0]


def vllm_instance_status(plan, launch_results=None, wait_results=None, wanted='started'):
    """Status of every planned instance of one host from the launch and wait results of vllm_server.

    Each status: ``name``, ``port``, ``endpoint``, ``health`` (healthy, starting, unknown, stopped, failed),
    ``ready_seconds``, ``devices_text``, ``served_model_name``, ``wanted`` (started or stopped), ``action``
    (what the run did), ``failed``, ``message`` (first line of the error) and ``error`` (the whole message, with
    the log tail).
    """
    launched = _by_name(launch_results)
    waited = _by_name(wait_results)
    out = []
    for inst in (plan or {}).get('instances') or []:
        name = inst.get('name')
        want = 'stopped' if wanted == 'stopped' or inst.get('state') == 'stopped' else 'started'
        host = _vllm.probe_host(inst.get('host'))
        st = {
            'name': name, 'port': inst.get('port'), 'devices_text': inst.get('devices_text'),
            'served_model_name': inst.get('served_model_name') or inst.get('model'), 'wanted': want,
            'endpoint': 'http://%s' % _vllm.format_host_port(host, inst.get('port')) if inst.get('port') else None,
            'health': 'unknown', 'ready_seconds': None, 'action': 'none', 'failed': False, 'message': '',
            'error': '',
        }
        first = launched.get(name)
        second = waited.get(name)
        for res in (first, second):
            if not res:
                continue
            if res.get('action') and res.get('action') != 'none':
                st['action'] = res['action']
            if res.get('endpoint'):
                st['endpoint'] = res['endpoint']
            if res.get('health'):
                st['health'] = res['health']
            if res.get('ready_seconds') is not None:
                st['ready_seconds'] = res['ready_seconds']
            if res.get('failed'):
                st.update(failed=True, health='failed', message=_first_line(res.get('msg')),
                          error=res.get('msg') or '')
                break
        if want == 'stopped' and not st['failed']:
            st['health'] = 'stopped'
        out.append(st)
    return out


def vllm_instance_summary(status_by_host, hosts=None, label=''):
    """One summary of every instance of the play: endpoint, health, NPUs, and what went wrong.

    ``status_by_host`` maps a host to its list of instance statuses (``name``, ``endpoint``, ``health``,
    ``ready_seconds``, ``devices_text``, ``served_model_name``, ``action``, ``message``).
    Returns ``{'ok': bool, 'instances': n, 'healthy': n, 'lines': [...]}``.
    """
    hosts = list(hosts) if hosts else sorted(status_by_host or {})
    rows = []
    missing = []
    for host in hosts:
        if host not in (status_by_host or {}) or (status_by_host or {}).get(host) is None:
            missing.append(host)
            continue
        for st in (status_by_host or {}).get(host) or []:
            rows.append((host, st))
    healthy = [r for r in rows if r[1].get('health') == 'healthy']
    stopped = [r for r in rows if r[1].get('health') == 'stopped' and r[1].get('wanted') == 'stopped']
    problems = [r for r in rows if r not in healthy and r not in stopped
                and r[1].get('health') not in ('unknown', 'starting')]
    head = 'vLLM instances%s: %d instance(s) on %d node(s): %d healthy' % (
        (' [%s]' % label) if label else '', len(rows), len(set(h for h, _s in rows)), len(healthy))
    if stopped:
        head += ', %d stopped as wanted' % len(stopped)
    if problems or missing:
        head += ', %d problem(s)' % (len(problems) + len(missing))
    lines = [head]
    width = max([len(h) for h, _s in rows] + [4])
    name_width = max([len(str(s.get('name'))) for _h, s in rows] + [4])
    for host, st in rows:
        ready = st.get('ready_seconds')
        detail = []
        if st.get('served_model_name'):
            detail.append('serves %s' % st['served_model_name'])
        if st.get('devices_text'):
            detail.append('NPUs %s' % st['devices_text'])
        if ready is not None and st.get('health') == 'healthy' and st.get('action') in ('started', 'restarted'):
            detail.append('ready in %.1f s' % float(ready))
        if st.get('action') and st.get('action') != 'none':
            detail.append(st['action'])
        if st.get('message'):
            detail.append(st['message'])
        lines.append('%-*s  %-*s  %-28s  %-9s  %s' % (width, host, name_width, st.get('name'),
                                                      st.get('endpoint') or '-', st.get('health') or '?',
                                                      ', '.join(detail)))
    for host in missing:
        lines.append('%s  no status: the host failed or was unreachable before its instances were handled' % host)
    return {'ok': not problems and not missing, 'instances': len(rows), 'healthy': len(healthy), 'lines': lines,
            'problems': [dict(st, node=h) for h, st in problems], 'missing_hosts': missing}


class FilterModule(object):
    """ascend.kvpool vLLM instance filters."""

    def filters(self):
        return {
            'vllm_instance_plan': vllm_instance_plan,
            'vllm_instance_status': vllm_instance_status,
            'vllm_instance_summary': vllm_instance_summary,
        }
