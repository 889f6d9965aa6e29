"""Where the minutes of a test run went: each make target (scripts/phase.sh) and each molecule scenario
(scripts/molecule-run.sh), from .tmp/logs. Printed by .ci/run when it exits, passed or failed, so that the end of a
CI log (often all that is shown) says which phase ran long or failed."""

import os
import re
import sys
import time

LOGS = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '.tmp', 'logs')
ANSI = re.compile(r'\x1b\[[0-9;]*m')
SCENARIO = re.compile(r'(?:\[|\s)([A-Za-z0-9_]+) (?:>|\u279c) ([a-z_]+)\]?:? Executed: (\w+)')


def mmss(seconds):
    return '%d:%02d' % divmod(int(round(seconds)), 60)


def rows(path):
    try:
        with open(path, encoding='utf-8', errors='replace') as fh:
            return [line.rstrip('\n').split('\t') for line in fh if '\t' in line]
    except OSError:
        return []


def main(start=None):
    now = time.time()
    phases = rows(os.path.join(LOGS, 'phases.tsv'))
    out = ['', '==== where the minutes went (.tmp/logs/phases.tsv, molecule-times.tsv) ====']
    begun, last_end = {}, start
    for stamp, name, what in phases:
        t = float(stamp)
        if what == 'begin':
            if last_end is not None and t - last_end >= 5:
                out.append('  %-22s %7s' % ('(set-up between)', mmss(t - last_end)))
                last_end = t  # two jobs that begin together: the gap is shown once
            begun[name] = t
        elif name in begun:
            out.append('  %-22s %7s' % (name, mmss(t - begun.pop(name))))
            last_end = t
    for name, t in begun.items():
        out.append('  %-22s %7s  NOT FINISHED (failed or stopped here)' % (name, mmss(now - t)))
    per, prev = {}, None
    for row in rows(os.path.join(LOGS, 'molecule-times.tsv')):
        t = float(row[0])
        m = SCENARIO.search(ANSI.sub('', row[1])) if row[1] != 'start' else None
        if m and prev is not None:
            key = m.group(1)
            per[key] = per.get(key, 0.0) + t - prev
            if m.group(3) != 'Successful':
                per[key + ' (FAILED at %s)' % m.group(2)] = 0.0
        prev = t
    if per:
        out.append('  molecule scenarios:')
        out.extend('    %-30s %7s' % (k, mmss(v) if v else '') for k, v in per.items())
    if start is not None:
        out.append('  %-22s %7s' % ('total', mmss(now - start)))
    print('\n'.join(out))


if __name__ == '__main__':
    main(float(sys.argv[1]) if len(sys.argv) > 1 else None)
