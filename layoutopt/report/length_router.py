"""Deployment files of a length-routed plan: each class's deployment, and a front proxy that routes by class.

Each length class is a plan of its own, emitted as ``layoutopt emit`` emits any plan into
``<class>/`` with the Kubernetes namespace ``<namespace>-<class>`` (so the classes' pools and
routers never share a name). In front of them, ``length-routing/envoy.yaml`` is an Envoy static
configuration that sends a request to its class's router: by the ``x-layoutopt-length-class``
header (``short`` or ``long``) when the client sets it (exact: the client counts its tokens), else
by the body's size, ``content-length`` <= ``BYTES_PER_TOKEN`` x threshold + ``ENVELOPE_BYTES``
going to the short class (an estimate: about 4 bytes per token of English text, the ratio llm-d's
scheduler falls back to, ``charToTokenMultiplier = 0.25`` in the file cited below, l.29); a
request with neither (HTTP/2 may omit content-length) goes to the long class, whose pools serve any
prompt within the SLO's reach.

Why a front proxy: the routers layoutopt emits do not route by prompt length.
vllm-router 0.1.17 and sglang-router 0.3.2 choose workers by load, cache or hash
(``router_args.py`` policy choices: vllm_router l.165-195; sglang_router l.249, l.256-263, l.270);
sglang-router's ``bucket`` policy (a prefill policy in PD mode, choice listed at l.262) sends a
prompt to the prefill worker whose character-count bucket holds it, but ``adjust_boundary`` moves
the boundaries to even out load, an imbalance sends it to the least-loaded worker instead, and the
decode worker is random (sgl-project/sglang ``sgl-router/src/policies/bucket.rs``,
``select_worker_pair``), so it cannot pin a length class to the pools sized for it. llm-d's
inference scheduler does route by prompt length: the ``context-length-aware`` plugin
(llm-d-inference-scheduler v0.8.0, ``pkg/epp/framework/plugins/scheduling/scorer/contextlengthaware/
context_length_aware.go`` l.21, l.24, l.41, l.113-145; registered in ``pkg/epp/framework/plugins/
register.go`` l.48) filters pods by a ``llm-d.ai/context-length-range: "min-max"`` label; on llm-d,
label each class's pods with its range instead of using this proxy (``length-routing/README.md``).

Envoy fields (v3 API, ``api/envoy/config/route/v3/route_components.proto``): ``RouteMatch.headers``
with ``HeaderMatcher.string_match`` (field 13) and ``HeaderMatcher.range_match`` (field 6, an
``Int64Range`` [start, end) matched against the whole header value as a base-10 integer); routes are
tried in order, the first match wins; ``RouteAction.weighted_clusters`` for a class with two routers
(a mixed plan), weighted by their planned traffic share; ``timeout: 0s`` so streamed answers are not
cut. The config was checked for shape here, not loaded by an Envoy binary.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from layoutopt.plan.length_routing import LengthRoutedPlan
from layoutopt.report.emit import emit
from layoutopt.report.kubernetes import dump_yaml
from layoutopt.report.launch import expand_instances, pool_names
from layoutopt.report.node_launch import BASE_PORT
from layoutopt.report.router import plan_routers

CLASS_HEADER = "x-layoutopt-length-class"
PROXY_PORT = 8000
ENVOY_IMAGE = "envoyproxy/envoy:v1.34-latest"
LLM_D_LABEL = "llm-d.ai/context-length-range"
BYTES_PER_TOKEN = 4  # body bytes per prompt token, English text (llm-d's fallback: 0.25 tokens per character)
ENVELOPE_BYTES = 512  # the JSON around the prompt: model name, sampling parameters, chat message wrappers


def short_body_bytes(threshold_tokens: int) -> int:
    """The largest request body (bytes) routed to the short class when the client sets no class header."""
    return BYTES_PER_TOKEN * threshold_tokens + ENVELOPE_BYTES


def class_endpoints(plan, namespace: str) -> list[tuple[str, int, float]]:
    """(host, port, traffic share) of the front doors of one class's plan, as Kubernetes Service DNS names."""
    routers = plan_routers(plan, expand_instances(plan))
    if routers:
        return [(f"{r.name}.{namespace}.svc.cluster.local", r.port, r.share_fraction) for r in routers]
    # One colocated instance and no router: its pool's Service is the front door.
    return [(f"{pool_names(plan)[0]}.{namespace}.svc.cluster.local", BASE_PORT, 1.0)]


