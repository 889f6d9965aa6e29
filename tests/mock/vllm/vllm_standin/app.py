"""`vllm serve` start-up, serving and shutdown for the SIMULATED stand-in.

Order as in vLLM: parse args (argparse errors, exit 2) -> bind the API socket (port clash fails here) ->
ModelConfig (config.json) -> engine core: NPU workers (visible devices), KV connector (name, Mooncake backend
from MOONCAKE_CONFIG_PATH, store setup), model load (--sim-startup-s), KV cache -> listen, serve.
Any start-time failure prints its message, closes what was opened and exits non-zero without ever listening.
SIGTERM / SIGINT: stop serving, close the Mooncake store, exit 0.
"""

import errno
import os
import signal
import sys
import threading
import time
import traceback

from . import SIMULATED_NOTE, checks, log, reported_version
from .engine import Engine
from .metrics import Metrics
from .pool import MooncakePool, MooncakeStoreConfig
from .server import ApiError, Server

ASCEND_DEFAULT_BLOCK_SIZE = 128
DEFAULT_MAX_NUM_SEQS = 256
DEFAULT_MAX_NUM_BATCHED_TOKENS = 8192
FALLBACK_MAX_MODEL_LEN = 32768


class App:
    def __init__(self, args, model, served_names, max_model_len, engine, metrics, api_keys):
        self.args = args
        self.model = model
        self.served_names = served_names
        self.max_model_len = max_model_len
        self.engine = engine
        self.metrics = metrics
        self.api_keys = api_keys
        self.access_log = not args.disable_uvicorn_access_log
        self.created = int(time.time())

    def models(self):
        data = []
        for name in self.served_names:
            data.append({
                "id": name, "object": "model", "created": self.created, "owned_by": "vllm", "root": self.model,
                "parent": None, "max_model_len": self.max_model_len,
                "permission": [{
                    "id": "modelperm-%s" % name, "object": "model_permission", "created": self.created,
                    "allow_create_engine": False, "allow_sampling": True, "allow_logprobs": True,
                    "allow_search_indices": False, "allow_view": True, "allow_fine_tuning": False,
                    "organization": "*", "group": None, "is_blocking": False}],
            })
        return {"object": "list", "data": data}

    def metrics_text(self):
        if self.args.disable_log_stats:
            return "# SIMULATED vLLM stand-in: --disable-log-stats, no stat loggers (as vLLM)\n"
        return self.metrics.render()

    def check_model(self, name):
        if name in (None, ""):
            return self.served_names[0]
        if name not in self.served_names:
            raise ApiError(404, "The model `%s` does not exist." % name, kind="NotFoundError", param="model")
        return name

    def chat_text(self, messages):
        if not isinstance(messages, list) or not messages:
            raise ApiError(400, "[{'type': 'missing', 'loc': ('body', 'messages'), 'msg': 'Field required'}]")
        flat = []
        for message in messages:
            if not isinstance(message, dict) or "role" not in message:
                raise ApiError(400, "Each message needs a 'role' and a 'content'")
            content = message.get("content")
            if content is None:
                content = ""
            elif isinstance(content, list):
                texts = []
                for part in content:
                    if isinstance(part, dict) and part.get("type") == "text":
                        texts.append(str(part.get("text", "")))
                    else:
                        raise ApiError(400, "[sim] only text content parts are simulated")
                content = " ".join(texts)
            elif not isinstance(content, str):
                raise ApiError(400, "message content must be a string or a list of content parts")
            flat.append({"role": str(message["role"]), "content": content})
        return self.engine.tokenizer.chat_prompt(flat)

    def prompt_ids(self, prompt):
        if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
            prompt = prompt[0]
        if isinstance(prompt, str):
            ids = self.engine.tokenizer.encode(prompt)
        elif isinstance(prompt, list) and prompt and all(isinstance(t, int) and not isinstance(t, bool)
                                                         for t in prompt):
            ids = list(prompt)
        elif isinstance(prompt, list) and len(prompt) > 1:
            raise ApiError(400, "[sim] batched prompts (a list of several prompts) are not simulated")
        else:
            raise ApiError(400, "prompt must be a string, a list of token ids, or a list with one of them")
        if not ids:
            raise ApiError(400, "The prompt cannot be empty")
        return ids

    def sampling_params(self, body, prompt_len, chat):
        if prompt_len >= self.max_model_len:
            raise ApiError(400, "The decoder prompt (length %d) is longer than the maximum model length of %d. "
                                "Make sure that `max_model_len` is no smaller than the number of text tokens."
                           % (prompt_len, self.max_model_len))
        max_tokens = body.get("max_completion_tokens") if chat else None
        if max_tokens is None:
            max_tokens = body.get("max_tokens")
        if max_tokens is None:
            max_tokens = self.max_model_len - prompt_len
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
            raise ApiError(400, "max_tokens must be at least 1, got %r." % (max_tokens,), param="max_tokens")
        if prompt_len + max_tokens > self.max_model_len:
            raise ApiError(400, "'max_tokens' or 'max_completion_tokens' is too large: %d. This model's maximum "
                                "context length is %d tokens and your request has %d input tokens (%d > %d - %d)."
                           % (max_tokens, self.max_model_len, prompt_len, max_tokens, self.max_model_len,
                              prompt_len), param="max_tokens")
        temperature = body.get("temperature")
        if temperature is not None:
            if not isinstance(temperature, (int, float)) or isinstance(temperature, bool) or temperature < 0:
                raise ApiError(400, "temperature must be non-negative, got %r." % (temperature,),
                               param="temperature")
        top_p = body.get("top_p")
        if top_p is not None and (not isinstance(top_p, (int, float)) or not 0 < top_p <= 1):
            raise ApiError(400, "top_p must be in (0, 1], got %r." % (top_p,), param="top_p")
        n = body.get("n", 1)
        if n != 1:
            raise ApiError(400, "[sim] n=%r: only n=1 is simulated" % (n,), param="n")
        return {"max_tokens": max_tokens, "ignore_eos": bool(body.get("ignore_eos", False))}


