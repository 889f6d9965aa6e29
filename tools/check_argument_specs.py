"""Keep every role's defaults/main.yml and meta/argument_specs.yml in sync, and every entry point specified.

For each role: the same variable names in both files, every name prefixed with the role name, and the same
default values. Every `tasks_from` entry point that a playbook, a role or a test calls (import_role / include_role
in the YAML files of the repository) has its own argument spec (named after the tasks file, as ansible-core looks
it up), and an option that an entry point shares with `main` has the same definition there (one description per
variable; the generated role READMEs, tools/role_docs.py, show it once). A spec gives no templated default to an
option of a type a template cannot be read as (int, float, bool, dict): antsibull-docs refuses it; defaults/main.yml
holds the template, the description says what it defaults to, and the role README shows the value. Prints one line
per problem and exits 1 if there is any.
"""

import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
# Where playbooks and task lists that call the roles live (the rest of the tree is not Ansible content).
CALLER_GLOBS = ('*.yml', 'playbooks/**/*.yml', 'roles/*/tasks/*.yml', 'roles/*/handlers/*.yml', 'molecule/**/*.yml',
                'tests/reuse/*.yml', 'tests/install/*.yml')
ROLE_ACTIONS = {'import_role', 'include_role', 'ansible.builtin.import_role', 'ansible.builtin.include_role'}


def load_specs(role_dir):
    specs_file = role_dir / 'meta' / 'argument_specs.yml'
    if not specs_file.exists():
        return None
    return (yaml.safe_load(specs_file.read_text()) or {}).get('argument_specs') or {}


# Types that a "{{ ... }}" default cannot be read as (antsibull-docs lint-collection-docs converts a default).
NOT_TEMPLATABLE = ('int', 'float', 'bool', 'dict')


def templated_default_problems(name, entry, options):
    problems = []
    for key, option in sorted((options or {}).items()):
        default = (option or {}).get('default')
        if isinstance(default, str) and '{{' in default and (option or {}).get('type', 'str') in NOT_TEMPLATABLE:
            problems.append('%s: %s: %s is of type %s and has the templated default %r in meta/argument_specs.yml: '
                            'leave the default out of the spec (defaults/main.yml holds it) and say it in the '
                            'description' % (name, entry, key, option.get('type'), default))
    return problems


def check_role(role_dir):
    problems = []
    name = role_dir.name
    defaults_file = role_dir / 'defaults' / 'main.yml'
    if name.startswith('_'):
        return problems
    specs = load_specs(role_dir)
    if specs is None:
        return ['%s: meta/argument_specs.yml is missing' % name]
    defaults = {}
    if defaults_file.exists():
        defaults = yaml.safe_load(defaults_file.read_text()) or {}
    options = (specs.get('main') or {}).get('options') or {}
    prefix = name + '_'
    for key in sorted(set(defaults) | set(options)):
        if not key.startswith(prefix):
            problems.append('%s: variable %s does not start with %s' % (name, key, prefix))
        if key in defaults and key not in options:
            problems.append('%s: %s is in defaults/main.yml but not in meta/argument_specs.yml' % (name, key))
        elif key in options and key not in defaults and not options[key].get('required'):
            problems.append('%s: %s is in meta/argument_specs.yml but has no default in defaults/main.yml'
                            % (name, key))
        elif key in options and key in defaults and 'default' in options[key]:
            if options[key]['default'] != defaults[key]:
                problems.append('%s: %s defaults differ: defaults/main.yml %r, argument_specs %r'
                                % (name, key, defaults[key], options[key]['default']))
    for entry, spec in sorted(specs.items()):
        problems.extend(templated_default_problems(name, entry, (spec or {}).get('options')))
        if entry == 'main':
            continue
        if not (role_dir / 'tasks' / (entry + '.yml')).exists():
            problems.append('%s: argument spec %s has no tasks/%s.yml' % (name, entry, entry))
        for key, option in sorted(((spec or {}).get('options') or {}).items()):
            if not key.startswith(prefix):
                problems.append('%s: %s: variable %s does not start with %s' % (name, entry, key, prefix))
            elif key in options and option != options[key]:
                problems.append('%s: %s: option %s differs from its definition in main (copy it from there)'
                                % (name, entry, key))
            elif key not in options and key not in defaults and not option.get('required'):
                problems.append('%s: %s: %s has no default in defaults/main.yml' % (name, entry, key))
    return problems


def role_calls(node):
    """Yield (role name, tasks_from) of every import_role / include_role with tasks_from in a loaded YAML tree."""
    if isinstance(node, list):
        for item in node:
            yield from role_calls(item)
    elif isinstance(node, dict):
        for key, value in node.items():
            if key in ROLE_ACTIONS and isinstance(value, dict) and value.get('tasks_from'):
                yield str(value.get('name', '')), str(value['tasks_from'])
            else:
                yield from role_calls(value)


def check_entry_points(root):
    problems = []
    seen = set()
    for pattern in CALLER_GLOBS:
        for path in sorted(root.glob(pattern)):
            try:
                tree = yaml.safe_load(path.read_text())
            except yaml.YAMLError as exc:
                problems.append('%s: not YAML (%s)' % (path.relative_to(root), exc))
                continue
            for role, tasks_from in role_calls(tree):
                role = role.split('.')[-1]
                entry = Path(tasks_from).name
                entry = entry[:-len(Path(entry).suffix)] if Path(entry).suffix in ('.yml', '.yaml') else entry
                role_dir = root / 'roles' / role
                if (path, role, entry) in seen or not role_dir.is_dir() or '{{' in tasks_from:
                    continue
                seen.add((path, role, entry))
                if entry not in (load_specs(role_dir) or {}):
                    problems.append('%s: tasks_from %s of role %s has no argument spec: add the entry point %s to '
                                    'roles/%s/meta/argument_specs.yml'
                                    % (path.relative_to(root), tasks_from, role, entry, role))
    return problems, len(seen)


def main(root=ROOT):
    problems = []
    roles = sorted(p for p in (root / 'roles').iterdir() if p.is_dir())
    for role in roles:
        problems.extend(check_role(role))
    entry_problems, calls = check_entry_points(root)
    problems.extend(entry_problems)
    for p in problems:
        print(p)
    print('argument specs: %d role(s) and %d tasks_from call(s) checked, %d problem(s)'
          % (len(roles), calls, len(problems)))
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
