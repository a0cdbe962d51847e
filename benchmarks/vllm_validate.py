"""Validate inferasim's scheduler against vLLM's own v1 scheduler (issue 21; not part of CI).

Drives ``vllm.v1.core.sched.scheduler.Scheduler`` (with its
``KVCacheManager`` and ``BlockPool``) on the CPU, with no model and no
download, and runs :class:`inferasim.Simulator` on the same requests with
the same step cost, then prints how far the two agree per request.

How vLLM is driven
------------------
* The first ``N`` requests of the FAST'25 conversation trace
  (``Workload.from_mooncake``). Each 512-token hash id becomes 512 token ids
  unique to that id; the prompt tail past its last *full* hash block (a
  partial last block included: the simulator caches full blocks only)
  becomes tokens unique to the request, and every generated token is unique too. So vLLM's
  content hashes of 16-token pages can only match where the trace's hash ids
  match.
* A clock in ms: every request whose arrival is ``<=`` the clock is added
  before ``Scheduler.schedule()``; a step with nothing scheduled jumps the
  clock to the next arrival. A step lasts exactly what inferasim's replica
  asks its cost model for (``inferasim/sim/replica.py``, ``_start_step``):
  ``cost.step_time_ms(pt, pa, B, S)`` with ``pt`` the prefill-chunk tokens,
  ``pa = sum(n * computed_before + n * (n + 1) // 2)`` over the chunks,
  ``B`` the decoding sequences and ``S = sum(computed_before + 1)`` over them.
  A sequence is prefilling from the step that schedules it new or resumed
  after a preemption up to the step whose chunk reaches its last token
  (inferasim's prefill chunk, ``inferasim/sim/scheduler.py``); every other
  scheduled sequence is a decode.
* A fake ``ModelRunnerOutput`` samples one new token for every scheduled
  request whose computed tokens reach its length (vLLM's runner discards a
  partial prefill's sample the same way); ``SamplingParams(max_tokens=
  output_len, ignore_eos=True)`` ends a request at its output length.
* vLLM's settings follow the inferasim ``EngineConfig`` selected by
  ``--engine``: ``max_num_seqs``, ``max_num_batched_tokens``, chunked
  prefill, ``block_size=16``, prefix caching on, and
  ``num_gpu_blocks = kv_tokens // 16 + 1`` (the pool's block 0 is vLLM's
  reserved null block, so ``kv_tokens`` stay usable, the capacity the
  simulator gets).

Per request and side it records the cached tokens (prefix-cache tokens at
the first schedule), TTFT, E2E, first-token time (whose order gives Kendall's
tau) and preemptions; ``--dump DIR`` writes them as CSV
(``vllm_<N>_<kv>.csv``, ``inferasim_<N>_<kv>.csv``) and ``--from-dump DIR``
compares saved records without vLLM installed.

Run (vLLM in its own venv, inferasim from the work tree)::

    PYTHONPATH=$PWD /work/vllm-venv/bin/python benchmarks/vllm_validate.py \\
        --requests 500 2000 --kv-tokens 25600000 204800 133120 --engine default \\
        --dump /tmp/vv
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import inferasim as ism

PAGE = 16
TRACE = "conversation_trace.jsonl"
COLUMNS = ["cached_tokens", "ttft_ms", "e2e_ms", "first_token_ms", "preemptions"]


# ----------------------------------------------------------------- workload
def load_workload(n: int, unique: bool = False) -> ism.Workload:
    """The first ``n`` requests of the FAST'25 conversation trace.

    With ``unique`` every request's hash ids are made its own (no prefix is
    shared): the harness's self-check, where the engines' caching rules
    cannot matter while memory is ample and step times must agree exactly."""
    from _common import trace_path

    wl = ism.Workload.from_mooncake(trace_path(TRACE))
    if n > len(wl):
        raise SystemExit(f"--requests {n}: the trace has only {len(wl)} requests")
    wl = wl.head(n)
    if unique:
        ids, k = [], 0
        for i in range(n):
            m = len(wl.block_ids(i))
            ids.append(list(range(k, k + m)))
            k += m
        wl = ism.Workload.from_requests(
            np.asarray(wl.arrival_ms), np.asarray(wl.input_len), np.asarray(wl.output_len),
            ids, block_size=wl.block_size)
    return wl


def engine_config(name: str) -> ism.EngineConfig:
    """The inferasim engine configuration ``--engine`` selects: ``default``
    (``EngineConfig()``, vLLM v1's rules), ``vllm`` (``EngineConfig.vllm()``, the
    same rules with exactly 16-token pages) or ``whole_blocks``."""
    if name == "whole_blocks":
        return ism.EngineConfig.whole_blocks()
    return ism.EngineConfig.vllm() if name == "vllm" else ism.EngineConfig()


def prompt_tokens(wl: ism.Workload) -> list[list[int]]:
    """Token ids of every prompt: 512 ids unique to each hash id, the tail unique to the request.

    Token objects of one hash id are shared between prompts (memory)."""
    bs = wl.block_size
    ids_of = [wl.block_ids(i) for i in range(len(wl))]
    top = max((int(ids.max()) for ids in ids_of if len(ids)), default=-1) + 1
    per_id: dict[int, list[int]] = {}
    out = []
    next_unique = top * bs
    for i, ids in enumerate(ids_of):
        length = int(wl.input_len[i])
        toks: list[int] = []
        for h in ids:
            if len(toks) + bs > length:  # (a partial last block: unique tail tokens)
                break
            block = per_id.get(int(h))
            if block is None:
                block = per_id[int(h)] = list(range(int(h) * bs, int(h) * bs + bs))
            toks.extend(block[: length - len(toks)])
        tail = length - len(toks)
        toks.extend(range(next_unique, next_unique + tail))
        next_unique += tail
        out.append(toks)
    return out


# ------------------------------------------------------------------ vLLM side
def make_scheduler(engine: ism.EngineConfig, kv_tokens: int, max_model_len: int, model_dir: Path):
    """vLLM's v1 ``Scheduler`` on the CPU for a tiny local model (tests/v1/core/utils.py style)."""
    import torch
    from vllm.config import CacheConfig, DeviceConfig, ModelConfig, SchedulerConfig, VllmConfig
    from vllm.v1.core.sched.scheduler import Scheduler
    from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec
    from vllm.v1.structured_output import StructuredOutputManager

    model_config = ModelConfig(
        model=str(model_dir), skip_tokenizer_init=True, dtype="float16",
        max_model_len=max_model_len, seed=0,
    )
    scheduler_config = SchedulerConfig(
        max_num_seqs=engine.max_num_seqs,
        max_num_batched_tokens=engine.max_batched_tokens,
        max_model_len=max_model_len,
        enable_chunked_prefill=engine.chunked_prefill,
        is_encoder_decoder=False,
        async_scheduling=False,  # the synchronous Scheduler: one step's output before the next
    )
    cache_config = CacheConfig(block_size=PAGE, enable_prefix_caching=True)
    vllm_config = VllmConfig(
        scheduler_config=scheduler_config, model_config=model_config,
        cache_config=cache_config, device_config=DeviceConfig(device="cpu"),
    )
    num_blocks = kv_tokens // PAGE + 1  # + vLLM's null block
    kv_cache_config = KVCacheConfig(
        num_blocks=num_blocks,
        kv_cache_tensors=[],
        kv_cache_groups=[
            KVCacheGroupSpec(["layer"], FullAttentionSpec(
                block_size=PAGE, num_kv_heads=1, head_size=1, dtype=torch.float32))
        ],
    )
    cache_config.num_gpu_blocks = num_blocks
    return Scheduler(
        vllm_config=vllm_config,
        kv_cache_config=kv_cache_config,
        structured_output_manager=StructuredOutputManager(vllm_config),
        block_size=PAGE,
        log_stats=False,
    ), vllm_config


