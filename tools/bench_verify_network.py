"""Cost of verify_network.yml on the SIMULATED mock cluster: measured figures, a linear fit and a projection (prints
figures and ratios; asserts nothing). Stub latency 50 ms per hccn_tool call unless --latency-ms says otherwise.

  scale      at --nodes (default 2,4,8,16) and --strategies (default same_index,ring,sampled): wall time,
             controller CPU seconds per node, node CPU seconds per node, pings per node, each the median of --runs
             runs after one warm-up run; appends the rows to --results (JSON lines), so the sizes can be measured
             in separate locked commands. Each run of verify_network.yml is followed by one of the floor playbook
             (below) with the same strategy's targets, so the table can show Ansible's own cost per node beside
             ours (--no-floor: skip it).
  table      prints the rows of --results as a table, fits the controller and node figures of each strategy over
             every measured size (least squares: cost = a + b*N, plus c*P with P the run's pings where the pings per
             node grow with N: same_index, full_mesh), checks the fit of the sizes up to 16 against the sizes
             measured beyond it (projected against measured), and projects to --project (default 64,256) nodes
             with --controller-cores C (default 8). A PROJECTION, with its assumptions printed.
  floor      in one run, verify_network.yml against tools/bench/floor_verify_network.yml (the same two module
             round trips, hccn_facts and hccn_ping with the same targets, and nothing else), interleaved, on
             --nodes nodes; prints the ratio (goal <= 1.2x) and the naive transcription of the guide
             (tools/bench/naive_verify_network.yml) for reference.

What is measured, and how:
  wall            ansible-playbook start to exit (time.monotonic).
  controller CPU  user+system CPU of ansible-playbook and every process it waited for (its forks, ssh clients:
                  os.wait4), plus the CPU the persistent ssh control masters ([mux]) used meanwhile (/proc), i.e.
                  everything the run cost on the controller. "main" is the ansible-playbook process alone (read
                  from /proc/<pid>/stat every 20 ms until it exits): the part that does not spread over cores.
  node CPU        cpuacct.usage of each mock node's docker cgroup (cgroup v1) before and after: sshd, the modules'
                  Python, the stub tools and their stub server. The mock stubs cost about 3 ms of CPU per call;
                  the real hccn_tool is a C program.
Usage: python tools/bench_verify_network.py [floor]   (what make bench runs)
       python tools/bench_verify_network.py scale --nodes 2,4 [--runs 3] [--results .sim/bench-scale.jsonl]
       python tools/bench_verify_network.py table [--controller-cores 8]
       python tools/bench_verify_network.py floor [--nodes 2] [--runs 5]
"""

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
MOCKCTL = [sys.executable, str(REPO / 'tests' / 'mock' / 'mockctl')]
NAIVE = REPO / 'tools' / 'bench' / 'naive_verify_network.yml'
FLOOR = REPO / 'tools' / 'bench' / 'floor_verify_network.yml'
OURS = REPO / 'verify_network.yml'
RESULTS = REPO / '.sim' / 'bench-scale.jsonl'
CGROUP = Path('/sys/fs/cgroup/cpuacct/docker')
TICK = float(os.sysconf('SC_CLK_TCK'))
EXTRA_ENV = {}  # --forks: ANSIBLE_FORKS
CONFIG = [REPO / 'ansible.cfg']  # --poll-interval: a copy next to it with internal_poll_interval set
POLL = [0.001]  # Ansible's default internal_poll_interval
MAX_WORKERS = 64  # npu_network_max_workers default: hccn_tool processes at once per node

sys.path.insert(0, str(REPO / '.collections'))
from ansible_collections.ascend.kvpool.plugins.plugin_utils import npu_network  # noqa: E402


def sh(argv, **kw):
    return subprocess.run(argv, cwd=str(REPO), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, check=False, **kw)


