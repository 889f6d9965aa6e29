"""Keep every role's defaults/main.yml and meta/argument_specs.yml in sync.

For each role: the same variable names in both files, every name prefixed with the role name, and the same
default values. Prints one line per problem and exits 1 if there is any.
"""

import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def check_role(role_dir):
    problems = []
    name = role_dir.name
    defaults_file = role_dir / 'defaults' / 'main.yml'
    specs_file = role_dir / 'meta' / 'argument_specs.yml'
    if name.startswith('_'):
        return problems
    if not specs_file.exists():
        return ['%s: meta/argument_specs.yml is missing' % name]
    defaults = {}
    if defaults_file.exists():
        defaults = yaml.safe_load(defaults_file.read_text()) or {}
    specs = yaml.safe_load(specs_file.read_text()) or {}
    options = ((specs.get('argument_specs') or {}).get('main') or {}).get('options') or {}
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
    return problems


def main():
    problems = []
    roles = sorted(p for p in (ROOT / 'roles').iterdir() if p.is_dir())
    for role in roles:
        problems.extend(check_role(role))
    for p in problems:
        print(p)
    print('argument specs: %d role(s) checked, %d problem(s)' % (len(roles), len(problems)))
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
