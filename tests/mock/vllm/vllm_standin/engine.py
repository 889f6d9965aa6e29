"""The stand-in engine: toy tokenizer, vLLM v1 block hashing, simulated NPU KV cache, KV pool connector.

REAL (as vLLM v1 / vllm-ascend do it):
  * block hashes chained over full blocks: hash(parent_hash, token_ids, None) with vLLM's `sha256` hash
    (sha256 of the pickled tuple); the first parent is NONE_HASH = sha256(PYTHONHASHSEED) when the variable is
    set and os.urandom(32) otherwise, so two processes agree only with the same PYTHONHASHSEED;
  * prefix-cache hits are leading full blocks, capped so that at least the last prompt token is computed;
  * the connector's lookup starts after the device hits and counts leading blocks whose keys (one per TP
    rank, vllm-ascend's key layout) all exist in the real pool; hits are loaded with a real batch get;
    newly computed full blocks are put (missing keys only) by a sending thread, as vllm-ascend's does;
  * metric counting: prefix-cache queries = prompt tokens, hits = device-hit tokens; external queries =
    prompt tokens - device hits, external hits = pool-hit tokens.
SIMULATED:
  * tokens: whitespace-separated words, ids from crc32; chat messages through a fixed toy template;
  * output: filler words; without ignore_eos a deterministic length stands in for the model's EOS;
  * the NPU KV cache: an LRU of --sim-device-blocks block hashes;
  * all durations (scaled by --sim-time-scale): prefill of computed tokens under one FIFO device lock in
    chunks of max-num-batched-tokens; pool loads: the real get (concurrent, unscaled) and then a simulated
    transfer under one FIFO transfer lock (the instance's link), costed per 1k tokens by where the real
    replica lives (own segment = local DRAM, other segment = another node); decode per output token
    outside the locks (batched decode).
"""

import collections
import hashlib
import os
import pickle
import queue
import threading
import time
import zlib

from . import log

TEMPLATE_START = "<|im_start|>"
TEMPLATE_END = "<|im_end|>"
FILLER_WORDS = (
    "alpha bravo charlie delta echo foxtrot golf hotel india juliett kilo lima mike november oscar papa "
    "quebec romeo sierra tango uniform victor whiskey xray yankee zulu"
).split()


def sha256_hash(value):
    """vLLM's `sha256` prefix-caching hash function (vllm/utils/hashing.py)."""
    return hashlib.sha256(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)).digest()


def init_none_hash():
    """vllm/v1/core/kv_cache_utils.py init_none_hash with the sha256 hash function."""
    seed = os.getenv("PYTHONHASHSEED")
    if seed is None:
        return os.urandom(32)
    return sha256_hash(seed)


def block_hashes(none_hash, token_ids, block_size):
    hashes = []
    parent = None
    for start in range(0, len(token_ids) - block_size + 1, block_size):
        parent = sha256_hash((parent or none_hash, tuple(token_ids[start:start + block_size]), None))
        hashes.append(parent)
    return hashes


class Tokenizer:
    """SIMULATED toy tokenizer: one token per whitespace-separated word, id = crc32(word)."""

    def __init__(self):
        self._ids = {}

    def encode(self, text):
        out = []
        ids = self._ids
        for word in text.split():
            tid = ids.get(word)
            if tid is None:
                tid = zlib.crc32(word.encode("utf-8"))
                if len(ids) < 1_000_000:
                    ids[word] = tid
            out.append(tid)
        return out

    @staticmethod
    def chat_prompt(messages):
        """Fixed toy template: `<|im_start|> ROLE CONTENT <|im_end|>` per message, then `<|im_start|> assistant`.
        Each message costs its content words + 3 tokens, plus 2 for the generation prompt."""
        parts = []
        for message in messages:
            parts.append("%s %s %s %s" % (TEMPLATE_START, message["role"], message["content"], TEMPLATE_END))
        parts.append("%s assistant" % TEMPLATE_START)
        return "\n".join(parts)


class FifoLock:
    """A lock granted in arrival order (device and transfer queues are FIFO)."""

    def __init__(self):
        self._cond = threading.Condition()
        self._next = 0
        self._serving = 0

    def __enter__(self):
        with self._cond:
            ticket = self._next
            self._next += 1
            while ticket != self._serving:
                self._cond.wait()
        return self

    def __exit__(self, *exc):
        with self._cond:
            self._serving += 1
            self._cond.notify_all()


class FifoSlots:
    """max-num-seqs: at most `size` running requests, the others wait in arrival order."""

    def __init__(self, size):
        self._cond = threading.Condition()
        self._size = size
        self._used = 0
        self._next = 0
        self._serving = 0

    def acquire(self):
        with self._cond:
            ticket = self._next
            self._next += 1
            while ticket != self._serving or self._used >= self._size:
                self._cond.wait()
            self._serving += 1
            self._used += 1
            self._cond.notify_all()

    def release(self):
        with self._cond:
            self._used -= 1
            self._cond.notify_all()