def sim_ips(nodes, npus=8):
    """The mock cluster's NPU addresses (tests/mock/README.md: node k, NPU i -> 29.1.<k>.<80+i>)."""
    return dict(('node%d' % k, dict((str(i), '29.1.%d.%d' % (k, 80 + i)) for i in range(npus)))
                for k in range(1, nodes + 1))


def cluster(nodes, latency_ms, strategy='same_index'):
    """(Re)create the mock cluster with exactly ``nodes`` nodes and return its inventory directory: the hosts with
    the naive baseline's hand-typed peer addresses, and in host_vars/ of a second inventory next to it
    (``<inventory>-floor``) each host's ping targets under ``strategy`` for the floor playbook, so that only the
    floor run parses them."""
    running = sh(MOCKCTL + ['status']).stdout.count('kvpool-node')
    if running != nodes:
        sh(MOCKCTL + ['down'])
    out = sh(MOCKCTL + ['up', '--nodes', str(nodes), '--latency-ms', str(latency_ms)])
    if out.returncode != 0:
        sys.exit('mockctl up failed:\n' + out.stdout)
    sh(MOCKCTL + ['fault', 'clear'])
    sh(MOCKCTL + ['latency', '--node', 'all', '--ms', str(latency_ms)])
    inv = REPO / '.sim' / ('bench-inventory-%d' % nodes)
    floor = REPO / '.sim' / ('bench-inventory-%d-floor' % nodes)
    ips = sim_ips(nodes)
    hosts = {}
    for k in range(1, nodes + 1):
        peer = k % nodes + 1
        hosts['node%d' % k] = {'ansible_host': '172.31.250.%d' % (10 + k),
                               'bench_peer_ips': ['29.1.%d.%d' % (peer, 80 + i) for i in range(8)]}
    for path in (inv, floor):
        if path.exists():
            shutil.rmtree(str(path))
        (path / 'group_vars').mkdir(parents=True)
        shutil.copy(str(REPO / 'inventories' / 'sim' / 'group_vars' / 'all.yml'), str(path / 'group_vars' / 'all.yml'))
        (path / 'hosts.yml').write_text(json.dumps({'all': {'children': {'npu_nodes': {'hosts': hosts}}}}, indent=1))
    (floor / 'host_vars').mkdir()
    for node in hosts:
        targets = npu_network.hccn_ping_targets(ips, node, strategy, 2, 0, 0)
        (floor / 'host_vars' / (node + '.json')).write_text(json.dumps({'bench_ping_targets': targets}))
    return inv


def container_ids(nodes):
    out = sh(['docker', 'inspect', '-f', '{{.Id}}'] + ['kvpool-node%d' % k for k in range(1, nodes + 1)])
    if out.returncode != 0:
        sys.exit('docker inspect failed:\n' + out.stdout)
    return out.stdout.split()


def node_cpu(ids):
    """CPU seconds used so far by each container (cgroup v1 cpuacct.usage, nanoseconds)."""
    return [int((CGROUP / cid / 'cpuacct.usage').read_text()) / 1e9 for cid in ids]


def meminfo(field='MemAvailable'):
    """``field`` of /proc/meminfo (MemAvailable, MemTotal), in bytes; 0 when absent."""
    with open('/proc/meminfo') as f:
        for line in f:
            if line.startswith(field + ':'):
                return int(line.split()[1]) * 1024
    return 0


def mux_cpu():
    """{pid: CPU seconds} of the ssh control masters ('ssh: <path> [mux]') now running."""
    out = {}
    for entry in os.listdir('/proc'):
        if not entry.isdigit():
            continue
        try:
            with open('/proc/%s/cmdline' % entry, 'rb') as f:
                cmd = f.read()
            if not cmd.startswith(b'ssh: ') or b'[mux]' not in cmd:
                continue
            with open('/proc/%s/stat' % entry) as f:
                fields = f.read().rsplit(')', 1)[1].split()
            out[int(entry)] = (int(fields[11]) + int(fields[12])) / TICK
        except (IOError, OSError, IndexError, ValueError):
            continue
    return out


