"""``layoutopt catalog engines [ENGINE[==VERSION]]``: engines, versions and the rules layoutopt checks."""

from __future__ import annotations

import click

from layoutopt.cli.common import console, echo_json, format_option, simple_table
from layoutopt.engines.describe import catalog_entries


@click.command("engines")
@click.argument("engine", required=False)
@format_option
def engines(engine: str | None, output_format: str) -> None:
    """Serving engines and versions with their rules, each with the engine source line it comes from.

    ENGINE is a name (every version with data) or name==version, e.g. vllm==0.13.0.
    """
    entries = catalog_entries(engine)
    if output_format == "json":
        echo_json(entries)
        return
    if engine is None:
        table = simple_table("Engines (rules and flags read from each release's wheel)", [
            ("Engine", "left"), ("Version", "left"), ("Default", "left"), ("Flags", "right"), ("Rules", "right"),
            ("Data", "left")])
        table.columns[-1].no_wrap, table.columns[-1].overflow = False, "fold"
        for e in entries:
            data = f"{e['wheel']} ({e['generated']})" if e["wheel"] else "performance-model profile only"
            table.add_row(e["engine"], e["version"] or "-", "yes" if e["default"] else "", str(e["num_flags"]),
                          str(len(e["rules"])), data)
        console().print(table)
        console().print("Show one engine's rules: layoutopt catalog engines vllm==0.13.0")
        return
    for e in entries:
        title = f"{e['engine']}=={e['version']}" if e["version"] else e["engine"]
        if not e["rules"]:
            console().print(f"[bold]{title}[/bold]: " + "; ".join(e.get("notes") or ["no rules"]))
            continue
        table = simple_table(f"{title} rules (from {e['wheel']}, generated {e['generated']})",
                             [("Rule", "left"), ("What the source says", "left"), ("Source", "left")])
        for column in table.columns[1:]:
            column.no_wrap, column.overflow = False, "fold"
        for rule in e["rules"]:
            table.add_row(rule["rule"], rule["summary"], rule["source"] or "(flag table)")
        console().print(table)
        console().print(f"quantization methods: {', '.join(e['quantization_methods'])}")
        console().print(f"--kv-cache-dtype choices: {', '.join(map(str, e['kv_cache_dtypes']))}")
        if e.get("bench"):
            console().print(f"serving benchmark: {' '.join(e['bench']['program'])} ({e['bench']['num_flags']} flags)")
        if e.get("router"):
            r = e["router"]
            console().print(f"router: {r['package']} {r['version']}, {' '.join(r['program'])} ({r['num_flags']} flags)")
