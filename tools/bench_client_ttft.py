"""The built-in benchmark client's TTFT against the server's own (prints figures and ratios; asserts nothing).

Sends one step of the guide's benchmark (default 100 requests of 1024 input / 10 output tokens at concurrency 25,
streaming chat, ignore_eos) with the collection's client (plugins/module_utils/_loadgen.py) to one vLLM URL,
scrapes its /metrics before and after, and prints the client's mean / p50 / p90 TTFT next to the server-side
ones from the change of `vllm:time_to_first_token_seconds` (mean = sum / count, p50 / p90 from the buckets).
Target: client mean within 5% of the server-side mean (ratio <= 1.05).

Where the rest goes: run it again with ``--concurrency 1``. Alone, the gap is the fixed cost of one request
outside vLLM's clock (the client's send, the API server's HTTP parsing and chat template, the SSE path back);
what it adds at concurrency 25 is queueing for the two cores (client threads, API server, engine).

Usage (against a URL on loopback or on the mock cluster, inside the mock-cluster lock for the latter):
    python tools/bench_client_ttft.py --url http://127.0.0.1:8000 [--requests 100] [--concurrency 25]
        [--input-tokens 1024] [--output-tokens 10] [--runs 3] [--label TEXT]
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def load_loadgen():
    sys.path.insert(0, str(REPO / '.collections'))  # the checkout as ansible_collections.ascend.kvpool
    from ansible_collections.ascend.kvpool.plugins.module_utils import _loadgen
    return _loadgen


def scrape(lg, url):
    text, error = lg.get_text(url.rstrip('/') + '/metrics', timeout=30.0)
    if text is None:
        sys.exit('cannot scrape %s/metrics: %s' % (url, error))
    from ansible_collections.ascend.kvpool.plugins.module_utils import _prometheus
    return _prometheus.parse(text, [lg.SERVER_TTFT_METRIC])


def one_run(lg, args, seed, model, counter):
    data = lg.make_dataset(seed, args.requests, args.input_tokens, counter)
    before = scrape(lg, args.url)
    results, wall = lg.run_load(args.url, model, data['prompts'], args.concurrency, args.output_tokens)
    after = scrape(lg, args.url)
    summary = lg.summarize(results, wall, args.output_tokens)
    server = lg.server_ttft(lg.diff(before, after))
    return summary, server


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n', maxsplit=1)[0])
    parser.add_argument('--url', required=True)
    parser.add_argument('--requests', type=int, default=100)
    parser.add_argument('--concurrency', type=int, default=25)
    parser.add_argument('--input-tokens', type=int, default=1024)
    parser.add_argument('--output-tokens', type=int, default=10)
    parser.add_argument('--runs', type=int, default=3)
    parser.add_argument('--seed', type=int, default=int(time.time()))
    parser.add_argument('--label', default='')
    args = parser.parse_args()
    lg = load_loadgen()
    model = lg.served_models(args.url)[0]
    counter = lg.tokenize_counter(args.url, model)
    print('client vs server TTFT%s: %s, %d requests x %d tokens, concurrency %d, %d output tokens, %d run(s)'
          % (' [%s]' % args.label if args.label else '', args.url, args.requests, args.input_tokens,
             args.concurrency, args.output_tokens, args.runs))
    ratios = []
    for run in range(args.runs):
        # a new seed per run: every run is cold (no prefix hit from the one before)
        summary, server = one_run(lg, args, args.seed + 1000 * run, model, counter)
        ttft = summary['ttft_ms']
        if not server or not server['mean_ms'] or summary['failed']:
            print('run %d: no server-side TTFT or failed requests: %s %s' % (run + 1, server, summary['errors']))
            continue
        ratio = ttft['mean'] / server['mean_ms']
        ratios.append(ratio)
        print('run %d: client mean %.1f / p50 %.1f / p90 %.1f ms; server mean %.1f / p50 %.1f / p90 %.1f ms '
              '(%d observed); client/server mean %.3f (%+.1f%%)'
              % (run + 1, ttft['mean'], ttft['median'], ttft['p90'], server['mean_ms'], server['p50_ms'] or 0,
                 server['p90_ms'] or 0, server['count'], ratio, 100 * (ratio - 1)))
    if ratios:
        med = statistics.median(ratios)
        print('median client/server mean TTFT ratio %.3f (target <= 1.05): %s'
              % (med, 'within target' if med <= 1.05 else 'MISSES the target'))
    return 0


if __name__ == '__main__':
    sys.exit(main())