def own_cpu(pid):
    with open('/proc/%d/stat' % pid) as f:
        fields = f.read().rsplit(')', 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def playbook(path, inv, extra=None, nodes=0):
    """Run a playbook once; returns wall, controller CPU (total and main process), node CPU (total) and rc."""
    env = dict(os.environ, ANSIBLE_CONFIG=str(CONFIG[0]))
    env.update(EXTRA_ENV)
    argv = [str(BIN / 'ansible-playbook'), str(path), '-i', str(inv)]
    if extra:
        argv += ['-e', json.dumps(extra)]
    ids = container_ids(nodes) if nodes else []
    n0, m0 = node_cpu(ids), mux_cpu()
    avail0 = meminfo()
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, cwd=str(REPO), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            universal_newlines=True)
    main = [0.0]
    low = [avail0]  # the least MemAvailable seen during the run

    def poll():
        while proc.returncode is None:
            try:
                low[0] = min(low[0], meminfo())
                main[0] = own_cpu(proc.pid)
            except (IOError, OSError, IndexError, ValueError):
                return
            time.sleep(0.02)

    poller = threading.Thread(target=poll)
    poller.start()
    out = proc.stdout.read()
    dummy, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.monotonic() - t0
    poller.join()
    m1 = mux_cpu()
    mux = sum(cpu - m0.get(pid, 0.0) for pid, cpu in m1.items())
    node = sum(b - a for a, b in zip(n0, node_cpu(ids)))
    if proc.returncode != 0:
        sys.exit('%s failed (rc %d):\n%s' % (path, proc.returncode, out[-3000:]))
    # mem: the most memory the run took from the machine (controller, its forks, ssh and the mock nodes: the drop
    # of MemAvailable, sampled every 20 ms); rss: the largest single controller process (ru_maxrss, KiB).
    return {'wall': wall, 'controller': usage.ru_utime + usage.ru_stime + mux, 'main': main[0], 'node': node,
            'mem': max(0, avail0 - low[0]) / 1048576.0, 'rss': usage.ru_maxrss / 1024.0, 'stdout': out}


def median_row(samples):
    row = dict((key, statistics.median(s[key] for s in samples)) for key in ('wall', 'controller', 'main', 'node'))
    row.update(mem=max(s['mem'] for s in samples), rss=max(s['rss'] for s in samples))  # the worst run
    return row


def cmd_scale(args):
    report = str(REPO / '.sim' / 'bench-npu_network.json')
    for nodes in args.nodes:
        for strategy in args.strategies:
            inv = cluster(nodes, args.latency_ms, strategy)  # the floor's targets are this strategy's plan
            floor_inv = Path(str(inv) + '-floor')
            extra = {'npu_network_ping_strategy': strategy, 'npu_network_report_path': report,
                     'npu_network_ping_round': '0'}
            load = os.getloadavg()[0]
            playbook(OURS, inv, extra, nodes)  # warm-up: SSH control masters, page cache
            if args.floor:
                playbook(FLOOR, floor_inv, None, nodes)
            samples, floor = [], []
            for _run in range(args.runs):  # interleaved, so that both meet the same machine
                samples.append(playbook(OURS, inv, extra, nodes))
                if args.floor:
                    floor.append(playbook(FLOOR, floor_inv, None, nodes))
            pings = json.loads(Path(report).read_text())['pings']
            row = dict(median_row(samples), nodes=nodes, strategy=strategy, pings=pings, runs=args.runs,
                       latency_ms=args.latency_ms, cores=os.cpu_count(), forks=forks(), load=load, poll=POLL[0],
                       at=time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime()))
            if floor:
                row['floor'] = median_row(floor)
            with open(str(args.results), 'a') as f:
                f.write(json.dumps(row, sort_keys=True) + '\n')
            print('%-10s %3d nodes: %6.2f s wall, controller %.3f CPU-s/node, node %.3f CPU-s/node, %d pings/node, '
                  'memory %.0f MB (forks %d, load %.1f)'
                  % (strategy, nodes, row['wall'], row['controller'] / nodes, row['node'] / nodes, pings // nodes,
                     row['mem'], row['forks'], load)
                  + ('; floor %.2f s wall, controller %.3f CPU-s/node' % (
                      row['floor']['wall'], row['floor']['controller'] / nodes) if floor else ''))
            sys.stdout.flush()


