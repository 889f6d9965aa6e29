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

``ContainerFlow`` is the flow, a state machine whose states carry the names of the node-side machines' (render,
stop, apply, gate, unhealthy); ``run`` runs it with the two ways of running a module passed in, so it is
unit-tested without Ansible's executor. Host mode (no ``container``) is one call of the module.
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
    to the task option that holds its value (``{'VLLM_API_KEY': 'api_key'}``); any other is a secret-named variable
    of the task's ``env`` (``HF_TOKEN``), taken from there. Returns (arguments, values), the
    values to mask in whatever docker_container returns.
    """
    args = dict(definition)
    env = dict(args.get('env') or {})
    values = []
    given = task_args.get('env') or {}
    for name in secret_names or []:
        # The module's own secret from its no_log option; a secret-named variable of the task's env from there.
        value = task_args.get(secrets[name]) if name in secrets else given.get(name)
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


DONE = 'done'


class ContainerFlow(object):
    """One service in container mode, as a state machine with the states of the node-side machines
    (``module_utils/_service.py``): ``render`` (the module's check and plan) -> ``stop`` (the removals it asked
    for) -> ``apply`` (docker_container) -> ``gate`` (the module's health gate) -> ``unhealthy`` (docker_container
    restarts the container, and the gate runs once more) -> ``done``. Each state is a method ``state_<name>``
    returning the next one; the task's result is built in ``result``."""

    def __init__(self, run_module, run_docker, task_args, secrets=None, check_mode=False):
        self.run_module, self.run_docker = run_module, run_docker
        self.task_args, self.secrets, self.check_mode = task_args, secrets or {}, check_mode
        self.result, self.diffs = {}, []
        self.rendered, self.args, self.values, self.restarts = None, None, None, 0

    def run(self):
        state = 'render'
        while state != DONE:
            state = getattr(self, 'state_' + state)()
        if self.diffs:
            self.result['diff'] = self.diffs[0] if len(self.diffs) == 1 else self.diffs
        else:
            self.result.pop('diff', None)
        return self.result

    def docker(self, args, values, what):
        """docker_container with ``args``: its change and diff become the task's, its failure the task's."""
        res = self.run_docker(args, values)
        _merge_messages(self.result, res)
        if res.get('changed'):
            self.result['changed'] = True
            if res.get('diff'):  # with --diff docker_container returns one (empty) even when nothing differs
                self.diffs.append(res['diff'])
        if res.get('failed'):
            _docker_failure(self.result, res, what)
        return res

    def keep_rendered_diff(self):
        """The module's diff of the definition, first, once docker_container has acted on it."""
        pending = self.rendered.get('diff')
        if pending and pending not in self.diffs:
            self.diffs.insert(0, pending)

    def state_render(self):
        """The module's step ``render``: its check, its plan, the container's definition."""
        self.rendered = self.run_module(dict(self.task_args, container_step='render'))
        self.result = public(self.rendered)
        if self.rendered.get('diff') and self.rendered.get('changed'):
            self.diffs.append(self.rendered['diff'])
        return 'stop'

    def state_stop(self):
        """Stops and removals first (unlisted instances, state: stopped); they run after a failed render too, as the
        module's own stops would have on the host."""
        rendered, result = self.rendered, self.result
        for op in rendered.get('container_ops') or []:
            verb = 'remove' if op.get('state') == 'absent' else 'stop'
            res = self.docker(op, [], '%s container %s' % (verb, op.get('name')))
            if res.get('failed'):
                return DONE
            if op.get('name') == rendered.get('unit') and res.get('changed'):
                result.update(action='stopped', state='stopped', pid=None)
                if 'wrapper_pid' in result:  # mooncake_master's
                    result['wrapper_pid'] = None
        if rendered.get('failed') or rendered.get('container_definition') is None:
            if result.get('action') == 'stopped':
                self.keep_rendered_diff()
            return DONE
        return 'apply'

    def state_apply(self):
        """docker_container creates, recreates or starts the container; ``gate`` unless check mode or no wait."""
        rendered, result = self.rendered, self.result
        definition = rendered['container_definition']
        self.args, self.values = docker_args(definition, rendered.get('container_secret_env'), self.secrets,
                                             self.task_args)
        created = self.docker(self.args, self.values, 'create or start container %s' % definition.get('name'))
        if created.get('failed'):
            return DONE
        predicted = rendered.get('action')
        if created.get('changed'):
            self.keep_rendered_diff()
            if predicted not in ('started', 'restarted'):
                result['action'] = 'restarted' if rendered.get('state') == 'running' else 'started'
                result['reason'] = ('%s found the container different from its definition (see its diff)'
                                    % DOCKER_CONTAINER)
            if self.check_mode:
                result['health'] = 'unknown'
                return DONE
            if not self.task_args.get('wait', True):
                state = ((created.get('container') or {}).get('State') or {})
                result.update(state='running', pid=state.get('Pid') or None, health='starting')
                return DONE
        elif predicted != 'none' and not rendered.get('changed'):
            result.update(action='none',
                          reason='running with the same settings (%s changed nothing)' % DOCKER_CONTAINER)
        return 'gate'

    def state_gate(self):
        """The module's step ``gate``: the health gate, the stop of a start that did not become healthy."""
        result = self.result
        gated = self.run_module(dict(self.task_args, container_step='gate'))
        _merge_messages(result, gated)
        result.update((k, gated[k]) for k in FROM_GATE if k in gated)
        for op in gated.get('container_ops') or []:  # the stop of a start that did not become healthy
            res = self.run_docker(op, [])
            _merge_messages(result, res)
            result['changed'] = result.get('changed') or bool(res.get('changed'))
            if res.get('failed'):  # the failed start stays the message
                result.setdefault('warnings', []).append('%s could not stop container %s: %s'
                                                         % (DOCKER_CONTAINER, op.get('name'), res.get('msg')))
        if gated.get('failed'):
            result['reason'] = gated.get('reason') or result.get('reason')
            return DONE
        if not gated.get('container_restart'):
            return DONE
        result.update(changed=True, action='restarted', reason=gated.get('reason'))
        return 'unhealthy'

    def state_unhealthy(self):
        """Running but unhealthy long after its start: docker_container restarts it, once, and the gate runs again."""
        self.restarts += 1
        if self.check_mode or self.restarts > 1:
            return DONE
        name = self.rendered['container_definition'].get('name')
        restarted = self.docker(dict(self.args, restart=True), self.values, 'restart container %s' % name)
        return DONE if restarted.get('failed') else 'gate'


def run(run_module, run_docker, task_args, secrets=None, check_mode=False):
    """The steps of a service in container mode (``ContainerFlow``); returns the task's result.

    ``run_module(args)`` runs the node-side module, ``run_docker(args, secret_values)`` docker_container (and
    masks ``secret_values`` in its answer); both return the module's result dict.
    """
    return ContainerFlow(run_module, run_docker, task_args, secrets, check_mode).run()


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