def write_tiny_model(path: Path) -> Path:
    """A local ``config.json`` of a one-layer Llama: no weights, no download."""
    import json

    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
        "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 4,
        "num_hidden_layers": 1, "vocab_size": 1024, "max_position_embeddings": 1 << 20,
        "torch_dtype": "float16", "rms_norm_eps": 1e-5, "hidden_act": "silu",
    }))
    return path


def run_vllm(wl: ism.Workload, engine: ism.EngineConfig, kv_tokens: int,
             cost: Any, model_dir: Path) -> pd.DataFrame:
    """Drive vLLM's scheduler over ``wl`` on the cost model's clock; one row a request."""
    from vllm.sampling_params import SamplingParams
    from vllm.utils.hashing import get_hash_fn_by_name
    from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash
    from vllm.v1.outputs import ModelRunnerOutput
    from vllm.v1.request import Request

    n = len(wl)
    arrival = np.asarray(wl.arrival_ms, dtype=np.float64)
    out_len = np.asarray(wl.output_len, dtype=np.int64)
    in_len = np.asarray(wl.input_len, dtype=np.int64)
    max_model_len = int((in_len + out_len).max()) + PAGE
    sched, vconf = make_scheduler(engine, kv_tokens, max_model_len, model_dir)
    hash_fn = get_hash_fn_by_name(vconf.cache_config.prefix_caching_hash_algo)
    init_none_hash(hash_fn)
    hasher = get_request_block_hasher(PAGE, hash_fn)
    prompts = prompt_tokens(wl)
    gen_token = [max((max(p) for p in prompts if p), default=0) + 1]  # beyond every prompt token

    cached = np.full(n, -1, np.int64)
    first = np.full(n, np.nan)
    finish = np.full(n, np.nan)
    preempt = np.zeros(n, np.int64)
    requests: dict[str, Request] = {}
    prefilling: set[str] = set()
    clock = 0.0
    nxt = 0
    done = 0
    steps = 0
    started = time.perf_counter()
    while done < n:
        while nxt < n and arrival[nxt] <= clock:
            req = Request(
                request_id=str(nxt), prompt_token_ids=prompts[nxt],
                sampling_params=SamplingParams(max_tokens=int(out_len[nxt]), ignore_eos=True),
                pooling_params=None, block_hasher=hasher,
            )
            prompts[nxt] = []  # (the request holds them now)
            requests[req.request_id] = req
            sched.add_request(req)
            nxt += 1
        so = sched.schedule()
        if so.total_num_scheduled_tokens == 0:
            if nxt >= n:
                raise RuntimeError(f"vLLM scheduled nothing with {n - done} requests left")
            clock = max(clock, float(arrival[nxt]))
            continue
        steps += 1
        for new in so.scheduled_new_reqs:
            rid = int(new.req_id)
            if cached[rid] < 0:
                cached[rid] = new.num_computed_tokens
            prefilling.add(new.req_id)
        prefilling.update(so.scheduled_cached_reqs.resumed_req_ids)
        pt = pa = B = S = 0
        ids: list[str] = []
        sampled: list[list[int]] = []
        completes: list[str] = []
        for rid, k in so.num_scheduled_tokens.items():
            req = requests[rid]
            before = req.num_computed_tokens - k  # schedule() already advanced it
            if rid in prefilling:
                pt += k
                pa += k * before + k * (k + 1) // 2
                if req.num_computed_tokens >= req.num_tokens:
                    completes.append(rid)
            else:
                B += 1
                S += before + 1
            ids.append(rid)
            if req.num_computed_tokens >= req.num_tokens:
                sampled.append([gen_token[0]])
                gen_token[0] += 1
            else:
                sampled.append([])
        clock = clock + cost.step_time_ms(pt, pa, B, S)
        for rid in completes:
            prefilling.discard(rid)
        mro = ModelRunnerOutput(
            req_ids=ids, req_id_to_index={r: i for i, r in enumerate(ids)},
            sampled_token_ids=sampled,
        )
        sched.update_from_output(so, mro)
        for rid, toks in zip(ids, sampled, strict=True):
            if not toks:
                continue
            req = requests[rid]
            i = int(rid)
            if math.isnan(first[i]):
                first[i] = clock
            if req.is_finished():
                finish[i] = clock
                preempt[i] = req.num_preemptions
                del requests[rid]
                done += 1
        if steps % 20000 == 0:
            print(f"    vllm: step {steps}, t={clock / 1000:.1f} s, {done}/{n} done, "
                  f"{time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    return records(arrival, cached, first, finish, preempt)


def records(arrival, cached, first, finish, preempt) -> pd.DataFrame:
    return pd.DataFrame({
        "cached_tokens": cached, "ttft_ms": first - arrival, "e2e_ms": finish - arrival,
        "first_token_ms": first, "preemptions": preempt,
    }).rename_axis("request_id")


# ------------------------------------------------------------- inferasim side
def run_inferasim(wl: ism.Workload, engine: ism.EngineConfig, kv_tokens: int, cost: Any) -> pd.DataFrame:
    """inferasim's simulator on the same workload: one replica, same cost, same KV."""
    res = ism.Simulator(replicas=1, kv_tokens=kv_tokens, cost_model=cost, engine=engine).run(
        wl, progress=False)
    req = res.requests
    return pd.DataFrame({c: req[c].to_numpy() for c in COLUMNS}).rename_axis("request_id")


# ----------------------------------------------------------------- agreement
def kendall_tau(a: np.ndarray, b: np.ndarray) -> float:
    """Kendall's tau-b of two orderings (scipy)."""
    from scipy.stats import kendalltau

    return float(kendalltau(a, b).statistic)


def agreement(v: pd.DataFrame, s: pd.DataFrame) -> dict[str, float]:
    """Per-request agreement of inferasim ``s`` with vLLM ``v``."""
    row: dict[str, float] = {}
    row["cached_same_%"] = 100.0 * float((v["cached_tokens"] == s["cached_tokens"]).mean())
    for col, name in (("ttft_ms", "ttft"), ("e2e_ms", "e2e")):
        a, b = v[col].to_numpy(), s[col].to_numpy()
        row[f"{name}_same_%"] = 100.0 * float((np.abs(a - b) <= 1e-6).mean())
        rel = np.abs(b - a) / np.maximum(np.abs(a), 1e-12)
        row[f"{name}_p50_rel_%"] = 100.0 * float(np.percentile(rel, 50))
        row[f"{name}_p99_rel_%"] = 100.0 * float(np.percentile(rel, 99))
    row["first_token_tau"] = kendall_tau(v["first_token_ms"].to_numpy(), s["first_token_ms"].to_numpy())
    row["preempt_vllm"] = int(v["preemptions"].sum())
    row["preempt_inferasim"] = int(s["preemptions"].sum())
    return row


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--requests", type=int, nargs="+", default=[500, 2000])
    ap.add_argument("--kv-tokens", type=int, nargs="+", default=[25_600_000, 204_800, 133_120])
    ap.add_argument("--engine", choices=["default", "vllm", "whole_blocks"], default="default")
    ap.add_argument("--unique-prefixes", action="store_true",
                    help="self-check: give every request its own hash ids (nothing shared)")
    ap.add_argument("--dump", type=Path, help="write per-request records of both sides here (CSV)")
    ap.add_argument("--from-dump", type=Path,
                    help="compare the vLLM records saved in this folder (no vLLM needed)")
    args = ap.parse_args(argv)
    for n in args.requests:
        if n < 1:
            raise SystemExit(f"--requests must be positive integers, got {n}")
    for k in args.kv_tokens:
        if k < PAGE or k % PAGE:
            raise SystemExit(f"--kv-tokens must be positive multiples of {PAGE}, got {k}")
    engine = engine_config(args.engine).checked()
    cost = ism.LinearCostModel()
    print(f"inferasim engine: {engine!r}; cost: {cost!r}")
    if args.from_dump is None:
        import vllm

        print(f"vLLM {vllm.__version__}")
    model_dir = write_tiny_model(Path(os.environ.get("TMPDIR", "/tmp")) / "vllm_validate_model")
    if args.dump:
        args.dump.mkdir(parents=True, exist_ok=True)
    rows = []
    for n in args.requests:
        wl = load_workload(n, args.unique_prefixes)
        for kv in args.kv_tokens:
            tag = f"{n}_{kv}"
            t0 = time.perf_counter()
            if args.from_dump is not None:
                v = pd.read_csv(args.from_dump / f"vllm_{tag}.csv", index_col="request_id")
            else:
                v = run_vllm(wl, engine, kv, cost, model_dir)
            t1 = time.perf_counter()
            s = run_inferasim(wl, engine, kv, cost)
            t2 = time.perf_counter()
            if args.dump:
                v.to_csv(args.dump / f"vllm_{tag}.csv")
                s.to_csv(args.dump / f"inferasim_{tag}.csv")
            row = {"requests": n, "kv_tokens": kv, **agreement(v, s),
                   "vllm_s": round(t1 - t0, 1), "inferasim_s": round(t2 - t1, 1)}
            rows.append(row)
            print(pd.DataFrame([row]).to_string(index=False), flush=True)
    table = pd.DataFrame(rows)
    print()
    with pd.option_context("display.width", 250, "display.float_format", "{:.3f}".format):
        print(table.to_string(index=False))


if __name__ == "__main__":
    main()
