"""Keep the map of docs/DEVELOPING.md in step with the Python files under plugins/.

The section "What each Python file owns" of docs/DEVELOPING.md has one table row per Python file under
``plugins/``: the file's path in backquotes in the first cell, what it owns in the second. This check fails when
a file is missing from that table, when a row names a file that does not exist, when a row names more than one
file or says nothing, or when a file has two rows. Prints one line per problem (the file and the fix) and exits
1 if there is any.
"""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = 'docs/DEVELOPING.md'
SECTION = '### What each Python file owns'
ROW = re.compile(r'^\|(?P<first>[^|]*)\|(?P<rest>.*)\|\s*$')
PATH = re.compile(r'`([^`]+)`')


def plugin_files(root):
    """Every Python file under plugins/, as a path relative to the repository (``plugins/modules/x.py``)."""
    return sorted(p.relative_to(root).as_posix() for p in (root / 'plugins').rglob('*.py')
                  if '__pycache__' not in p.parts and p.name != '__init__.py')


def map_rows(text):
    """The (line number, first cell, second cell) of every row of the map's table; None without the section."""
    lines = text.splitlines()
    try:
        start = lines.index(SECTION)
    except ValueError:
        return None
    rows = []
    for number, line in enumerate(lines[start + 1:], start + 2):
        if line.startswith('#'):
            break
        match = ROW.match(line)
        if not match or set(match.group('first').strip()) <= set('-: '):
            continue
        rows.append((number, match.group('first').strip(), match.group('rest').strip()))
    return rows


def problems(root=ROOT):
    doc = root / DOC
    rows = map_rows(doc.read_text(encoding='utf-8')) if doc.exists() else None
    if rows is None:
        return ['%s: no section "%s": add it, a table with one row per Python file under plugins/' % (DOC, SECTION)]
    out = []
    listed = {}
    for number, first, rest in rows:
        if first == 'file':
            continue
        paths = PATH.findall(first)
        if len(paths) != 1 or not paths[0].startswith('plugins/'):
            out.append('%s:%d: the row "%s" must name exactly one file, as `plugins/<dir>/<file>.py`: one row per file'
                       % (DOC, number, first))
            continue
        path = paths[0]
        if path in listed:
            out.append('%s:%d: %s has a row already (line %d): merge the two into one'
                       % (DOC, number, path, listed[path]))
            continue
        listed[path] = number
        if not rest.strip('| '):
            out.append('%s:%d: %s: say what it owns in the second cell' % (DOC, number, path))
        if not (root / path).is_file():
            out.append('%s:%d: %s does not exist: remove its row, or correct the path' % (DOC, number, path))
    for path in plugin_files(root):
        if path not in listed:
            out.append('%s is missing from the map of %s: add a row "| `%s` | what it owns |" to its section "%s"'
                       % (path, DOC, path, SECTION))
    return out


def main(argv=None, root=ROOT):
    found = problems(root)
    for line in found:
        print('check_map: ' + line)
    if found:
        return 1
    print('check_map: the map of %s lists every Python file under plugins/ (%d)' % (DOC, len(plugin_files(root))))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