def _print_exception_tail(exc_type, message, lines=()):
    for line in lines:
        log.raw(line, sys.stderr)
    text = "%s: %s" % (exc_type, message) if message else exc_type
    log.raw(text, sys.stderr)


def _fail_engine(exc):
    """An engine-core start failure: root cause, then vLLM's final line; exit status 1."""
    log.error("core.py", "EngineCore failed to start.")
    if isinstance(exc, checks.StartupError):
        _print_exception_tail(exc.exc_type, str(exc), exc.lines)
    else:
        log.raw("".join(traceback.format_exception(type(exc), exc, exc.__traceback__)).rstrip(), sys.stderr)
    log.raw("RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}",
            sys.stderr)
    return 1


def run(args, argv):
    stop = threading.Event()

    def on_signal(signum, _frame):
        log.raw("INFO:     Received %s, shutting down" % signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    version = checks.emulated()
    log.info("api_server.py", "vLLM API server version %s" % reported_version())
    log.info("utils.py", "non-default args: %s" % " ".join(argv[1:]))
    log.warning("standin", SIMULATED_NOTE + " (tests/mock/vllm/README.md)")
    if getattr(args, "disable_log_requests", False):
        log.warning("arg_utils.py", "`--disable-log-requests` is deprecated and has been replaced with "
                    "`--enable-log-requests`. This will be removed in v0.12.0.")

    model = args.model_tag or args.model or "Qwen/Qwen3-0.6B"
    served_names = args.served_model_name or [model]
    api_keys = args.api_key or ([os.environ["VLLM_API_KEY"]] if os.environ.get("VLLM_API_KEY") else None)

    host = args.host or ""
    server = Server((host, args.port), None)
    try:
        server.server_bind()
    except OSError as exc:
        server.server_close()
        _print_exception_tail("OSError", "[Errno %d] %s" % (exc.errno or errno.EADDRINUSE, exc.strerror or exc),
                              ["[sim] binding the API server socket (%r, %d), as vLLM does before starting the "
                               "engine" % (host, args.port)])
        return 1

    pool = None
    lookup = None
    engine = None
    try:
        try:
            hf_config = checks.check_model_dir(model)
        except checks.StartupError as exc:
            _print_exception_tail(exc.exc_type, str(exc), exc.lines)
            return 1
        derived = hf_config.get("max_position_embeddings")
        max_model_len = args.max_model_len if args.max_model_len not in (None, -1) else (derived or
                                                                                         FALLBACK_MAX_MODEL_LEN)
        if derived and max_model_len > derived and os.environ.get("VLLM_ALLOW_LONG_MAX_MODEL_LEN") != "1":
            _print_exception_tail("ValueError", "User-specified max_model_len (%d) is greater than the derived "
                                  "max_model_len (max_position_embeddings=%d or model_max_length=None in model's "
                                  "config.json). To allow overriding this maximum, set the env var "
                                  "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1." % (max_model_len, derived))
            return 1
        if not 0 < args.gpu_memory_utilization <= 1:
            _print_exception_tail("ValueError", "GPU memory utilization must be less than 1.0. Got %s."
                                  % args.gpu_memory_utilization)
            return 1
        args.block_size = args.block_size or ASCEND_DEFAULT_BLOCK_SIZE
        args.max_num_seqs = args.max_num_seqs or DEFAULT_MAX_NUM_SEQS
        args.max_num_batched_tokens = args.max_num_batched_tokens or DEFAULT_MAX_NUM_BATCHED_TOKENS
        kv = args.kv_transfer_config
        log.info("core.py", "Initializing a V1 LLM engine (v%s) with config: model=%r, served_model_name=%s, "
                 "dtype=%s, max_seq_len=%d, tensor_parallel_size=%d, pipeline_parallel_size=%d, "
                 "data_parallel_size=%d, block_size=%d, enable_prefix_caching=%s, kv_transfer_config=%s"
                 % (reported_version(), model, served_names[0], args.dtype, max_model_len,
                    args.tensor_parallel_size, args.pipeline_parallel_size, args.data_parallel_size,
                    args.block_size, args.enable_prefix_caching is not False, kv))

        metrics = Metrics(served_names[0])
        try:
            checks.check_devices(args.tensor_parallel_size, args.pipeline_parallel_size, args.data_parallel_size)
            extra = {}
            if kv and kv.get("kv_connector"):
                extra = checks.check_connector(kv, version)
                config = MooncakeStoreConfig.load_from_env()
                if config.protocol == "tcp":
                    log.info("mooncake_backend.py", "[sim] protocol 'tcp' accepted: the mock nodes have no Ascend "
                             "transport (recent vllm-ascend accepts only 'ascend')")
                elif config.protocol != "ascend":
                    raise NotImplementedError("MooncakeBackend does not support protocol %r." % config.protocol)
                pool = MooncakePool(config, args.sim_kv_bytes_per_block, args.sim_put_placement)
                lookup = checks.LookupSocket(checks.lookup_ipc_path(extra))
            model_name_for_keys = model.rstrip("/").split("/")[-1]
            engine = Engine(args, model_name_for_keys, metrics, pool=pool,
                            kv_role=(kv or {}).get("kv_role", "kv_both"), extra=extra, kv_config=kv)
        except Exception as exc:  # noqa: BLE001 - every start failure ends the process the same way
            return _fail_engine(exc)
        metrics.cache_usage = engine.device.usage
        if os.environ.get("PYTHONHASHSEED") is None:
            log.info("kv_cache_utils.py", "[sim] PYTHONHASHSEED unset: NONE_HASH is random for this process, so "
                     "its block hashes match no other instance's (real vLLM says nothing about this)")

        log.info("gpu_model_runner.py", "[sim] loading model %s (simulated, %.1f s)" % (model, args.sim_startup_s))
        if stop.wait(max(0.0, args.sim_startup_s)):
            return 0
        tokens = args.sim_device_blocks * args.block_size
        log.info("kv_cache_utils.py", "GPU KV cache size: %d tokens [sim: --sim-device-blocks %d x block %d]"
                 % (tokens, args.sim_device_blocks, args.block_size))
        log.info("kv_cache_utils.py", "Maximum concurrency for %d tokens per request: %.2fx"
                 % (max_model_len, tokens / float(max_model_len)))

        app = App(args, model, served_names, max_model_len, engine, metrics, api_keys)
        server.app = app
        server.server_activate()
        shown_host = args.host or "0.0.0.0"
        log.info("api_server.py", "Starting vLLM API server 0 on http://%s:%d" % (shown_host, args.port))
        log.raw("INFO:     Started server process [%d]" % os.getpid())
        log.raw("INFO:     Waiting for application startup.")
        log.raw("INFO:     Application startup complete.")
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True)
        thread.start()
        stats = threading.Thread(target=_stats_loop, args=(app, stop), daemon=True)
        if not args.disable_log_stats:
            stats.start()
        stop.wait()
        log.raw("INFO:     Shutting down")
        server.shutdown()
        log.raw("INFO:     Waiting for application shutdown.")
        log.raw("INFO:     Application shutdown complete.")
        log.raw("INFO:     Finished server process [%d]" % os.getpid())
        return 0
    finally:
        server.server_close()
        if engine is not None:
            engine.stop()
        if lookup is not None:
            lookup.close()
        if pool is not None:
            pool.close()


