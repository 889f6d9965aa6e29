"""Speed figures of verify_network.yml on the SIMULATED mock cluster (prints figures and ratios; asserts nothing).

1. verify_network.yml against a naive transcription of the guide (tools/bench/naive_verify_network.yml: one shell
   task per guide command, loops over the 8 NPUs as typed in the guide), same 2 mock nodes, same stub latency.
   Target: ours at least 5x faster.
2. verify_network.yml on 8 mock nodes against 2. Target: at most 1.5x the 2-node time.

Each figure is the median of --runs runs. Usage: python tools/bench_verify_network.py [--runs 3] [--latency-ms 50]
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
MOCKCTL = [sys.executable, str(REPO / 'tests' / 'mock' / 'mockctl')]
NAIVE = REPO / 'tools' / 'bench' / 'naive_verify_network.yml'
OURS = REPO / 'verify_network.yml'


def sh(argv, **kw):
    return subprocess.run(argv, cwd=str(REPO), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, check=False, **kw)


def cluster(nodes, latency_ms):
    """(Re)create the mock cluster with exactly `nodes` nodes and return its inventory directory."""
    status = sh(MOCKCTL + ['status']).stdout
    running = status.count('kvpool-node')
    if running != nodes:
        sh(MOCKCTL + ['down'])
    out = sh(MOCKCTL + ['up', '--nodes', str(nodes), '--latency-ms', str(latency_ms)])
    if out.returncode != 0:
        sys.exit('mockctl up failed:\n' + out.stdout)
    sh(MOCKCTL + ['fault', 'clear'])
    sh(MOCKCTL + ['latency', '--node', 'all', '--ms', str(latency_ms)])
    inv = REPO / '.sim' / ('bench-inventory-%d' % nodes)
    if inv.exists():
        shutil.rmtree(str(inv))
    (inv / 'group_vars').mkdir(parents=True)
    shutil.copy(str(REPO / 'inventories' / 'sim' / 'group_vars' / 'all.yml'), str(inv / 'group_vars' / 'all.yml'))
    hosts = {}
    for k in range(1, nodes + 1):
        peer = k % nodes + 1
        # The naive baseline's hand-typed peer NPU addresses (simulated addressing: tests/mock/README.md).
        hosts['node%d' % k] = {'ansible_host': '172.31.250.%d' % (10 + k),
                               'bench_peer_ips': ['29.1.%d.%d' % (peer, 80 + i) for i in range(8)]}
    (inv / 'hosts.yml').write_text(json.dumps({'all': {'children': {'npu_nodes': {'hosts': hosts}}}}, indent=1))
    return inv


def cpu_seconds():
    """Busy CPU seconds of the whole machine so far (all mock nodes, the controller, everything)."""
    with open('/proc/stat') as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + fields[4]
    return (sum(fields[:8]) - idle) / float(os.sysconf('SC_CLK_TCK'))


CPU = {}


def timed_playbook(playbook, inv, extra=None):
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / 'ansible.cfg'))
    argv = [str(BIN / 'ansible-playbook'), str(playbook), '-i', str(inv)]
    if extra:
        argv += ['-e', json.dumps(extra)]
    c0 = cpu_seconds()
    t0 = time.monotonic()
    proc = subprocess.run(argv, cwd=str(REPO), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, check=False)
    elapsed = time.monotonic() - t0
    CPU.setdefault((str(playbook), str(inv)), []).append(cpu_seconds() - c0)
    if proc.returncode != 0:
        sys.exit('%s failed:\n%s' % (playbook, proc.stdout[-3000:]))
    return elapsed


def median_of(runs, fn):
    fn()  # warm-up: SSH control masters, page cache
    return statistics.median([fn() for run in range(runs)])


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--runs', type=int, default=3)
    ap.add_argument('--latency-ms', type=int, default=50)
    args = ap.parse_args()
    report = str(REPO / '.sim' / 'bench-npu_network.json')
    ours = {'npu_network_report_path': report}

    inv2 = cluster(2, args.latency_ms)
    naive2 = median_of(args.runs, lambda: timed_playbook(NAIVE, inv2))
    ours2 = median_of(args.runs, lambda: timed_playbook(OURS, inv2, ours))
    inv8 = cluster(8, args.latency_ms)
    ours8 = median_of(args.runs, lambda: timed_playbook(OURS, inv8, ours))
    cluster(2, args.latency_ms)

    print('verify_network benchmark on the SIMULATED mock cluster (stub latency %d ms per hccn_tool call, '
          'median of %d runs, %d CPU cores)' % (args.latency_ms, args.runs, os.cpu_count() or 0))
    cores = os.cpu_count() or 1
    for label, wall, pb, inv in (('naive transcription of the guide, 2 nodes', naive2, NAIVE, inv2),
                                 ('verify_network.yml, 2 nodes              ', ours2, OURS, inv2),
                                 ('verify_network.yml, 8 nodes              ', ours8, OURS, inv8)):
        c = statistics.median(CPU[(str(pb), str(inv))])
        print('  %s : %6.2f s wall, %5.1f CPU-s on the machine (%.0f%% of %d cores busy)'
              % (label, wall, c, 100.0 * c / (wall * cores), cores))
    print('  speed-up over the naive transcription     : %6.1fx (target >= 5x)' % (naive2 / ours2))
    print('  8 nodes / 2 nodes                         : %6.2fx (target <= 1.5x)' % (ours8 / ours2))


if __name__ == '__main__':
    main()