def envoy_config(routed: LengthRoutedPlan, namespace: str = "default") -> dict[str, Any]:
    """The Envoy bootstrap (static resources) of a split plan: one listener, a route per class."""
    clusters, routes = [], []
    for c in routed.classes:
        endpoints = class_endpoints(c.plan, f"{namespace}-{c.name}")
        names = [f"{c.name}-{i}" for i in range(len(endpoints))]
        for name, (host, port, _) in zip(names, endpoints):
            clusters.append({
                "name": name, "type": "STRICT_DNS", "connect_timeout": "5s", "lb_policy": "ROUND_ROBIN",
                "load_assignment": {"cluster_name": name, "endpoints": [{"lb_endpoints": [
                    {"endpoint": {"address": {"socket_address": {"address": host, "port_value": port}}}}]}]}})
        if len(names) == 1:
            action: dict[str, Any] = {"cluster": names[0], "timeout": "0s"}
        else:
            weights = [max(1, round(100 * share)) for _, _, share in endpoints]
            action = {"weighted_clusters": {"clusters": [{"name": n, "weight": w} for n, w in zip(names, weights)]},
                      "timeout": "0s"}
        routes.append((c.name, action))
    route_list = [{"name": name, "match": {"prefix": "/", "headers": [
        {"name": CLASS_HEADER, "string_match": {"exact": name}}]}, "route": action} for name, action in routes]
    by_name = dict(routes)
    route_list.append({"name": "short-by-size", "match": {"prefix": "/", "headers": [
        {"name": "content-length", "range_match": {"start": 0, "end": short_body_bytes(routed.threshold_tokens) + 1}}]},
        "route": by_name["short"]})
    route_list.append({"name": "default-long", "match": {"prefix": "/"}, "route": by_name["long"]})
    manager = {
        "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3."
                 "HttpConnectionManager",
        "stat_prefix": "layoutopt_length_router",
        "route_config": {"name": "length-classes",
                         "virtual_hosts": [{"name": "all", "domains": ["*"], "routes": route_list}]},
        "http_filters": [{"name": "envoy.filters.http.router", "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"}}],
    }
    listener = {"name": "front", "address": {"socket_address": {"address": "0.0.0.0", "port_value": PROXY_PORT}},
                "filter_chains": [{"filters": [{"name": "envoy.filters.network.http_connection_manager",
                                                "typed_config": manager}]}]}
    return {"static_resources": {"listeners": [listener], "clusters": clusters}}


def class_of(prompt_tokens: int, threshold_tokens: int) -> str:
    """The header value a client sends for a prompt of ``prompt_tokens`` tokens."""
    return "short" if prompt_tokens <= threshold_tokens else "long"