def forks():
    if 'ANSIBLE_FORKS' in EXTRA_ENV:
        return int(EXTRA_ENV['ANSIBLE_FORKS'])
    out = sh([str(BIN / 'ansible-config'), 'dump', '--only-changed'], env=dict(os.environ,
             ANSIBLE_CONFIG=str(REPO / 'ansible.cfg'))).stdout
    for line in out.splitlines():
        if line.startswith('DEFAULT_FORKS'):
            return int(line.split('=')[-1].strip())
    return 5


def fit(xs, ys):
    """Least squares y = a + b x; returns a, b, r^2."""
    n = float(len(xs))
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx else 0.0
    a = my - b * mx
    ss = sum((y - my) ** 2 for y in ys)
    r2 = 1 - sum((y - a - b * x) ** 2 for x, y in zip(xs, ys)) / ss if ss else 1.0
    return a, b, r2


def fit2(xs, ps, ys):
    """Least squares y = a + b x + c p (normal equations, Cramer's rule); returns a, b, c, r^2. Falls back to
    :func:`fit` (c = 0) where p is a multiple of x (ring, sampled: the same pings per node at every size)."""
    n = float(len(xs))
    sx, sp, sy = sum(xs), sum(ps), sum(ys)
    sxx = sum(x * x for x in xs)
    spp = sum(p * p for p in ps)
    sxp = sum(x * p for x, p in zip(xs, ps))
    sxy = sum(x * y for x, y in zip(xs, ys))
    spy = sum(p * y for p, y in zip(ps, ys))
    m = [[n, sx, sp], [sx, sxx, sxp], [sp, sxp, spp]]

    def det(a):
        return (a[0][0] * (a[1][1] * a[2][2] - a[1][2] * a[2][1]) - a[0][1] * (a[1][0] * a[2][2] - a[1][2] * a[2][0])
                + a[0][2] * (a[1][0] * a[2][1] - a[1][1] * a[2][0]))
    d = det(m)
    if len(xs) < 3 or abs(d) < 1e-9 * max(1.0, abs(n * sxx * spp)):
        a, b, r2 = fit(xs, ys)
        return a, b, 0.0, r2
    rhs = [sy, sxy, spy]
    coef = []
    for col in range(3):
        mc = [row[:] for row in m]
        for i in range(3):
            mc[i][col] = rhs[i]
        coef.append(det(mc) / d)
    a, b, c = coef
    my = sy / n
    ss = sum((y - my) ** 2 for y in ys)
    r2 = 1 - sum((y - a - b * x - c * p) ** 2 for x, p, y in zip(xs, ps, ys)) / ss if ss else 1.0
    return a, b, c, r2


def total_pings(strategy, n):
    """The run's pings at ``n`` nodes under ``strategy`` (k 2, seed 0, round 0: what scale runs)."""
    return npu_network.ping_coverage(sim_ips(n), strategy, 2, 0, 0)['pings']


# Strategies whose pings per node grow with N (their controller cost gets a term per ping in the fit).
PINGS_GROW = ('same_index', 'full_mesh')
# The sizes the projection of 2026-12-05 was fitted on (2-16 nodes); larger measured sizes check it.
FIT_CHECK_UP_TO = 16


def load(path, forks, poll):
    rows = {}
    for line in Path(path).read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            if row['forks'] == forks and row.get('poll', 0.001) == poll:
                rows[(row['strategy'], row['nodes'])] = row  # the latest measurement of each size wins
    return rows


