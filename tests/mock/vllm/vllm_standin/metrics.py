"""GET /metrics in Prometheus text format with vLLM v1's metric names, labels, help texts and buckets
(vllm/v1/metrics/loggers.py), each HELP prefixed `[SIMULATED vLLM stand-in]`. Exposed as prometheus_client
does for vLLM (seen on the real engine, tests/conformance/ and tests/unit/plugins/module_utils/fixtures/vllm/):
labels in name order (`engine`, `le`, `model_name`), and a `<name>_created` gauge (creation time, seconds since
the epoch) after every counter and histogram. Counts follow vLLM's
definitions (tokens, not blocks); timings are those of the simulation. `kvpool_sim_*` metrics are stand-in
extras (where pool hits were loaded from) and exist in no real vLLM. ``http_requests_total{handler,method,status}``
is what vLLM's prometheus-fastapi-instrumentator counts (status grouped as 2xx/4xx/5xx; /metrics, /health, /load,
/ping, /version and /server_info not counted; a route that does not exist counted as handler "none"), seen in the
recording of the real engine.
"""

import threading
import time

TTFT_BUCKETS = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
                20.0, 40.0, 80.0, 160.0, 640.0, 2560.0]
TPOT_BUCKETS = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
                40.0, 80.0]
E2E_BUCKETS = [0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0,
               480.0, 960.0, 1920.0, 7680.0]

SIM = "[SIMULATED vLLM stand-in] "
# Routes vLLM's instrumentator leaves out (vllm/entrypoints/openai/api_server.py, excluded_handlers).
HTTP_EXCLUDED = ("/metrics", "/health", "/load", "/ping", "/version", "/server_info")

COUNTERS = [
    ("prefix_queries", "vllm:prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens."),
    ("prefix_hits", "vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens."),
    ("external_queries", "vllm:external_prefix_cache_queries",
     "External prefix cache queries from KV connector cross-instance cache sharing, in terms of number of "
     "queried tokens."),
    ("external_hits", "vllm:external_prefix_cache_hits",
     "External prefix cache hits from KV connector cross-instance cache sharing, in terms of number of "
     "cached tokens."),
    ("prompt_tokens", "vllm:prompt_tokens", "Number of prefill tokens processed."),
    ("generation_tokens", "vllm:generation_tokens", "Number of generation tokens processed."),
]
LOAD_HELP = ("Pool-hit tokens loaded, by where the real replica lived: own_segment = this instance's Mooncake "
             "segment (local DRAM), other_segment = another instance's segment (another node).")
SIM_COUNTERS = [
    ("pool_load_tokens_own", "kvpool_sim_pool_load_tokens", {"source": "own_segment"},
     LOAD_HELP),
    ("pool_load_tokens_other", "kvpool_sim_pool_load_tokens", {"source": "other_segment"},
     LOAD_HELP),
    ("pool_put_keys", "kvpool_sim_pool_put_keys", {}, "Keys put into the Mooncake pool (real puts)."),
    ("pool_load_failures", "kvpool_sim_pool_load_failures", {}, "Pool loads that failed and were recomputed."),
    ("pool_get_seconds", "kvpool_sim_pool_get_seconds", {}, "Real time spent in Mooncake batch gets."),
]


class Histogram:
    def __init__(self, buckets):
        self.buckets = buckets
        self.counts = [0] * len(buckets)
        self.count = 0
        self.sum = 0.0

    def observe(self, value):
        self.count += 1
        self.sum += value
        for i, bound in enumerate(self.buckets):
            if value <= bound:
                self.counts[i] += 1


