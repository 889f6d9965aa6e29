# -*- coding: utf-8 -*-
# Copyright (c) ascend.kvpool contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Container mode of the service modules (``mooncake_master``, ``vllm_server``), on the controller.

A module on the node cannot run another collection's module, so the action plugins of the two modules run, in
container mode, three steps on the node:

1. the module with ``container_step: render``: it checks the parameters, renders the service container's
   ``community.docker.docker_container`` arguments (image, mounts and devices of the node's vllm-ascend container,
   host network, restart policy, labels, environment);
2. ``community.docker.docker_container`` with those arguments, the secrets filled into ``env`` from the task's
   no_log options: it decides whether the container is created, recreated, updated or started, and its
   ``changed`` and diff are the task's; stops and removals the module asked for (``container_ops``: instances no
   longer listed, ``state: stopped``) are docker_container calls too;
3. the module with ``container_step: gate``: the health gate, and on a failed start the tail of ``docker logs``
   (and the stop of a container that did not become healthy). When it finds the container running but unhealthy
   long after its start, docker_container restarts it and the gate runs again.

``run`` is the flow, with the two ways of running a module passed in, so it is unit-tested without Ansible's
executor. Host mode (no ``container``) is one call of the module.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.module_utils.common.parameters import remove_values
from ansible.plugins.action import ActionBase

DOCKER_CONTAINER = 'community.docker.docker_container'
# What the module returns only for this flow; never part of the task's result.
INTERNAL = ('container_ops', 'container_definition', 'container_secret_env', 'container_restart')
# What the gate step knows better than the render step.
FROM_GATE = ('health', 'pid', 'wrapper_pid', 'state', 'ready_seconds', 'models', 'health_body', 'log_tail', 'failed',
             'msg', 'exception')


def public(result):
    """A module result without the flow's internal keys."""
    return dict((k, v) for k, v in (result or {}).items() if k not in INTERNAL)


def docker_args(definition, secret_names, secrets, task_args):
    """The docker_container arguments: the module's definition with the secrets' values in ``env``.

    ``secret_names``: the variables the module left out (it never returns a no_log value); ``secrets`` maps each
    to the task option that holds its value (``{'VLLM_API_KEY': 'api_key'}``). Returns (arguments, values), the
    values to mask in whatever docker_container returns.
    """
    args = dict(definition)
    env = dict(args.get('env') or {})
    values = []
    for name in secret_names or []:
        value = task_args.get(secrets.get(name, ''))
        if value not in (None, ''):
            env[name] = str(value)
            values.append(str(value))
    args['env'] = env
    return args, values


def _merge_messages(result, other):
    for key in ('warnings', 'deprecations'):
        if other.get(key):
            result[key] = list(result.get(key) or []) + list(other[key])


def _docker_failure(result, res, what):
    result.update(failed=True, msg='%s could not %s: %s' % (DOCKER_CONTAINER, what, res.get('msg') or res))
    return result