def cmd_table(args):
    rows = load(args.results, args.forks or forks(), POLL[0])
    if not rows:
        sys.exit('no measurements in %s: run the scale command first' % args.results)
    strategies = [s for s in npu_network.STRATEGIES if any(k[0] == s for k in rows)]
    any_row = next(iter(rows.values()))
    print('verify_network.yml on the SIMULATED mock cluster: stub latency %d ms per hccn_tool call, 8 NPUs per node, '
          'median of %d runs, forks %s; MEASURED on a %d-core machine that all mock nodes and the controller share '
          '(load: 1-minute load average before the runs)'
          % (any_row['latency_ms'], any_row['runs'], any_row['forks'], any_row['cores']))
    header = ('strategy', 'nodes', 'wall s', 'ctrl CPU-s/node', 'main CPU-s/node', 'node CPU-s/node', 'pings/node',
              'load', 'floor ctrl/node', 'floor node/node', 'mem MB')
    print('%-10s %5s %8s %15s %15s %15s %10s %5s %15s %15s %7s' % header)
    fits = {}
    for strategy in strategies:
        sizes = sorted(n for s, n in rows if s == strategy)
        for n in sizes:
            r = rows[(strategy, n)]
            print('%-10s %5d %8.2f %15.3f %15.3f %15.3f %10d %5.1f %15s %15s %7s'
                  % (strategy, n, r['wall'], r['controller'] / n, r['main'] / n, r['node'] / n, r['pings'] // n,
                     r.get('load', 0.0), '%.3f' % (r['floor']['controller'] / n) if 'floor' in r else '-',
                     '%.3f' % (r['floor']['node'] / n) if 'floor' in r else '-',
                     '%.0f' % r['mem'] if 'mem' in r else '-'))
        if len(sizes) < 2:
            continue
        pick = [rows[(strategy, n)] for n in sizes]
        # A pings term only where the pings per node grow with N; elsewhere P is left collinear with N (linear fit).
        pings = [float(r['pings']) for r in pick] if strategy in PINGS_GROW else [float(n) for n in sizes]
        small = [i for i, n in enumerate(sizes) if n <= FIT_CHECK_UP_TO]
        fits[strategy] = {
            'controller': fit2(sizes, pings, [r['controller'] for r in pick]),
            'main': fit2(sizes, pings, [r['main'] for r in pick]),
            'check': [(n, fit([sizes[i] for i in small], [pick[i]['controller'] for i in small]),
                       fit([sizes[i] for i in small], [pick[i]['floor']['controller'] for i in small])
                       if all('floor' in pick[i] for i in small) else None, rows[(strategy, n)])
                      for n in sizes if n > FIT_CHECK_UP_TO and len(small) >= 2],
            'node': fit(sizes, [r['node'] / r['nodes'] for r in pick]),
            'pings': fit(sizes, [r['pings'] / float(r['nodes']) for r in pick]),
            'latency_ms': pick[0]['latency_ms'],
            'sizes': sizes,
            'node_mean': statistics.mean(r['node'] / r['nodes'] for r in pick),
        }
        if all('floor' in r for r in pick):
            fits[strategy]['floor'] = fit2(sizes, pings, [r['floor']['controller'] for r in pick])
            fits[strategy]['floor_node'] = fit(sizes, [r['floor']['node'] / r['nodes'] for r in pick])
            fits[strategy]['floor_node_mean'] = statistics.mean(r['floor']['node'] / r['nodes'] for r in pick)
    with_mem = [r for r in rows.values() if 'mem' in r]
    if with_mem:
        worst = max(with_mem, key=lambda r: r['mem'])
        print('mem MB: the most memory a run took from the machine (the drop of MemAvailable during it: controller, '
              'forks, ssh and mock nodes), the worst of the runs. Largest: %.0f MB (%s, %d nodes) of MemTotal %.0f MB;'
              ' the largest single controller process %.0f MB.'
              % (worst['mem'], worst['strategy'], worst['nodes'], meminfo('MemTotal') / 1048576.0,
                 max(r['rss'] for r in with_mem)))
    print()
    print('fit cost = a + b*N [+ c*P, P the run\'s pings, where the pings per node grow with N] (least squares over '
          'every size above)')
    for strategy, f in fits.items():
        for key, label in (('controller', 'controller CPU-s, whole run'), ('main', 'of it the main process  '),
                           ('floor', "Ansible's floor, controller"), ('node', 'node CPU-s per node      '),
                           ('floor_node', "floor's node CPU-s per node")):
            if key not in f:
                continue
            if len(f[key]) == 4:
                a, b, cp, r2 = f[key]
                print('  %-10s %s: a = %7.3f, b = %7.4f per node%s (r^2 %.3f)'
                      % (strategy, label, a, b, ', c = %.6f per ping' % cp if cp else '', r2))
            else:
                a, b, r2 = f[key]
                print('  %-10s %s: a = %7.3f, b = %7.4f per node (r^2 %.3f)' % (strategy, label, a, b, r2))
    checks = [(strategy, c_) for strategy, f in fits.items() for c_ in f['check']]
    if checks:
        print()
        print('fit check: the linear fit of the sizes up to %d (what the projection used before sizes beyond it were '
              'measured) against the sizes measured beyond it, controller CPU-s per node; MEASURED on one machine '
              'that hosts the controller and every node: wall times there are an upper bound, CPU seconds are the '
              'figures to read' % FIT_CHECK_UP_TO)
        for strategy, (n, ours, floor, r) in checks:
            proj = (ours[0] + ours[1] * n) / n
            meas = r['controller'] / n
            line = '  %-10s %3d nodes: projected %.3f, measured %.3f (%+.0f%%)' % (
                strategy, n, proj, meas, 100.0 * (meas / proj - 1))
            if floor is not None and 'floor' in r:
                fproj = (floor[0] + floor[1] * n) / n
                fmeas = r['floor']['controller'] / n
                line += '; the floor projected %.3f, measured %.3f (%+.0f%%); ours over the floor measured %+.3f' % (
                    fproj, fmeas, 100.0 * (fmeas / fproj - 1), meas - fmeas)
            print(line)
    c = args.controller_cores
    cfg_forks = int(any_row['forks'] or 5)
    print()
    print('PROJECTION (not measured) to %s nodes with a controller of C = %d cores, from the fits above. Assumptions:'
          % (', '.join(str(n) for n in args.project), c))
    print('  - every node has its own cores: one module stage of a node takes its share of the fitted node CPU, then')
    print('    the stub latency (queries: one round; pings: ceil(pings per node / %d workers) rounds);' % MAX_WORKERS)
    print('  - with F forks a task reaches the nodes in ceil(N / F) waves, each taking a node\'s stage time;')
    print('  - the controller spends its fitted CPU; the main process is serial, the rest (forks, ssh) spreads over')
    print('    min(C, F) cores; wall = main + rest / min(C, F) + waves x node time (no overlap assumed: conservative);')
    print('  - a fitted node slope <= 0 (noise: the work per node is the same) is taken as flat: the measured mean;')
    print('  - SSH latency to the nodes and the network between them are not modelled (loopback here);')
    print('  - node CPU includes the mock stubs (about 3 ms per call, a Python server; the real hccn_tool is C).')
    print('%-10s %5s %15s %11s %15s %15s %10s'
          % ('strategy', 'nodes', 'ctrl CPU-s/node', 'node CPU-s', 'wall s F=%d' % cfg_forks, 'wall s F=N',
             'pings/node'))
    for strategy, f in fits.items():
        for n in args.project:
            p_n = total_pings(strategy, n) if strategy in PINGS_GROW else 0
            ctrl = f['controller'][0] + f['controller'][1] * n + f['controller'][2] * p_n
            main = f['main'][0] + f['main'][1] * n + f['main'][2] * p_n
            node = f['node'][0] + f['node'][1] * n if f['node'][1] > 0 else f['node_mean']
            pings = npu_network.ping_coverage(sim_ips(n), strategy, 2, 0, 0)['pings'] / float(n)
            latency = f['latency_ms'] / 1000.0 * (1 + math.ceil(pings / MAX_WORKERS))
            walls = []
            for forks_n in (cfg_forks, n):
                par = max(1, min(c, forks_n))
                walls.append(main + max(0.0, ctrl - main) / par + math.ceil(n / float(forks_n)) * (node + latency))
            row = (strategy, n, ctrl / n, node, walls[0], walls[1], pings)
            print('%-10s %5d %15.3f %11.3f %15.1f %15.1f %10d' % row)
    print()
    print('goals: controller CPU <= 0.3 s per node; node cost flat in N for ring and sampled; 64 nodes with ring '
          '<= 30 s (projected)')
    for strategy, f in fits.items():
        p64 = total_pings(strategy, 64) if strategy in PINGS_GROW else 0
        ctrl64 = (f['controller'][0] + f['controller'][1] * 64 + f['controller'][2] * p64) / 64
        node_b = f['node'][1]
        span = f['sizes'][-1] - f['sizes'][0]
        growth = node_b * span / max(f['node_mean'], 1e-9)
        # The floor runs the same modules with the same targets on the same nodes: the node work per node is the
        # same, so what its node cost does with N is the shared machine (contention), which ours shares too.
        floor_growth = (f['floor_node'][1] * span / max(f['floor_node_mean'], 1e-9)) if 'floor_node' in f else None
        if node_b <= 0:
            verdict = 'flat (no growth measured)'
        elif growth <= 0.1:
            verdict = 'flat (%+.0f%% from %d to %d nodes)' % (100 * growth, f['sizes'][0], f['sizes'][-1])
        elif floor_growth is not None and growth - floor_growth <= 0.05:
            verdict = ('flat against the floor (%+.0f%% from %d to %d nodes, the floor\'s identical node work %+.0f%%: '
                       'the shared cores\' contention, not our work)'
                       % (100 * growth, f['sizes'][0], f['sizes'][-1], 100 * floor_growth))
        else:
            verdict = 'grows (%+.0f%% from %d to %d nodes%s)' % (
                100 * growth, f['sizes'][0], f['sizes'][-1],
                '' if floor_growth is None else '; the floor %+.0f%%' % (100 * floor_growth))
        print('  %-10s controller at 64 nodes %.3f CPU-s/node (%s); node cost slope %+.4f s per node: %s'
              % (strategy, ctrl64, 'met' if ctrl64 <= 0.3 else 'NOT MET', node_b, verdict))
        if 'floor' in f:
            floor64 = (f['floor'][0] + f['floor'][1] * 64 + f['floor'][2] * p64) / 64
            print('  %-10s   Ansible\'s floor (the same two module round trips, nothing else) at 64 nodes %.3f '
                  'CPU-s/node: ours is %+.3f (%.2fx)' % (strategy, floor64, ctrl64 - floor64, ctrl64 / floor64))