class Metrics:
    def __init__(self, model_name, cache_usage=lambda: 0.0):
        self.model_name = model_name
        self.cache_usage = cache_usage
        self._lock = threading.Lock()
        self.values = {entry[0]: 0 for entry in COUNTERS + SIM_COUNTERS}
        self.success = {"length": 0, "stop": 0, "abort": 0}
        self.running = 0
        self.waiting = 0
        self.put_pending = lambda: 0
        self.http = {}
        self.hist = {"ttft": Histogram(TTFT_BUCKETS), "tpot": Histogram(TPOT_BUCKETS), "e2e": Histogram(E2E_BUCKETS)}
        self.created = time.time()

    def inc(self, key, amount=1):
        with self._lock:
            self.values[key] += amount

    add = inc

    def inc_success(self, reason):
        with self._lock:
            self.success[reason] = self.success.get(reason, 0) + 1

    def count_http(self, handler, method, status):
        if handler in HTTP_EXCLUDED:
            return
        key = (handler, method, "%dxx" % (int(status) // 100))
        with self._lock:
            count, created = self.http.get(key, (0, time.time()))
            self.http[key] = (count + 1, created)

    def add_running(self, delta):
        with self._lock:
            self.running += delta

    def add_waiting(self, delta):
        with self._lock:
            self.waiting += delta

    def observe(self, name, value):
        with self._lock:
            self.hist[name].observe(value)

    def snapshot(self):
        with self._lock:
            return dict(self.values), self.running, self.waiting

    def render(self):
        base = {"engine": "0", "model_name": self.model_name}
        out = ["# SIMULATED: /metrics of the vLLM stand-in of the ascend.kvpool mock cluster "
               "(tests/mock/vllm/README.md); names, labels and token counting as vLLM v1, timings simulated."]

        def created(name, text, label_sets):
            out.extend(["# HELP %s_created %s%s" % (name, SIM, text), "# TYPE %s_created gauge" % name])
            out.extend("%s_created%s %s" % (name, _labels(extra), repr(self.created)) for extra in label_sets)

        with self._lock:
            gauges = [
                ("vllm:num_requests_running", "Number of requests in model execution batches.", self.running),
                ("vllm:num_requests_waiting", "Number of requests waiting to be processed.", self.waiting),
                ("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", self.cache_usage()),
                ("kvpool_sim_pool_put_pending", "Batches of KV blocks queued for the pool or being put by the "
                 "sending thread.", self.put_pending()),
            ]
            for name, text, value in gauges:
                out += ["# HELP %s %s%s" % (name, SIM, text), "# TYPE %s gauge" % name,
                        "%s%s %s" % (name, _labels(base), _num(value))]
            for key, name, text in COUNTERS:
                out += ["# HELP %s_total %s%s" % (name, SIM, text), "# TYPE %s_total counter" % name,
                        "%s_total%s %s" % (name, _labels(base), _num(self.values[key]))]
                created(name, text, [base])
            name = "vllm:request_success"
            text = "Count of successfully processed requests."
            out += ["# HELP %s_total %s%s" % (name, SIM, text), "# TYPE %s_total counter" % name]
            reasons = [dict(base, finished_reason=reason) for reason in ("stop", "length", "abort")]
            for labels in reasons:
                out.append("%s_total%s %s" % (name, _labels(labels),
                                              _num(self.success.get(labels["finished_reason"], 0))))
            created(name, text, reasons)
            for key, name, text in (
                    ("ttft", "vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds."),
                    ("tpot", "vllm:time_per_output_token_seconds", "Histogram of time per output token in seconds."),
                    ("e2e", "vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.")):
                hist = self.hist[key]
                out += ["# HELP %s %s%s" % (name, SIM, text), "# TYPE %s histogram" % name]
                for bound, count in zip(hist.buckets, hist.counts):
                    out.append("%s_bucket%s %s" % (name, _labels(dict(base, le=_num(float(bound)))), _num(count)))
                out.append("%s_bucket%s %s" % (name, _labels(dict(base, le="+Inf")), _num(hist.count)))
                out.append("%s_count%s %s" % (name, _labels(base), _num(hist.count)))
                out.append("%s_sum%s %s" % (name, _labels(base), repr(float(hist.sum))))
                created(name, text, [base])
            if self.http:
                text = "Total number of requests by method, status and handler."
                out += ["# HELP http_requests_total %s%s" % (SIM, text), "# TYPE http_requests_total counter"]
                series = [(dict(handler=h, method=m, status=s), v) for (h, m, s), v in self.http.items()]
                out.extend("http_requests_total%s %s" % (_labels(labels), _num(count))
                           for labels, (count, created) in series)
                out.extend(["# HELP http_requests_created %s%s" % (SIM, text), "# TYPE http_requests_created gauge"])
                out.extend("http_requests_created%s %s" % (_labels(labels), repr(created))
                           for labels, (count, created) in series)
            seen = set()
            for key, name, extra, text in SIM_COUNTERS:
                if name not in seen:
                    out += ["# HELP %s_total %s%s" % (name, SIM, text), "# TYPE %s_total counter" % name]
                    seen.add(name)
                out.append("%s_total%s %s" % (name, _labels(dict(base, **extra)), _num(self.values[key])))
        return "\n".join(out) + "\n"


def _labels(labels):
    """``{a="x",b="y"}`` in label-name order, as prometheus_client renders vLLM's series."""
    return "{%s}" % ",".join('%s="%s"' % (key, _escape(str(labels[key]))) for key in sorted(labels))


def _num(value):
    return repr(float(value))


def _escape(text):
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
