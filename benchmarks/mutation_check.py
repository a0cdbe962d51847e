"""Mutation check: do the tests catch realistic one-line bugs?

Each mutant replaces one exact snippet of one source file (the snippet must
occur exactly once: a snippet the code no longer has makes the mutant
*stale*, reported and counted as a failure of the check). The package (its
Python sources only: compiled extension modules are left out, so the
mutated ``.py`` file is the code that runs) and the tests are copied to a
temporary folder, the mutant is applied there, and only the tests named for
it run (``pytest -x``; files or node ids such as
``tests/test_plan.py::test_pareto_hand_case``): the mutant is *killed* when
they fail. The script prints a table and the kill rate; a surviving mutant
names a gap in the tests. Every run sets ``CI=true``.

Run from the repository root::

    python benchmarks/mutation_check.py            # all mutants
    python benchmarks/mutation_check.py p90 tie    # mutants whose name contains a word

A baseline run of every test selection used must pass first. Under the
``ci`` hypothesis profile (``CI=true``) the property tests are derandomized,
so the verdicts are reproducible. The script exits 0 only when every
mutant is killed and none is stale.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Mutant:
    name: str
    path: str  # relative to the repository
    old: str
    new: str
    tests: tuple[str, ...]


SIM = ("tests/test_sim_hand.py", "tests/test_reliability_expectations.py", "tests/test_sim_properties.py")
MECH = "tests/test_sim_mechanisms_hand.py"  # the hand-derived cases of issue 26
SYN = ("tests/test_synthesize.py::test_fit_by_hand", "tests/test_synthesize.py::test_session_links_at_their_boundaries")
MUTANTS = [
    # ------------------------------------------------ summary, loaders, reuse, engine
    Mutant("p90 at the 95th percentile", "inferasim/sim/summary.py",
           '("p90", 90)', '("p90", 95)', ("tests/test_reliability_expectations.py", "tests/test_sim_hand.py")),
    Mutant("ties flagged as unsorted", "inferasim/workload/_parse.py",
           "np.all(arrival[1:] >= arrival[:-1])", "np.all(arrival[1:] > arrival[:-1])",
           ("tests/test_reliability_expectations.py", "tests/test_mooncake.py")),
    Mutant("kv_cost pruning > becomes >=", "inferasim/sim/routing.py",
           "if base + a > low:", "if base + a >= low:",
           ("tests/test_reliability_expectations.py", "tests/test_sim_router.py", "tests/test_sim_properties.py")),
    Mutant("ref count slip on acquire", "inferasim/sim/cache.py",
           "            ref[h] = r + 1\n            policy.hit(h)", "            ref[h] = 1\n            policy.hit(h)",
           SIM),
    Mutant("jump: stretch one step too long", "inferasim/sim/stretch.py",
           "K = group.first_finish() - D  # steps up to and including the first finish",
           "K = group.first_finish() - D + 1  # steps up to and including the first finish",
           ("tests/test_sim_properties.py",)),
    Mutant("jump: finish step off by one", "inferasim/sim/stretch.py",
           "fins = [(e[0] - D - 1, e[3]) for e in valid if e[0] - D - 1 < K - 1]",
           "fins = [(e[0] - D, e[3]) for e in valid if e[0] - D < K - 1]",
           ("tests/test_sim_properties.py",)),
    Mutant("jump: block phase off by one", "inferasim/sim/stretch.py",
           "first = f + 1 + ((seq.d_join - seq.c_join - D - f - 1) % bs)",
           "first = f + 1 + ((seq.d_join - seq.c_join - D - f) % bs)",
           ("tests/test_sim_properties.py",)),
    Mutant("prefix reuse may cover the whole prompt", "inferasim/sim/scheduler.py",
           "limit = (seq.tokens - 1) // bs\n            if limit > len(ids):",
           "limit = seq.tokens // bs\n            if limit > len(ids):",
           SIM),
    Mutant("rejection at capacity instead of above", "inferasim/sim/arrivals.py",
           "np.flatnonzero((need > capacity) | (P <= 0))", "np.flatnonzero((need >= capacity) | (P <= 0))",
           ("tests/test_sim_hand.py", "tests/test_sim_properties.py")),
    Mutant("aliases become case-sensitive", "inferasim/workload/mooncake.py",
           "canon = _ALIAS.get(str(key).lower())\n            if canon is None:",
           "canon = _ALIAS.get(str(key))\n            if canon is None:",
           ("tests/test_reliability_workload.py", "tests/test_mooncake.py", "tests/test_fuzz_loaders.py")),
    Mutant("integer timestamps rebased as floats", "inferasim/workload/_parse.py",
           "arr = (np.asarray(values, dtype=np.int64) - np.int64(lo)).astype(np.float64)",
           "arr = np.asarray(values, dtype=np.float64) - float(lo)",
           ("tests/test_reliability_workload.py",)),
    Mutant("decode step-time check dropped", "inferasim/sim/kernels.py",
           "if not 0.0 <= dt < math.inf:", "if not dt < math.inf:",
           ("tests/test_reliability_sim.py",)),
    Mutant("timeline thinning keeps the odd rows", "inferasim/sim/recorder.py",
           "rec.rows[:] = rec.rows[::factor]", "rec.rows[:] = rec.rows[1::factor]",
           ("tests/test_reliability_sim.py",)),
    Mutant("CSV duplicate check case-sensitive", "inferasim/workload/tabular.py",
           "if h.lower() in by_lower:", "if h in by_lower:",
           ("tests/test_reliability_workload.py", "tests/test_bad_input.py")),
    Mutant("decode group leaves one token short", "inferasim/sim/decode.py",
           "self.context -= computed + 1\n", "self.context -= computed\n",
           ("tests/test_sim_hand.py", "tests/test_sim_properties.py")),
    Mutant("partial last block counted in full", "inferasim/_ragged.py",
           "tokens[is_last] = np.maximum(left[is_last], 0)", "tokens[is_last] = block_size",
           ("tests/test_reliability_expectations.py",)),
    # ------------------------------------------------------------------ tiers
    Mutant("tier writes at its read bandwidth", "inferasim/sim/tiers.py",
           "link.start(t, nbytes, self.write_gbps[k])", "link.start(t, nbytes, self.read_gbps[k])",
           (f"{MECH}::test_offload_write_at_the_write_bandwidth_shares_the_link_with_a_load",)),
    Mutant("tier loads at its write bandwidth", "inferasim/sim/tiers.py",
           "key = (k, self.links[k].start(t, nbytes, self.read_gbps[k]))",
           "key = (k, self.links[k].start(t, nbytes, self.write_gbps[k]))",
           (f"{MECH}::test_offload_write_at_the_write_bandwidth_shares_the_link_with_a_load",)),
    Mutant("load ends at the last delivery taken", "inferasim/sim/tiers.py",
           "                if when > o.load_end:\n                    o.load_end = when",
           "                o.load_end = when",
           (f"{MECH}::test_a_load_from_two_tiers_ends_with_its_last_delivery",)),
    Mutant("hot block copied at the threshold", "inferasim/sim/tiers.py",
           "if c > hot:", "if c >= hot:",
           ("tests/test_sim_hot_blocks.py",)),
    # --------------------------------------------------------------- transfer
    Mutant("link delivery estimate without latency", "inferasim/sim/transfer.py",
           "end = self._t + (heap[0][0] - self._v) * self._n + self.latency_ms",
           "end = self._t + (heap[0][0] - self._v) * self._n",
           ("tests/test_sim_tiers_transfer.py",)),
    Mutant("load estimate ignores the cap on others' work", "inferasim/sim/transfer.py",
           "total += r if r < w else w", "total += r",
           ("tests/test_sim_tiers_transfer.py",)),
    Mutant("link backlog drains n times too fast", "inferasim/sim/transfer.py",
           "left = self._sum_vf - self._n * self._v - (t - self._t)",
           "left = self._sum_vf - self._n * self._v - (t - self._t) * self._n",
           ("tests/test_sim_tiers_transfer.py",)),
    # --------------------------------------------------------- P/D handoff
    Mutant("layerwise delivery kept at the transfer's end", "inferasim/sim/handoff.py",
           "                self.out.delivered[seq.rid] = te\n                self.hand_over(rec, te)",
           "                self.hand_over(rec, te)",
           (f"{MECH}::test_layerwise_handoff_of_a_long_prefill_is_delivered_when_the_prefill_ends",)),
    Mutant("handoff moves one token too many", "inferasim/sim/handoff.py",
           "tid = self.links[p].start(t, seq.prompt * self.kvb)",
           "tid = self.links[p].start(t, (seq.prompt + 1) * self.kvb)",
           ("tests/test_sim_disagg.py::test_one_request_ttft_and_e2e_include_the_handoff",)),
    Mutant("handoff ties go to the last decode instance", "inferasim/sim/handoff.py",
           "if best < 0 or act < best_active:", "if best < 0 or act <= best_active:",
           ("tests/test_sim_disagg.py::test_transfers_share_the_prefill_link",)),
    Mutant("decode reservation one block short", "inferasim/sim/handoff.py",
           "need = -(-(seq.prompt + 1) // self.bs)\n        d = self.decode_with_room(need, t)",
           "need = -(-seq.prompt // self.bs)\n        d = self.decode_with_room(need, t)",
           ("tests/test_sim_disagg.py",)),
    # ---------------------------------------------------------------- routers
    Mutant("kv_cost softmax sign flipped", "inferasim/sim/routing.py",
           "math.exp(-(c - low) / self.temperature)", "math.exp((c - low) / self.temperature)",
           (f"{MECH}::test_kv_cost_softmax_prefers_the_idle_replica_at_the_computed_frequency",)),
    Mutant("cache_aware ties go to the busier replica", "inferasim/sim/routing.py",
           "                load = v.outstanding_tokens\n                if load < best_load:\n                    best = i",
           "                load = v.outstanding_tokens\n                if load > best_load:\n                    best = i",
           ("tests/test_sim_router.py",)),
    Mutant("least_loaded ties go to the last replica", "inferasim/sim/routing.py",
           "            if load < best_load:\n                best, best_load = i, load",
           "            if load <= best_load:\n                best, best_load = i, load",
           ("tests/test_sim_router.py",)),
    Mutant("round robin skips the last replica", "inferasim/sim/routing.py",
           "self._next = r + 1 if r + 1 < len(replicas) else 0",
           "self._next = r + 1 if r + 2 < len(replicas) else 0",
           ("tests/test_sim_router.py",)),
    Mutant("conductor leaves out the handoff estimate", "inferasim/sim/routing.py",
           "t = v.ttft_estimate_ms + v.handoff_estimate_ms", "t = v.ttft_estimate_ms",
           ("tests/test_sim_disagg.py::test_conductor_adds_the_handoff_estimate_to_the_ttft",)),
    Mutant("longest_match forgets its request counts", "inferasim/sim/routing.py",
           "self._count[best] += 1", "self._count[best] += 0",
           ("tests/test_sim_router.py::test_longest_match_ties_go_to_the_replica_sent_the_fewest_requests",)),
    # -------------------------------------------------------------- admission
    Mutant("TTFT exactly at the objective rejected", "inferasim/sim/admission.py",
           "if ttft > self.ttft_ms:", "if ttft >= self.ttft_ms:",
           (f"{MECH}::test_slo_admission_admits_a_prediction_exactly_at_the_objective",)),
    Mutant("TPOT exactly at the objective rejected", "inferasim/sim/admission.py",
           "if tpot > self.tpot_ms:", "if tpot >= self.tpot_ms:",
           (f"{MECH}::test_slo_admission_admits_a_prediction_exactly_at_the_objective",)),
    Mutant("TPOT read from the prefill instance", "inferasim/sim/admission.py",
           "tpot = views[-1].tpot_estimate_ms", "tpot = views[0].tpot_estimate_ms",
           (f"{MECH}::test_slo_admission_reads_the_tpot_of_the_decode_instance",)),
    # ------------------------------------------------------------ closed loop
    Mutant("think time keeps the service time", "inferasim/sim/closed_loop.py",
           "out[later] = np.maximum(gap - est, 0.0)", "out[later] = np.maximum(gap, 0.0)",
           ("tests/test_sim_closed_loop.py::test_two_turns_exact_times",)),
    Mutant("idle decode context one token short", "inferasim/sim/closed_loop.py",
           "ctx = (P[owner] + 1 + j).astype(np.float64)", "ctx = (P[owner] + j).astype(np.float64)",
           ("tests/test_sim_closed_loop.py::test_idle_estimate_is_the_engine_time_alone",)),
    Mutant("idle estimate chunks an unchunked prefill", "inferasim/sim/closed_loop.py",
           "m = p - c if not chunked_prefill else min(p - c, M)", "m = min(p - c, M)",
           ("tests/test_sim_closed_loop.py::test_idle_estimate_is_the_engine_time_alone",)),
    Mutant("parent's cached blocks past the lookup limit", "inferasim/sim/closed_loop.py",
           "k = int(min(nh[j], nh[p], (P[j] - 1) // bs))", "k = int(min(nh[j], nh[p]))",
           ("tests/test_sim_closed_loop.py",)),
    # ------------------------------------------------------------------ sweep
    Mutant("sweep load form read as scale_time", "inferasim/sweep.py",
           'elif form == "load":\n                scale = 1.0 / v', 'elif form == "load":\n                scale = v',
           ("tests/test_sweep.py::test_load_forms_agree",)),
    Mutant("sweep offered rate over one gap fewer", "inferasim/sweep.py",
           "return len(arr) * 1000.0 / float(arr[-1] - arr[0])",
           "return (len(arr) - 1) * 1000.0 / float(arr[-1] - arr[0])",
           ("tests/test_sweep.py::test_load_forms_agree",)),
    # ------------------------------------------------------------------- plan
    Mutant("plan bisection stops one replica early", "inferasim/plan.py",
           "while hi - lo > 1:", "while hi - lo > 2:",
           ("tests/test_plan.py::test_min_replicas_hand_case",)),
    Mutant("plan prices GPU minutes as hours", "inferasim/plan.py",
           "return gpus * usd_per_gpu_hour / 3600.0 / tok_s * 1e6",
           "return gpus * usd_per_gpu_hour / 60.0 / tok_s * 1e6",
           ("tests/test_plan.py::test_cost_per_million_tokens_by_hand",)),
    Mutant("pareto drops exact ties", "inferasim/plan.py",
           "if sy[i] < best_y or point == last:", "if sy[i] < best_y:",
           ("tests/test_plan.py::test_pareto_hand_case",)),
    Mutant("plan counts rejections as meeting the SLO", "inferasim/plan.py",
           "ok = rejected == 0 and len(fin) > 0", "ok = len(fin) > 0",
           ("tests/test_plan.py::test_max_rate_counts_a_rejection_as_missing_the_objective",)),
    Mutant("plan SLO boundary strict", "inferasim/plan.py",
           "ok = ok and ttft_q <= slo_ttft_ms", "ok = ok and ttft_q < slo_ttft_ms",
           ("tests/test_plan.py::test_max_rate_counts_a_ttft_exactly_at_the_objective_as_met",)),
    # ------------------------------------------------------------- synthesize
    Mutant("synthesize: a next turn must exceed the answer", "inferasim/workload/synthesize.py",
           "if full[i] == depth and inl[j] >= need[i]:", "if full[i] == depth and inl[j] > need[i]:",
           SYN),
    Mutant("synthesize: min_shared_blocks off by one", "inferasim/workload/synthesize.py",
           "for depth in range(stop - start - 1, min_shared_blocks - 1, -1):",
           "for depth in range(stop - start - 1, min_shared_blocks, -1):",
           SYN),
    Mutant("synthesize: partial last block anchors a turn", "inferasim/workload/synthesize.py",
           "full = (nblocks - ((nblocks > 0) & (last_tokens < block_size))).tolist()",
           "full = nblocks.tolist()",
           SYN),
]


# An editable install puts a finder on sys.meta_path that maps ``inferasim`` to the
# checkout; drop it so the mutated copy on PYTHONPATH is the package imported.
_BOOT = (
    "import sys; sys.meta_path[:] = [f for f in sys.meta_path "
    "if '__editable__' not in getattr(f, '__module__', '')]; "
)


def _python(code: str) -> list[str]:
    return [sys.executable, "-c", _BOOT + code]


def first_failure(output: str) -> str:
    """The node id of the first test pytest's short summary names as failed ("" if none)."""
    for line in output.splitlines():
        if line.startswith(("FAILED ", "ERROR ")):
            return line.split(" ", 1)[1].split(" - ", 1)[0]
    return ""


