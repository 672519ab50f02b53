"""Why no plan exists, and the nearest change that would make one.

Checks run from the cheapest to the most expensive: the enumeration record (precision, memory,
latency floors), the budget against the smallest instance, the target rate against the most the
budget can serve, the smallest prefill + decode pair the engine can connect when no colocated
instance meets the SLO, then other GPU types of the catalog and prefill context parallelism, each by
re-running the same enumeration on the changed input.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence

from layoutopt.engines.architectures import releases_implementing
from layoutopt.hardware_catalog.schemas import GpuSpec
from layoutopt.model_catalog.spec import ModelSpec
from layoutopt.optimizer.candidates import CandidateTable
from layoutopt.optimizer.scaling import rate_rps, to_integer_table
from layoutopt.optimizer.solver import LayoutSolver
from layoutopt.optimizer.space import MAX_PP_SIZE
from layoutopt.perf_model.spans import local_domain_gpus
from layoutopt.plan import Layout
from layoutopt.workloads.slo import SLO

_GIB = 2.0**30
# A suggested latency target leaves this margin over the fastest candidate's unloaded latency.
SLO_SUGGESTION_MARGIN = 1.25
SUGGESTION_TIME_LIMIT_S = 2.0
# Each GPU type tried costs a candidate evaluation (~2 s for a large MoE model): the cheapest type
# that serves is the actionable answer, and an infeasible input is answered within ~3 s.
MAX_GPU_SUGGESTIONS = 1

# Builds the candidate table of the same problem on other GPU types: (GPUs, GPU limits) -> table.
# (gpus, gpu limits, pool_capacities=...) -> the candidate table of that budget
TableBuilder = Callable[..., CandidateTable]


class Diagnosis:
    def __init__(self) -> None:
        self.reasons: list[str] = []
        self.suggestions: list[str] = []


def _strictest(targets: dict[str, float]) -> tuple[str, float]:
    key = max(targets, key=lambda k: float(k[1:]))
    return key, targets[key]


def memory_needed(model: ModelSpec, gpus: Sequence[GpuSpec]) -> tuple[str, float]:
    """(precision, GiB) of the smallest weights any budget GPU can serve the model in."""
    options = [(p, model.weight_bytes(p) / _GIB) for p in ("fp4", "fp8", "bf16")
               if any(g.supports(p) for g in gpus)]
    return min(options, key=lambda item: item[1]) if options else ("bf16", model.weight_bytes("bf16") / _GIB)


def _phases_covered(table: CandidateTable) -> tuple[bool, bool]:
    """(some candidate can prefill, some candidate can decode), within the mode allowed."""
    roles = {c.role for c in table.candidates}
    return bool(roles & {"prefill", "colocated"}), bool(roles & {"decode", "colocated"})


def diagnose(table: CandidateTable, model: ModelSpec, slo: SLO, gpus: Sequence[GpuSpec], *,
             build_table: TableBuilder, other_gpus: Sequence[GpuSpec], objective: str,
             pcp_ttft_ms: Callable[[], tuple[str, float] | None] | None = None) -> Diagnosis:
    """Reasons and suggestions for an infeasible problem (``table`` is what enumeration kept)."""
    found = Diagnosis()
    dropped = {f.name: f for f in table.filters}
    prefills, decodes = _phases_covered(table)
    if not (prefills and decodes):
        _no_candidates(found, table, dropped, model, slo, gpus, pcp_ttft_ms, prefills, decodes)
    else:
        _budget_or_rate(found, table, objective, model, gpus)
        if not found.reasons:
            _smallest_pair(found, table)
    if not (prefills and decodes) or not found.suggestions:
        _other_gpu_types(found, build_table, other_gpus, gpus, slo)
    if not found.reasons:
        found.reasons.append("no combination of the candidates meets every constraint")
    return found


def _no_candidates(found: Diagnosis, table: CandidateTable, dropped, model: ModelSpec, slo: SLO,
                   gpus: Sequence[GpuSpec], pcp_ttft_ms, prefills: bool, decodes: bool) -> None:
    names = ", ".join(g.name for g in gpus)
    if "precision support" in dropped and len(dropped) == 1:
        found.reasons.append(dropped["precision support"].example)
        found.suggestions.append("use --precision auto or a precision the GPU supports, or a GPU that has it")
        return
    evaluated_misses = {"latency floor", "capacity at SLO"} & set(dropped)
    rules = [f for name, f in dropped.items() if name.startswith("engine_rule:")]
    if not table.candidates and rules and not evaluated_misses:
        # Engine rules run after the structural filters: every layout those kept breaks a rule of the engine.
        # A precision without a checkpoint rules out every layout at it, whichever rule each one met first.
        checkpoint = dropped.get("engine_rule:checkpoint_unavailable")
        found.reasons += [f"{f.name}: {f.example}" for f in ([checkpoint] if checkpoint else rules)]
        if "engine_rule:model_unsupported" in dropped:
            releases = releases_implementing(model.family)
            if releases:
                found.suggestions.append(f"an engine release that implements {model.name}: --engine "
                                         + " or --engine ".join(releases))
        if checkpoint:
            found.suggestions.append("--checkpoint PRECISION=ORG/NAME with a checkpoint of that precision, or "
                                     "--precision auto")
        return
    if not table.candidates and table.smallest_over_budget is not None and not evaluated_misses:
        _over_budget(found, table, model, gpus)
        return
    if "memory fit" in dropped and not table.candidates and not evaluated_misses:
        precision, weights_gib = memory_needed(model, gpus)
        largest = max(g.memory_gib * min(g.scaleup_domain_gpus * MAX_PP_SIZE, 64) for g in gpus)
        found.reasons.append(
            f"{model.name} fits nowhere on {names}: its weights alone need {weights_gib:.0f} GiB at {precision} "
            f"plus KV cache ({dropped['memory fit'].example})")
        needed = max(1, int(-(-weights_gib * 1.15 // min(g.memory_gib * 0.9 for g in gpus))))
        found.suggestions.append(
            f"give about {needed}+ GPUs of {max(gpus, key=lambda g: g.memory_gib).name} per instance (PP across "
            f"nodes), or GPUs with more memory; the largest instance considered holds {largest:.0f} GiB")
        return
    key_ttft, ttft = _strictest(slo.ttft_ms)
    key_tpot, tpot = _strictest(slo.tpot_ms)
    if not prefills and table.fastest_ttft and table.fastest_ttft.latency_ms > ttft:
        floor = table.fastest_ttft
        found.reasons.append(
            f"TTFT {key_ttft} {ttft:g} ms is below the fastest prefill of a {key_ttft} prompt on {names}: "
            f"{floor.latency_ms:.0f} ms with {floor.layout.short_name()}")
        found.suggestions.append(f"a TTFT {key_ttft} target of {floor.latency_ms * SLO_SUGGESTION_MARGIN:.0f} ms")
        pcp = pcp_ttft_ms() if pcp_ttft_ms else None
        if pcp is not None:
            found.suggestions.append(f"prefill context parallelism: {pcp[0]} would reach {pcp[1]:.0f} ms")
    if not decodes and table.fastest_tpot and table.fastest_tpot.latency_ms > tpot:
        floor = table.fastest_tpot
        found.reasons.append(
            f"TPOT {key_tpot} {tpot:g} ms is below the fastest decode step on {names}: "
            f"{floor.latency_ms:.1f} ms with {floor.layout.short_name()}")
        found.suggestions.append(f"a TPOT {key_tpot} target of {floor.latency_ms * SLO_SUGGESTION_MARGIN:.1f} ms")
    if not found.reasons:
        phase = "prefill" if not prefills else "decode"
        shown = "; ".join(f"{f.name}: {f.num_dropped} ({f.example})" for f in table.filters)
        found.reasons.append(f"no layout can {phase} within the SLO — {shown}")
        if "capacity at SLO" in dropped:
            found.suggestions.append("a looser SLO (the targets hold only at no load)")


def _over_budget(found: Diagnosis, table: CandidateTable, model: ModelSpec, gpus: Sequence[GpuSpec]) -> None:
    """Every layout that fits in memory needs more GPUs or dollars than the budget has."""
    smallest = table.smallest_over_budget
    limit = table.gpu_limits.get(smallest.gpu)
    precision, weights_gib = memory_needed(model, [g for g in gpus if g.name == smallest.gpu] or gpus)
    if limit is not None and limit < smallest.gpus_per_instance:
        found.reasons.append(f"{model.name} needs {weights_gib:.0f} GiB for its weights at {precision} plus KV "
                             f"cache: the smallest instance ({smallest.candidate}) needs {smallest.gpus_per_instance} "
                             f"{smallest.gpu} GPUs; the budget has {limit}")
        found.suggestions.append(f"a budget of at least {smallest.gpus_per_instance}x{smallest.gpu}")
    elif table.max_usd_per_hour is not None:
        found.reasons.append(f"the cheapest instance that fits ({smallest.candidate}) costs "
                             f"${smallest.cost_usd_per_hour:.2f}/h, over the ${table.max_usd_per_hour:.2f}/h cap")
        found.suggestions.append(f"a cap of at least ${smallest.cost_usd_per_hour:.2f}/h")


def _budget_or_rate(found: Diagnosis, table: CandidateTable, objective: str, model: ModelSpec,
                    gpus: Sequence[GpuSpec]) -> None:
    integer = to_integer_table(table)
    if not integer.candidates:
        smallest = min(table.candidates, key=lambda c: (c.gpus_per_instance, c.cost_usd_per_hour))
        limit = table.gpu_limits.get(smallest.gpu)
        if limit is not None and limit < smallest.gpus_per_instance:
            precision, weights_gib = memory_needed(model, [g for g in gpus if g.name == smallest.gpu] or gpus)
            found.reasons.append(f"{model.name} needs {weights_gib:.0f} GiB for its weights at {precision} plus KV "
                                 f"cache: the smallest instance ({smallest.name}) needs {smallest.gpus_per_instance} "
                                 f"{smallest.gpu} GPUs; the budget has {limit}")
            found.suggestions.append(f"a budget of at least {smallest.gpus_per_instance}x{smallest.gpu}")
        if table.max_usd_per_hour is not None:
            cheapest = min(c.cost_usd_per_hour for c in table.candidates)
            found.reasons.append(f"the cheapest instance costs ${cheapest:.2f}/h, over the "
                                 f"${table.max_usd_per_hour:.2f}/h cap")
            found.suggestions.append(f"a cap of at least ${cheapest:.2f}/h")
        return
    if table.min_rate_rps:
        unconstrained = table.model_copy(update={"min_rate_rps": None})
        best = LayoutSolver(to_integer_table(unconstrained), "max-goodput",
                            time_limit_s=SUGGESTION_TIME_LIMIT_S).solve()
        if best.has_plan:
            most = rate_rps(best.rate_units)
            found.reasons.append(f"the budget serves at most {most:.2f} req/s within the SLO; "
                                 f"the target is {table.min_rate_rps:g} req/s")
            scale = table.min_rate_rps / most if most else float("inf")
            if table.gpu_limits:
                larger = " + ".join(f"{int(-(-n * scale // 1))}x{g}" for g, n in table.gpu_limits.items())
                found.suggestions.append(f"a larger budget, about {larger}")
            if table.max_usd_per_hour is not None:
                found.suggestions.append(f"a $ cap of about ${table.max_usd_per_hour * scale:.0f}/h")
            found.suggestions.append(f"or a target rate of at most {most:.2f} req/s")
            return
    if table.mode != "auto":
        found.reasons.append(f"--mode {table.mode} leaves no feasible plan")
        found.suggestions.append("--mode auto")


def _smallest_pair(found: Diagnosis, table: CandidateTable) -> None:
    """Without a colocated candidate a plan needs a prefill and a decode instance the engine can
    connect: name the smallest such pair when it exceeds the budget, or say that none connects."""
    if any(c.role == "colocated" for c in table.candidates):
        return
    prefills = [c for c in table.candidates if c.role == "prefill"]
    decodes = [c for c in table.candidates if c.role == "decode"]
    refused = set(table.incompatible_pairs)
    pairs = [(p, d) for p in prefills for d in decodes if (p.name, d.name) not in refused]
    if prefills and decodes and not pairs:
        found.reasons.append(f"the engine connects none of the {len(prefills)} prefill and {len(decodes)} decode "
                             "candidates (its KV-transfer rules refuse every pair), and no colocated instance "
                             "meets the SLO")
        return
    if not pairs:
        return

    p, d = min(pairs, key=lambda pair: (sum(c.gpus_per_instance for c in pair), sum(c.cost_usd_per_hour for c in pair)))
    need: Counter[str] = Counter()
    for c in (p, d):
        need[c.gpu] += c.gpus_per_instance
    over = {gpu: n for gpu, n in need.items() if table.gpu_limits.get(gpu) is not None and n > table.gpu_limits[gpu]}
    cost = p.cost_usd_per_hour + d.cost_usd_per_hour
    if over:
        have = ", ".join(f"{table.gpu_limits[g]}x{g}" for g in over)
        found.reasons.append(f"no colocated instance meets the SLO, and the smallest prefill + decode pair the engine "
                             f"can connect ({p.name}, {p.gpus_per_instance} GPUs, + {d.name}, "
                             f"{d.gpus_per_instance}) needs {' + '.join(f'{n}x{g}' for g, n in over.items())}; "
                             f"the budget has {have}")
        found.suggestions.append("a budget of at least " + " + ".join(f"{n}x{g}" for g, n in need.items()))
    elif table.max_usd_per_hour is not None and cost > table.max_usd_per_hour:
        found.reasons.append(f"no colocated instance meets the SLO, and the cheapest prefill + decode pair the engine "
                             f"can connect ({p.name} + {d.name}) costs ${cost:.2f}/h, over the "
                             f"${table.max_usd_per_hour:.2f}/h cap")
        found.suggestions.append(f"a cap of at least ${cost:.2f}/h")


def _other_gpu_types(found: Diagnosis, build_table: TableBuilder, other_gpus: Sequence[GpuSpec],
                     gpus: Sequence[GpuSpec], slo: SLO) -> None:
    """Suggest the cheapest catalog GPU type(s) not in the budget where both phases meet the SLO.

    Types are tried cheapest first and the search stops at ``MAX_GPU_SUGGESTIONS``; a type where
    no layout fits in memory costs only the structural filters.
    """
    count = max(8, sum(g.scaleup_domain_gpus for g in gpus))
    key_ttft, _ = _strictest(slo.ttft_ms)
    key_tpot, _ = _strictest(slo.tpot_ms)
    working = []
    others = [g for g in other_gpus if g.price is not None and not any(g.name == b.name for b in gpus)]
    for gpu in sorted(others, key=lambda g: (g.price.typical_usd_per_hour, g.name)):
        # Whether any layout serves is all that is asked: no capacity-by-instance-count grid.
        table = build_table([gpu], {gpu.name: count}, pool_capacities=False)
        if all(_phases_covered(table)) and table.fastest_ttft and table.fastest_tpot:
            working.append((gpu.price.typical_usd_per_hour, gpu.name, table))
            if len(working) == MAX_GPU_SUGGESTIONS:
                break
    for _, name, table in working:
        found.suggestions.append(
            f"another GPU type: {count}x{name} meets the SLO (unloaded TTFT {key_ttft} "
            f"{table.fastest_ttft.latency_ms:.0f} ms, TPOT {table.fastest_tpot.latency_ms:.1f} ms)")


def pcp_variants(layout: Layout, gpu: GpuSpec) -> list[Layout]:
    """The layout with prefill context parallelism 2 or 4 added, keeping each stage in one local domain.

    Where the TP group already fills the domain, TP shrinks by the PCP factor (same GPUs, prompt
    split by sequence instead of by heads).
    """
    variants = []
    for pcp in (2, 4):
        if pcp <= layout.pcp_size:
            continue
        tp = layout.tp_size
        while tp > 1 and tp * layout.dp_size * pcp > local_domain_gpus(gpu):
            tp //= 2
        if tp * layout.dp_size * pcp > local_domain_gpus(gpu) or tp % layout.dcp_size:
            continue
        ep = layout.ep_size if (tp * layout.dp_size) % layout.ep_size == 0 else tp * layout.dp_size
        variants.append(layout.model_copy(update={"pcp_size": pcp, "tp_size": tp, "ep_size": ep}))
    return variants
