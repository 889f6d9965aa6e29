"""Fail on a dangling file name in the documentation.

README.md and docs/*.md name files of this repository in two ways: in backquotes (`plugins/modules/x.py`,
`tests/unit/.../test_y.py::test_z`, `roles/<role>/defaults/main.yml`) and as Markdown links
([services](docs/services.md#logs)). Every backquoted name that starts with a directory of the repository
(``DIRS``) is resolved from the repository's root, every relative link target from the Markdown file's own
directory. A name with a placeholder (``<role>``, ``*``, ``2.N``, ``{,6}``) must match at least one file; a
trailing ``#anchor``, ``::test``, ``:line`` or command-line argument is not part of the name. Fenced code blocks
are not read (commands, not references), nor are names of what runs make at run time (``GENERATED``). A name
that is a file of every role (`meta/argument_specs.yml`) is found under ``roles/*/``. A file of another
repository is written with its repository, `owner/repo:path`, so that it is not read as one of ours.

Prints one line per dangling name (file, line, the name, the fix) and exits 1 if there is any.
"""

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The repository's directories whose files the docs name; a backquoted name outside them (mooncake.json, a unit
# name, an option) is not a file of the repository.
DIRS = ('changelogs', 'docs', 'inventories', 'meta', 'molecule', 'playbooks', 'plugins', 'roles', 'scripts',
        'tests', 'tools')
# Made at run time, never in a clone: named by the docs as where things land.
GENERATED = ('tests/output/', 'inventories/sim/reports/')  # made by a run (git-ignored)
CODE = re.compile(r'`([^`]+)`')
LINK = re.compile(r'\]\(([^)\s]+)(?:\s+"[^"]*")?\)')
FENCE = re.compile(r'^\s*(```|~~~)')


def doc_files(root):
    """README.md and every docs/*.md, as paths."""
    files = [root / 'README.md'] if (root / 'README.md').exists() else []
    return files + sorted((root / 'docs').glob('*.md'))


def referenced(text):
    """Yield (line number, kind, name) of every link target and backquoted name outside fenced code blocks.

    A code span may run over a line break (a wrapped paragraph): the text is read whole, fenced blocks blanked."""
    lines = text.splitlines()
    fenced = False
    for index, line in enumerate(lines):
        if FENCE.match(line):
            fenced = not fenced
            lines[index] = ''
        elif fenced:
            lines[index] = ''
    body = '\n'.join(lines)
    found = [(m.start(), 'link', m.group(1)) for m in LINK.finditer(body)]
    found += [(m.start(), 'code', ' '.join(m.group(1).split())) for m in CODE.finditer(body)]
    for offset, kind, value in sorted(found):
        yield body.count('\n', 0, offset) + 1, kind, value


def repo_name(span):
    """The repository path a backquoted span names, or None when it names none (not under DIRS, elided)."""
    name = span.strip().split()[0] if span.strip() else ''
    name = name.split('::')[0].split('#')[0]
    name = re.sub(r':\d+(-\d+)?$', '', name).rstrip('.,;:)')
    if name.startswith('./'):
        name = name[2:]
    if '/' not in name or name.split('/')[0] not in DIRS or '...' in name:
        return None
    if any(name.startswith(prefix) for prefix in GENERATED):
        return None
    return name


def link_name(target, doc, root):
    """The repository path (from the root) a relative link target names, or None (URL, anchor, outside)."""
    if re.match(r'^[a-z][a-z0-9+.-]*:', target) or target.startswith(('#', '/')):
        return None
    target = target.split('#')[0].split('?')[0]
    if not target:
        return None
    path = (doc.parent / target).resolve()
    try:
        return path.relative_to(root.resolve()).as_posix() + ('/' if target.endswith('/') else '')
    except ValueError:
        return None


def pattern(name):
    """A glob of a name with placeholders, or None when it has none."""
    glob = re.sub(r'<[^>]*>', '*', name)
    glob = re.sub(r'(?<=[.\-])[A-Z](?=[.\-/]|$)', '*', glob)
    glob = re.sub(r'\{[^}]*\}', '*', glob)
    return glob if glob != name or any(c in name for c in '*?[') else None


def exists(root, name):
    """Whether the name is a file or directory of the repository, from its root or from a role's directory (the
    docs say "the role's `meta/argument_specs.yml`")."""
    if (root / name.rstrip('/')).exists():
        return True
    for candidate in (name, 'roles/*/' + name):
        glob = pattern(candidate)
        if glob and any(root.glob(glob.rstrip('/'))):
            return True
    return False


def problems(root=ROOT, counted=None):
    """The dangling names, one line each; ``counted`` (a list) gets every repository name that was resolved."""
    out = []
    for doc in doc_files(root):
        rel = doc.relative_to(root).as_posix()
        for number, kind, value in referenced(doc.read_text(encoding='utf-8')):
            name = repo_name(value) if kind == 'code' else link_name(value, doc, root)
            if name is None:
                continue
            if counted is not None:
                counted.append(name)
            if not exists(root, name):
                out.append('%s:%d: %s `%s` names %s, which does not exist: fix the name (or the file)'
                           % (rel, number, 'link' if kind == 'link' else 'file name', value, name))
    return out


def main(argv=None, root=ROOT):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n', maxsplit=1)[0])
    parser.parse_args(argv)
    counted = []
    found = problems(root, counted)
    for line in found:
        print(line)
    print('check_doc_paths: %d Markdown file(s) read, %d repository name(s) resolved, %d dangling'
          % (len(doc_files(root)), len(counted), len(found)))
    return 1 if found else 0


if __name__ == '__main__':
    sys.exit(main())