def run_tests(root: Path, tests: tuple[str, ...]) -> tuple[bool, float, str]:
    """Run ``tests`` in ``root`` under ``CI=true``: (passed, seconds, first failing test)."""
    env = dict(os.environ, PYTHONPATH=str(root), PYTHONDONTWRITEBYTECODE="1", CI="true")
    args = ["-x", "-q", "-rfE", "-p", "no:cacheprovider", *tests]
    t = time.perf_counter()
    proc = subprocess.run(
        _python(f"import pytest; sys.exit(pytest.main({args!r}))"),
        cwd=root, env=env, capture_output=True, text=True,
    )
    return proc.returncode == 0, time.perf_counter() - t, first_failure(proc.stdout)


def copy_repo(dest: Path) -> None:
    for part in ("inferasim", "tests"):
        # (no compiled modules: a mutated .py file beside its .so would never run)
        skip = shutil.ignore_patterns("__pycache__", "*.so", "*.pyd", "*.c", "build")
        shutil.copytree(REPO / part, dest / part, ignore=skip)
    shutil.copy(REPO / "pyproject.toml", dest / "pyproject.toml")
    # The tests look for traces beside and above the checkout (tests/conftest.py
    # trace_dirs): the copy sees the same folders through links.
    for link, real in ((dest / "traces", REPO / "traces"), (dest.parent / "shared", REPO.parent / "shared")):
        if real.is_dir():
            link.symlink_to(real, target_is_directory=True)