def _stats_loop(app, stop):
    """vLLM's periodic engine stats line (every 10 s while there is activity)."""
    interval = float(os.environ.get("VLLM_LOG_STATS_INTERVAL", "10"))
    last = app.metrics.snapshot()[0]
    last_time = time.monotonic()
    while not stop.wait(interval):
        now_values, running, waiting = app.metrics.snapshot()
        now = time.monotonic()
        delta = {k: now_values[k] - last.get(k, 0) for k in now_values}
        if any(delta[k] for k in ("prompt_tokens", "generation_tokens")) or running or waiting:
            span = max(1e-6, now - last_time)
            pq, ph = delta["prefix_queries"], delta["prefix_hits"]
            eq, eh = delta["external_queries"], delta["external_hits"]
            line = ("Engine 000: Avg prompt throughput: %.1f tokens/s, Avg generation throughput: %.1f tokens/s, "
                    "Running: %d reqs, Waiting: %d reqs, GPU KV cache usage: %.1f%%, Prefix cache hit rate: %.1f%%"
                    % (delta["prompt_tokens"] / span, delta["generation_tokens"] / span, running, waiting,
                       100 * app.metrics.cache_usage(), 100.0 * ph / pq if pq else 0.0))
            if app.engine.pool is not None:
                line += ", External prefix cache hit rate: %.1f%%" % (100.0 * eh / eq if eq else 0.0)
            log.info("loggers.py", line + " [sim timings]")
        last, last_time = now_values, now