def routing_readme(routed: LengthRoutedPlan, namespace: str) -> str:
    t = routed.threshold_tokens
    lines = [f"# Routing by prompt length: {routed.model} at {routed.rate_rps:g} req/s", "",
             f"Prompts of at most {t:,} tokens are the short class, longer ones the long class. Each class has "
             "its own pools (`short/`, `long/`: launch scripts, manifests in namespaces "
             f"`{namespace}-short` and `{namespace}-long`, and its own router).", "",
             "| class | prompt tokens | share of requests | rate | SLO it meets | pools | $/h |",
             "|---|---|---:|---:|---|---|---:|"]
    for c in routed.classes:
        pools = ", ".join(f"{p.instances} x {p.role} {p.gpu} {p.layout.short_name()}" for p in c.plan.pools)
        targets = ", ".join([f"TTFT {k} {v:g} ms" for k, v in c.slo.ttft_ms.items()]
                            + [f"TPOT {k} {v:g} ms" for k, v in c.slo.tpot_ms.items()]) + f", {c.slo.attainment:g}"
        lines.append(f"| {c.name} | {c.min_input_tokens:,}-{c.max_input_tokens:,} | {c.rate_share_fraction:.1%} | "
                     f"{c.rate_rps:.2f} req/s | {targets} | {pools} | {c.plan.totals.cost_usd_per_hour:,.2f} |")
    lines += ["", "Together the classes meet the SLO as given: the share of all requests within a target is "
              "the classes' shares within it, weighted by their share of requests."]
    lines += ["", f"In all ${routed.cost_usd_per_hour:,.2f}/h; without the split the cheapest plan costs "
              f"${routed.no_split_cost_usd_per_hour:,.2f}/h (saving ${routed.saving_usd_per_hour:,.2f}/h)."
              if routed.no_split_cost_usd_per_hour is not None
              else "Without the split no plan serves the rate within the SLO.", "",
              "## What the operator must do", "",
              f"1. Deploy both classes (`short/`, `long/`), then the front proxy: `envoy -c envoy.yaml` "
              f"(image `{ENVOY_IMAGE}`), listening on port {PROXY_PORT}. Its upstreams are the classes' "
              "Kubernetes Services; outside Kubernetes, replace each `socket_address` with the host running "
              "that class's `router/router.sh`.",
              f"2. Without help from clients, Envoy routes a request whose body is at most "
              f"{short_body_bytes(t):,} bytes (`content-length`; about {BYTES_PER_TOKEN} bytes per token of "
              f"English text plus {ENVELOPE_BYTES} bytes of JSON) to the short class and larger ones to the long "
              "class. That is an estimate: text of other scripts has more bytes per token, and a body sent "
              "without `content-length` (some HTTP/2 clients) goes to the long class. For exact routing, clients "
              f"send `{CLASS_HEADER}: short` when the prompt has at most {t:,} tokens (counted with the model's "
              f"tokenizer) and `{CLASS_HEADER}: long` otherwise; the header wins over the size. The long class "
              "serves any length but was not sized for short traffic: misrouted short prompts use its capacity.",
              "3. On llm-d instead of this proxy: enable the scheduler's `context-length-aware` plugin with "
              f"`enableFiltering: true` and label each class's pods `{LLM_D_LABEL}`: "
              + ", ".join(f"`\"{c.min_input_tokens}-{c.max_input_tokens}\"` ({c.name})" for c in routed.classes)
              + " (llm-d-inference-scheduler v0.8.0, plugin `context-length-aware`; it counts tokens with its "
              "tokenizer plugin, else characters x 0.25).", ""]
    return "\n".join(lines)


def emit_length_routed(routed: LengthRoutedPlan, out_dir: str | Path, *, engine: str = "vllm",
                       namespace: str = "default", plots: bool = False, force: bool = False) -> list[Path]:
    """Write each class's deployment and, for a split, the length-routing front proxy; the files written."""
    out_dir = Path(out_dir)
    if routed.threshold_tokens is None:
        return emit(routed.classes[0].plan, out_dir, engine=engine, namespace=namespace, plots=plots, force=force)
    written: list[Path] = []
    for c in routed.classes:
        written += emit(c.plan, out_dir / c.name, engine=engine, namespace=f"{namespace}-{c.name}", plots=plots,
                        force=force)
    front = out_dir / "length-routing"
    front.mkdir(parents=True, exist_ok=True)
    files = {"envoy.yaml": "# layoutopt length router: Envoy static config\n" + dump_yaml([envoy_config(routed,
                                                                                                       namespace)]),
             "README.md": routing_readme(routed, namespace)}
    for name, text in files.items():
        (front / name).write_text(text)
        written.append(front / name)
    return sorted(written)


__all__ = ["CLASS_HEADER", "class_of", "emit_length_routed", "envoy_config", "short_body_bytes"]