class DeviceCache:
    """SIMULATED NPU KV cache: an LRU of block hashes."""

    def __init__(self, capacity):
        self.capacity = max(1, capacity)
        self._lru = collections.OrderedDict()
        self._lock = threading.Lock()

    def leading_hits(self, hashes, limit):
        with self._lock:
            count = 0
            for block_hash in hashes[:limit]:
                if block_hash not in self._lru:
                    break
                self._lru.move_to_end(block_hash)
                count += 1
            return count

    def insert(self, hashes):
        with self._lock:
            for block_hash in hashes:
                self._lru[block_hash] = True
                self._lru.move_to_end(block_hash)
            while len(self._lru) > self.capacity:
                self._lru.popitem(last=False)

    def usage(self):
        with self._lock:
            return len(self._lru) / float(self.capacity)


class Sim:
    """Simulated durations in seconds (already multiplied by the time scale)."""

    def __init__(self, args):
        scale = args.sim_time_scale
        self.scale = scale
        self.prefill_per_token = args.sim_prefill_ms_per_1k_tokens * scale / 1e6
        self.decode_per_token = args.sim_decode_ms_per_token * scale / 1e3
        self.load_per_token = {
            "own": args.sim_pool_load_ms_per_1k_tokens * scale / 1e6,
            "other": args.sim_pool_remote_load_ms_per_1k_tokens * scale / 1e6,
        }


class KvLoadFailed(Exception):
    """SIMULATED: a pool load failed under kv_load_failure_policy=fail (vLLM fails the request instead of recomputing
    its blocks; the stand-in answers 500)."""


class Aborted(Exception):
    pass


