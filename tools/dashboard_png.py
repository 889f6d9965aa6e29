"""Draw the Grafana dashboard of role kvpool_monitoring from a running Prometheus, as a PNG (Grafana is not
installable on the test machines: each panel's queries go to Prometheus's own range API and are drawn with
matplotlib, one plot per panel, titles, units and legends taken from the dashboard JSON).

Usage: python tools/dashboard_png.py [--url http://127.0.0.1:9090] [--minutes 10] [--label TEXT] --out FILE.png

Prints one line per panel with its number of series; exit code 1 when a query fails to run. The label says where
the data came from (e.g. "SIMULATED mock cluster"): it is printed on the picture.
"""

import argparse
import json
import math
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import prom_eval  # noqa: E402  (the Prometheus HTTP API client of tools/prom_eval.py)

ROOT = Path(__file__).resolve().parent.parent
DASHBOARD = ROOT / 'roles' / 'kvpool_monitoring' / 'files' / 'kvpool-dashboard.json'


def query_range(url, expr, start, end, step):
    """``(series, error)``: ``[(labels, [(t, value), ...]), ...]`` of one range query."""
    data, error = prom_eval.api(url, '/api/v1/query_range', {'query': expr, 'start': start, 'end': end, 'step': step})
    if error:
        return None, error
    out = []
    for item in data['result']:
        points = [(float(t), float(v)) for t, v in item['values'] if not math.isnan(float(v))]
        out.append((item['metric'], points))
    return out, None


def legend(fmt, labels):
    return re.sub(r'\{\{\s*(\w+)\s*\}\}', lambda m: labels.get(m.group(1), ''), fmt or '') or \
        ','.join('%s=%s' % kv for kv in sorted(labels.items()))


def panels():
    data = json.loads(DASHBOARD.read_text())
    return [p for p in data['panels'] if p.get('targets')]


def render(url, out, minutes=10.0, label=''):
    """Draw every panel; returns ``{panel title: number of series}`` and the list of failed queries."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    end = time.time()
    start = end - minutes * 60
    step = max(1.0, round(minutes * 60 / 150.0, 1))
    shown = panels()
    cols = 3
    rows = int(math.ceil(len(shown) / float(cols)))
    fig, axes = plt.subplots(rows, cols, figsize=(6.2 * cols, 3.3 * rows), squeeze=False)
    counts, failed = {}, []
    for ax, panel in zip([a for row in axes for a in row], shown):
        n = 0
        for target in panel['targets']:
            expr = target['expr'].replace('$cluster', '.*')
            series, error = query_range(url, expr, start, end, step)
            if error:
                failed.append('%s [%s]: %s' % (panel['title'], target['refId'], error))
                continue
            for labels, points in series:
                if points:
                    n += 1
                    ax.plot([(p[0] - end) / 60.0 for p in points], [p[1] for p in points], linewidth=1.2,
                            label='%s %s' % (target['refId'], legend(target.get('legendFormat'), labels))[:48])
        counts[panel['title']] = n
        unit = panel.get('fieldConfig', {}).get('defaults', {}).get('unit', '')
        ax.set_title(panel['title'], fontsize=9)
        ax.set_xlabel('minutes before %s UTC' % time.strftime('%H:%M', time.gmtime(end)), fontsize=7)
        ax.set_ylabel(unit, fontsize=7)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
        if n:
            ax.legend(fontsize=6, loc='upper left')
        else:
            ax.text(0.5, 0.5, 'no data', ha='center', va='center', transform=ax.transAxes, color='grey')
    for ax in [a for row in axes for a in row][len(shown):]:
        ax.axis('off')
    fig.suptitle('ascend.kvpool dashboard (kvpool-dashboard.json) from Prometheus: %s' % (label or url), fontsize=11)
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    fig.savefig(str(out), dpi=80)
    plt.close(fig)
    return counts, failed


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n', maxsplit=1)[0])
    parser.add_argument('--url', default='http://127.0.0.1:9090')
    parser.add_argument('--minutes', type=float, default=10.0)
    parser.add_argument('--label', default='')
    parser.add_argument('--out', required=True)
    args = parser.parse_args()
    counts, failed = render(args.url, args.out, args.minutes, args.label)
    for title, n in counts.items():
        print('%3d  %s' % (n, title))
    for line in failed:
        print('ERR  ' + line)
    empty = sum(1 for n in counts.values() if not n)
    print('%s: %d panels, %d without data, %d failed queries' % (args.out, len(counts), empty, len(failed)))
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
