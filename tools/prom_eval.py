"""Evaluate every PromQL expression of role kvpool_monitoring against a running Prometheus (prints; asserts nothing).

Each recording rule, each alert expression and each dashboard panel query is sent to the Prometheus HTTP API
(/api/v1/query, instant query now) and its number of result series printed; recorded series are read under their
own names too. Then the alerts Prometheus holds (pending or firing) are listed. Dashboard variables are replaced
as Grafana sends them with 'All' selected ($cluster -> .*). Exit code 1 when a query fails to run (a syntax or
type error), not when one is empty: what is empty depends on the traffic, the exporters (a router panel needs a
router) and the time since the start (the hit-collapse alert looks an hour back).

Usage: python tools/prom_eval.py [--url http://127.0.0.1:9090]
"""

import argparse
import json
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
FILES = ROOT / 'roles' / 'kvpool_monitoring' / 'files'


OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # straight to the Prometheus, no proxy


def api(url, path, params):
    """``(data, error)`` of one POST to the Prometheus HTTP API (``path`` such as ``/api/v1/query``)."""
    try:
        with OPENER.open(url.rstrip('/') + path, urllib.parse.urlencode(params).encode(), timeout=30) as resp:
            body = json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        try:
            body = json.loads(exc.read() or b'{}')
        except ValueError:
            body = {}
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return None, str(exc)
    if body.get('status') != 'success':
        return None, body.get('error') or 'no answer'
    return body['data'], None


def query(url, expr):
    data, error = api(url, '/api/v1/query', {'query': expr})
    return (None, error) if error else (len(data['result']), None)


def expressions():
    out = []
    for name in ('kvpool-recording.rules.yml', 'kvpool-alerts.rules.yml'):
        for group in yaml.safe_load((FILES / name).read_text())['groups']:
            for rule in group['rules']:
                if 'record' in rule:
                    out.append(('record ' + rule['record'], rule['expr']))
                    out.append(('series ' + rule['record'], rule['record']))
                else:
                    out.append(('alert  ' + rule['alert'], rule['expr']))
    dashboard = json.loads((FILES / 'kvpool-dashboard.json').read_text())
    for panel in dashboard['panels']:
        for target in panel.get('targets', []):
            out.append(('panel  %s [%s]' % (panel['title'], target['refId']), target['expr'].replace('$cluster', '.*')))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n', maxsplit=1)[0])
    parser.add_argument('--url', default='http://127.0.0.1:9090')
    args = parser.parse_args()
    failed = empty = 0
    for label, expr in expressions():
        count, error = query(args.url, expr)
        if error:
            failed += 1
            print('%-4s  %s: %s' % ('ERR', label, error))
            continue
        empty += count == 0
        print('%4d  %s' % (count, label))
    try:
        with OPENER.open(args.url.rstrip('/') + '/api/v1/alerts', timeout=30) as resp:
            alerts = json.loads(resp.read())['data']['alerts']
    except (urllib.error.URLError, OSError, ValueError) as exc:
        print('%s: no answer from Prometheus (%s)' % (args.url, exc))
        return 1
    for alert in alerts:
        labels = alert['labels']
        print('alert %s %s %s' % (alert['state'], labels.get('alertname'), labels.get('instance', '')))
    print('%d expressions, %d empty, %d failed; %d alert(s) pending or firing'
          % (len(expressions()), empty, failed, len(alerts)))
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