def run(run_module, run_docker, task_args, secrets=None, check_mode=False):
    """The three steps of a service in container mode; returns the task's result.

    ``run_module(args)`` runs the node-side module, ``run_docker(args, secret_values)`` docker_container (and
    masks ``secret_values`` in its answer); both return the module's result dict.
    """
    secrets = secrets or {}
    rendered = run_module(dict(task_args, container_step='render'))
    result = public(rendered)
    unit = rendered.get('unit')
    diffs = [rendered['diff']] if rendered.get('diff') and rendered.get('changed') else []
    pending_diff = rendered.get('diff')

    def finish():
        if diffs:
            result['diff'] = diffs[0] if len(diffs) == 1 else diffs
        else:
            result.pop('diff', None)
        return result

    def docker(args, values, what):
        res = run_docker(args, values)
        _merge_messages(result, res)
        if res.get('changed'):
            result['changed'] = True
            if res.get('diff'):  # with --diff docker_container returns one (empty) even when nothing differs
                diffs.append(res['diff'])
        if res.get('failed'):
            _docker_failure(result, res, what)
        return res

    # Stops and removals first (unlisted instances, state: stopped); they run after a failed render too, as the
    # module's own stops would have on the host.
    for op in rendered.get('container_ops') or []:
        verb = 'remove' if op.get('state') == 'absent' else 'stop'
        res = docker(op, [], '%s container %s' % (verb, op.get('name')))
        if res.get('failed'):
            return finish()
        if op.get('name') == unit and res.get('changed'):
            result.update(action='stopped', state='stopped', pid=None)
            if 'wrapper_pid' in result:  # mooncake_master's
                result['wrapper_pid'] = None
    if rendered.get('failed') or rendered.get('container_definition') is None:
        if result.get('action') == 'stopped' and pending_diff and pending_diff not in diffs:
            diffs.insert(0, pending_diff)
        return finish()

    definition = rendered['container_definition']
    args, values = docker_args(definition, rendered.get('container_secret_env'), secrets, task_args)
    created = docker(args, values, 'create or start container %s' % definition.get('name'))
    if created.get('failed'):
        return finish()
    predicted = rendered.get('action')
    if created.get('changed'):
        if pending_diff and pending_diff not in diffs:
            diffs.insert(0, pending_diff)
        if predicted not in ('started', 'restarted'):
            result['action'] = 'restarted' if rendered.get('state') == 'running' else 'started'
            result['reason'] = ('%s found the container different from its definition (see its diff)'
                                % DOCKER_CONTAINER)
        if check_mode:
            result['health'] = 'unknown'
            return finish()
        if not task_args.get('wait', True):
            state = ((created.get('container') or {}).get('State') or {})
            result.update(state='running', pid=state.get('Pid') or None, health='starting')
            return finish()
    elif predicted != 'none' and not rendered.get('changed'):
        result.update(action='none', reason='running with the same settings (%s changed nothing)' % DOCKER_CONTAINER)

    for attempt in (1, 2):
        gated = run_module(dict(task_args, container_step='gate'))
        _merge_messages(result, gated)
        result.update((k, gated[k]) for k in FROM_GATE if k in gated)
        for op in gated.get('container_ops') or []:  # the stop of a start that did not become healthy
            res = run_docker(op, [])
            _merge_messages(result, res)
            result['changed'] = result.get('changed') or bool(res.get('changed'))
            if res.get('failed'):  # the failed start stays the message
                result.setdefault('warnings', []).append('%s could not stop container %s: %s'
                                                         % (DOCKER_CONTAINER, op.get('name'), res.get('msg')))
        if gated.get('failed'):
            result['reason'] = gated.get('reason') or result.get('reason')
            break
        if not gated.get('container_restart'):
            break
        result.update(changed=True, action='restarted', reason=gated.get('reason'))
        if check_mode or attempt == 2:
            break
        restarted = docker(dict(args, restart=True), values, 'restart container %s' % definition.get('name'))
        if restarted.get('failed'):
            break
    return finish()


class ServiceAction(ActionBase):
    """The action plugin of a service module: ``MODULE``, and ``SECRETS`` (env name -> its no_log task option)."""

    MODULE = None
    SECRETS = {}
    _no_log_call = False

    def _update_module_args(self, module_name, module_args, task_vars, *args, **kwargs):
        super(ServiceAction, self)._update_module_args(module_name, module_args, task_vars, *args, **kwargs)
        if self._no_log_call:
            # docker_container's env is no no_log option: keep the node's syslog from recording the secret.
            module_args['_ansible_no_log'] = True

    def run(self, tmp=None, task_vars=None):
        result = super(ServiceAction, self).run(tmp, task_vars)
        del tmp
        args = dict(self._task.args)

        def run_module(module_args):
            return self._execute_module(module_name=self.MODULE, module_args=module_args, task_vars=task_vars)

        if not args.get('container'):
            result.update(run_module(args))
            return result

        def run_docker(module_args, values):
            self._no_log_call = bool(values)
            try:
                res = self._execute_module(module_name=DOCKER_CONTAINER, module_args=module_args,
                                           task_vars=task_vars)
            finally:
                self._no_log_call = False
            res.pop('invocation', None)
            return remove_values(res, set(values)) if values else res

        result.update(run(run_module, run_docker, args, self.SECRETS, check_mode=bool(self._task.check_mode)))
        return result
