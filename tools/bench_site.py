"""Speed figures of site.yml on the SIMULATED mock cluster (prints figures and ratios; asserts nothing).

1. site.yml from nothing (after teardown.yml) against the slowest instance's own time to healthy, read from the
   run's report (ready_seconds: launch to /health 200 and /v1/models listing the served name).
   Target: orchestration adds at most 50% (wall <= 1.5 x slowest).
2. The same with 2 instances per node. Target: under 1.2x the 1-instance run (instances start concurrently and
   their health waits overlap).
3. A no-change re-run. Target: under a third of the first run.

The stand-in's model load is set with KVPOOL_SIM_STARTUP_S (default here 20 s, --startup-s) through
vllm_instance_environment, so that the instance itself, not Ansible, is the long pole as with a real 72B model.
Each figure is the median of --runs runs (default 3): a run from nothing is a teardown.yml and a site.yml, the
re-run a site.yml right after one. Usage: python tools/bench_site.py [--startup-s 20] [--runs 3]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
MOCKCTL = [sys.executable, str(REPO / 'tests' / 'mock' / 'mockctl')]
INVENTORY = REPO / 'inventories' / 'sim'


def playbook(name, extra):
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / 'ansible.cfg'))
    argv = [str(BIN / 'ansible-playbook'), str(REPO / name), '-i', str(INVENTORY), '-e', json.dumps(extra)]
    t0 = time.monotonic()
    proc = subprocess.run(argv, cwd=str(REPO), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, check=False)
    elapsed = time.monotonic() - t0
    if proc.returncode != 0:
        sys.exit('%s failed:\n%s' % (name, proc.stdout[-4000:]))
    return elapsed


def slowest_ready(report):
    status = json.loads(Path(report).read_text())['status']
    return max(i['ready_seconds'] or 0 for node in status.values() for i in node)


def deploy(extra, report, runs):
    """Medians of (site.yml from nothing, the slowest instance's time to healthy in that run, a no-change re-run)."""
    firsts, slowest, agains = [], [], []
    while len(firsts) < runs:
        playbook('teardown.yml', {'kvpool_teardown_confirm': True})
        firsts.append(playbook('site.yml', extra))
        slowest.append(slowest_ready(report))
        agains.append(playbook('site.yml', extra))
    print('  runs: first %s s, slowest to healthy %s s, re-run %s s' % tuple(
        ', '.join('%.1f' % v for v in values) for values in (firsts, slowest, agains)), flush=True)
    return statistics.median(firsts), statistics.median(slowest), statistics.median(agains)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('--startup-s', type=float, default=20.0)
    ap.add_argument('--runs', type=int, default=3)
    args = ap.parse_args()
    out = subprocess.run(MOCKCTL + ['up', '--nodes', '2'], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         universal_newlines=True, check=False)
    if out.returncode != 0:
        sys.exit('mockctl up failed:\n' + out.stdout)
    report = os.path.join(tempfile.mkdtemp(prefix='kvpool-bench-'), 'vllm_instances.json')
    base = {'vllm_instance_environment': {'KVPOOL_SIM_STARTUP_S': str(args.startup_s)},
            'vllm_instance_report_path': report, 'mooncake_config_memory_reserve_gib': 0}
    one = deploy(base, report, args.runs)
    two_instances = dict(base, vllm_instance_instances=[{'devices': [0, 1, 2, 3], 'port': 8002},
                                                        {'devices': [4, 5, 6, 7], 'port': 8003}])
    two = deploy(two_instances, report, args.runs)
    playbook('teardown.yml', {'kvpool_teardown_confirm': True})

    print('site.yml benchmark on the SIMULATED mock cluster (2 nodes, stand-in model load %.0f s, median of %d runs, '
          '%d CPU cores)' % (args.startup_s, args.runs, os.cpu_count() or 0))
    print('  1 instance/node : site.yml from nothing %6.1f s, slowest instance to healthy %5.1f s -> %.2fx '
          '(target <= 1.5x)' % (one[0], one[1], one[0] / one[1]))
    print('  2 instances/node: site.yml from nothing %6.1f s, slowest instance to healthy %5.1f s -> %.2fx the '
          '1-instance run (target < 1.2x)' % (two[0], two[1], two[0] / one[0]))
    print('  no-change re-run: %6.1f s = %.2f of the first run (target <= 0.33)' % (one[2], one[2] / one[0]))


if __name__ == '__main__':
    main()