class Engine:
    def __init__(self, args, model_name_for_keys, metrics, pool=None, kv_role="kv_both", extra=None, kv_config=None):
        self.block_size = args.block_size
        self.prefix_caching = args.enable_prefix_caching is not False
        self.max_batched = args.max_num_batched_tokens
        self.tp = args.tensor_parallel_size
        self.sim = Sim(args)
        self.tokenizer = Tokenizer()
        self.none_hash = init_none_hash()
        self.device = DeviceCache(args.sim_device_blocks)
        self.device_lock = FifoLock()
        self.transfer_lock = FifoLock()
        self.slots = FifoSlots(args.max_num_seqs)
        self.metrics = metrics
        self.pool = pool
        extra = extra or {}
        # SIMULATED: vLLM's default is fail; the stand-in recomputes unless fail is asked for explicitly (the drills of
        # the other scenarios kill the master under load and expect the recompute; tests/mock/vllm/README.md).
        self.load_failure_policy = str((kv_config or {}).get("kv_load_failure_policy") or "recompute")
        self.pool_put = pool is not None and (kv_role in ("kv_producer", "kv_both") or
                                              bool(extra.get("consumer_is_to_put", False)))
        self.key_prefix = [
            "%s@pcp0@dcp0@head_or_tp_rank:%d@pp_rank:0@group:0@cache_role:kv@cache_family:default@"
            % (model_name_for_keys, rank) for rank in range(self.tp)
        ]
        self._send_queue = queue.Queue()
        self._sender = None
        # SIMULATED gauge: batches of blocks queued for the pool or being put (a test waits for 0 before it asks
        # another node for those blocks; the sending thread is asynchronous, as in vllm-ascend).
        metrics.put_pending = lambda: self._send_queue.unfinished_tasks
        if self.pool_put:
            self._sender = threading.Thread(target=self._send_loop, name="KVCacheStoreSendingThread", daemon=True)
            self._sender.start()

    # --- pool keys ---------------------------------------------------------------------------------
    def keys_for(self, block_hash):
        hexed = block_hash.hex()
        return [prefix + hexed for prefix in self.key_prefix]

    def _send_loop(self):
        while True:
            item = self._send_queue.get()
            if item is None:
                return
            keys, payloads = item
            try:
                done = self.pool.put_missing(keys, payloads)
                self.metrics.inc("pool_put_keys", done)
            except Exception as exc:  # noqa: BLE001 - the real sending thread logs and goes on
                log.error("kv_transfer.py", "Failed to put keys: %s" % exc)
            finally:
                self._send_queue.task_done()

    def stop(self):
        if self._sender is not None:
            self._send_queue.put(None)
            self._sender.join(timeout=5)

    # --- one request -------------------------------------------------------------------------------
    def generate(self, token_ids, max_tokens, ignore_eos, seed_text, cancelled=lambda: False):
        """Yields (text, finish_reason) per output token; finish_reason is set on the last one."""
        arrival = time.monotonic()
        metrics = self.metrics
        metrics.add_waiting(1)
        self.slots.acquire()
        metrics.add_waiting(-1)
        metrics.add_running(1)
        try:
            yield from self._run(token_ids, max_tokens, ignore_eos, seed_text, arrival, cancelled)
        finally:
            metrics.add_running(-1)
            self.slots.release()

    def _run(self, token_ids, max_tokens, ignore_eos, seed_text, arrival, cancelled):
        metrics = self.metrics
        bs = self.block_size
        num_tokens = len(token_ids)
        hashes = block_hashes(self.none_hash, token_ids, bs)
        hit_limit = (num_tokens - 1) // bs  # at least the last prompt token is computed

        device_blocks = self.device.leading_hits(hashes, hit_limit) if self.prefix_caching else 0
        if self.prefix_caching:
            metrics.inc("prefix_queries", num_tokens)
            metrics.inc("prefix_hits", device_blocks * bs)

        pool_blocks = 0
        if self.pool is not None:
            candidates = hashes[device_blocks:hit_limit]
            if candidates:
                keys = [k for block_hash in candidates for k in self.keys_for(block_hash)]
                exist = self.pool.exists(keys)
                for i in range(len(candidates)):
                    if all(v == 1 for v in exist[i * self.tp:(i + 1) * self.tp]):
                        pool_blocks += 1
                    else:
                        break
            queries = num_tokens - device_blocks * bs
            if queries:
                metrics.inc("external_queries", queries)
                metrics.inc("external_hits", pool_blocks * bs)

        if cancelled():
            raise Aborted()

        loaded_blocks = 0
        if pool_blocks:
            loaded_blocks = self._load(hashes[device_blocks:device_blocks + pool_blocks])

        computed_from = (device_blocks + loaded_blocks) * bs
        to_compute = num_tokens - computed_from
        chunk = self.max_batched
        remaining = to_compute
        while remaining > 0:
            step = min(chunk, remaining)
            with self.device_lock:
                time.sleep(step * self.sim.prefill_per_token)
            remaining -= step
            if cancelled():
                raise Aborted()
        new_blocks = hashes[device_blocks + loaded_blocks:]
        if self.prefix_caching:
            self.device.insert(hashes[:device_blocks + loaded_blocks] + new_blocks)
        if self.pool_put and new_blocks:
            keys, payloads = [], []
            for block_hash in new_blocks:
                hexed = block_hash.hex()
                for key in self.keys_for(block_hash):
                    keys.append(key)
                    payloads.append(self.pool.payload(key, hexed, self.tp))
            self._send_queue.put((keys, payloads))

        first = time.monotonic()
        metrics.observe("ttft", first - arrival)
        metrics.inc("prompt_tokens", num_tokens)
        n_out = max_tokens if ignore_eos else min(max_tokens, eos_length(seed_text))
        finish = "length" if n_out == max_tokens else "stop"
        last = first
        seed = zlib.crc32(seed_text.encode("utf-8", "replace"))
        for i in range(n_out):
            if i:
                time.sleep(self.sim.decode_per_token)
                now = time.monotonic()
                metrics.observe("tpot", now - last)
                last = now
            metrics.inc("generation_tokens", 1)
            word = FILLER_WORDS[(seed + 7 * i) % len(FILLER_WORDS)]
            yield (" " + word, finish if i == n_out - 1 else None)
            if cancelled():
                raise Aborted()
        metrics.observe("e2e", time.monotonic() - arrival)
        metrics.inc_success(finish)

    def _load(self, hashes):
        """Real batch get of the pool hits, plus the simulated transfer time by replica location."""
        keys = [k for block_hash in hashes for k in self.keys_for(block_hash)]
        # the real round trips run concurrently with other requests' (the pool serves many clients at once) ...
        start = time.monotonic()
        try:
            locations = self.pool.locations(keys[::self.tp])
            values = self.pool.get(keys)[0]
        except Exception as exc:  # noqa: BLE001 - recompute, as kv_load_failure_policy=recompute would
            log.error("mooncake_backend.py", "Failed to get key %s, error:%s" % (keys[:3], exc))
            self.metrics.inc("pool_load_failures", 1)
            if self.load_failure_policy == "fail":
                raise KvLoadFailed("[sim] KV load from the pool failed and kv_load_failure_policy is fail: %s"
                                   % exc) from exc
            return 0
        self.metrics.add("pool_get_seconds", time.monotonic() - start)
        good = 0
        cost = 0.0
        for i, block_hash in enumerate(hashes):
            hexed = block_hash.hex()
            chunk = values[i * self.tp:(i + 1) * self.tp]
            where = locations[i]
            if where is None or not all(self.pool.check_payload(v, hexed) for v in chunk):
                log.warning("kv_transfer.py", "KV block %s vanished from the pool between lookup and load; "
                            "recomputing from there" % hexed[:16])
                self.metrics.inc("pool_load_failures", 1)
                break
            good += 1
            cost += self.block_size * self.sim.load_per_token[where]
            self.metrics.inc("pool_load_tokens_" + where, self.block_size)
        # ... while the simulated transfer of the (MiBs of) real KV data queues on this instance's one link
        with self.transfer_lock:
            time.sleep(cost)
        return good


def eos_length(seed_text):
    """SIMULATED model EOS: a deterministic answer length of 16..63 tokens per prompt."""
    return 16 + zlib.crc32(seed_text.encode("utf-8", "replace")) % 48