def main(words: list[str]) -> int:
    mutants = list(MUTANTS)
    if words:
        mutants = [m for m in mutants if any(w.lower() in m.name.lower() for w in words)]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "repo"
        copy_repo(root)
        probe = subprocess.run(_python("import inferasim; print(inferasim.__file__)"),
                               cwd=root, env=dict(os.environ, PYTHONPATH=str(root)), capture_output=True, text=True)
        if not probe.stdout.strip().startswith(str(root)):
            print(f"the copy is not the imported package: {probe.stdout} {probe.stderr}")
            return 2
        used = tuple(sorted({t for m in mutants for t in m.tests}))
        ok, secs, failed = run_tests(root, used)
        print(f"baseline ({len(used)} test selections): {'pass' if ok else 'FAIL ' + failed} in {secs:.0f} s")
        if not ok:
            return 2
        rows = []
        for m in mutants:
            target = root / m.path
            original = target.read_text()
            if original.count(m.old) != 1:
                rows.append((m.name, "stale", 0.0, ""))
                print(f"  stale             {m.name}", flush=True)
                continue
            target.write_text(original.replace(m.old, m.new))
            try:
                passed, secs, failed = run_tests(root, m.tests)
            finally:
                target.write_text(original)
            rows.append((m.name, "survived" if passed else "killed", secs, failed))
            print(f"  {rows[-1][1]:<8} {secs:6.1f} s  {m.name}  {failed}", flush=True)
    width = max(len(r[0]) for r in rows)
    print(f"{'mutant':<{width}}  verdict   seconds  killed by")
    for name, verdict, secs, failed in rows:
        print(f"{name:<{width}}  {verdict:<8}  {secs:7.1f}  {failed}")
    live = [r for r in rows if r[1] != "stale"]
    killed = sum(r[1] == "killed" for r in live)
    print(f"kill rate: {killed}/{len(live)} = {killed / max(len(live), 1):.0%}"
          + (f" ({len(rows) - len(live)} stale)" if len(rows) != len(live) else ""))
    return 0 if killed == len(rows) else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