def cmd_floor(args):
    nodes = args.nodes[0] if args.nodes else 2
    strategy = args.strategies[0] if args.strategies else 'same_index'
    inv = cluster(nodes, args.latency_ms, strategy)
    report = str(REPO / '.sim' / 'bench-npu_network.json')
    ours_extra = {'npu_network_ping_strategy': strategy, 'npu_network_report_path': report,
                  'npu_network_ping_round': '0'}
    runs = {'ours': [], 'floor': [], 'naive': []}
    floor_inv = Path(str(inv) + '-floor')
    for path, where, extra in [(OURS, inv, ours_extra), (FLOOR, floor_inv, None)] + (
            [(NAIVE, inv, None)] if args.naive else []):
        playbook(path, where, extra, nodes)  # warm-up
    for _run in range(args.runs):
        runs['ours'].append(playbook(OURS, inv, ours_extra, nodes))
        runs['floor'].append(playbook(FLOOR, floor_inv, None, nodes))
    for _run in range(args.runs if args.naive else 0):
        runs['naive'].append(playbook(NAIVE, inv, None, nodes))
    print('verify_network.yml against Ansible\'s floor on the SIMULATED mock cluster (%d nodes, %s, stub latency '
          '%d ms, median of %d interleaved runs, forks %d, %d CPU cores)'
          % (nodes, strategy, args.latency_ms, args.runs, forks(), os.cpu_count() or 0)
          + ('' if POLL[0] == 0.001 else ', internal_poll_interval %s' % POLL[0]))
    med = dict((key, median_row(v)) for key, v in runs.items() if v)
    for key, label in (('floor', 'floor: hccn_facts + hccn_ping only'), ('ours', 'verify_network.yml'),
                       ('naive', 'naive transcription of the guide')):
        if key in med:
            m = med[key]
            print('  %-36s: %6.2f s wall, controller %5.2f CPU-s (main %5.2f), nodes %5.2f CPU-s'
                  % (label, m['wall'], m['controller'], m['main'], m['node']))
    print('  ours / floor, wall                  : %6.2fx (goal <= 1.2x)'
          % (med['ours']['wall'] / med['floor']['wall']))
    print('  ours / floor, controller CPU        : %6.2fx' % (med['ours']['controller'] / med['floor']['controller']))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('command', nargs='?', default='floor', choices=['scale', 'table', 'floor'])
    ap.add_argument('--nodes', type=lambda v: [int(x) for x in v.split(',')], default=None)
    ap.add_argument('--strategies', type=lambda v: v.split(','), default=None)
    ap.add_argument('--runs', type=int, default=3)
    ap.add_argument('--latency-ms', type=int, default=50)
    ap.add_argument('--results', type=Path, default=RESULTS)
    ap.add_argument('--controller-cores', type=int, default=8)
    ap.add_argument('--project', type=lambda v: [int(x) for x in v.split(',')], default=[64, 256])
    ap.add_argument('--forks', type=int, default=None, help='ANSIBLE_FORKS for the runs (default: ansible.cfg); '
                    'table: the rows measured with that setting')
    ap.add_argument('--poll-interval', type=float, default=None,
                    help="Ansible's internal_poll_interval for the runs (default 0.001); table: the rows with it")
    ap.add_argument('--naive', action='store_true', help='floor: also time the naive transcription')
    ap.add_argument('--no-floor', dest='floor', action='store_false',
                    help='scale: do not also run the floor playbook (interleaved) at each size and strategy')
    args = ap.parse_args()
    if args.forks:
        EXTRA_ENV['ANSIBLE_FORKS'] = str(args.forks)
    if args.poll_interval is not None:
        # No environment variable sets it: a copy of ansible.cfg next to it (relative paths still resolve).
        POLL[0] = args.poll_interval
        CONFIG[0] = REPO / '.bench-ansible.cfg'
        text = (REPO / 'ansible.cfg').read_text().replace(
            '[defaults]\n', '[defaults]\ninternal_poll_interval = %s\n' % args.poll_interval, 1)
        CONFIG[0].write_text(text)
    try:
        run_command(args)
    finally:
        if CONFIG[0] != REPO / 'ansible.cfg':
            CONFIG[0].unlink()


def run_command(args):
    for s in args.strategies or []:
        if s not in npu_network.STRATEGIES:
            sys.exit('--strategies: %r is not one of %s' % (s, ', '.join(npu_network.STRATEGIES)))
    if args.command == 'scale':
        args.nodes = args.nodes or [2, 4, 8, 16]
        args.strategies = args.strategies or ['same_index', 'ring', 'sampled']
        args.results.parent.mkdir(parents=True, exist_ok=True)
        cmd_scale(args)
    elif args.command == 'table':
        cmd_table(args)
    else:
        cmd_floor(args)


if __name__ == '__main__':
    main()
