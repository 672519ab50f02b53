"""``layoutopt emit PLAN.json DIR``: launch scripts, Kubernetes manifests, report and plots."""

from __future__ import annotations

import click

from layoutopt.plan import load_plan
from layoutopt.report.engine_flags import ENGINES


@click.command("emit")
@click.argument("plan_file", type=click.Path(dir_okay=False))
@click.argument("out_dir", type=click.Path(file_okay=False))
@click.option("--engine", type=click.Choice(ENGINES), default="vllm", show_default=True,
              help="serving engine the launch scripts and manifests target")
@click.option("--model-id", default=None, help="HuggingFace id to serve (default: the catalog's id for the plan's model)")
@click.option("--namespace", default="default", show_default=True, help="Kubernetes namespace of the manifests")
@click.option("--image", default=None, help="container image (default: the engine's official image for its version)")
def command(plan_file: str, out_dir: str, engine: str, model_id: str | None, namespace: str, image: str | None) -> None:
    """Write plan.json, report.md, launch/*.sh, k8s/*.yaml and plots/* for PLAN_FILE into OUT_DIR."""
    from layoutopt.report.emit import emit

    plan = load_plan(plan_file)
    written = emit(plan, out_dir, engine=engine, model_id=model_id, namespace=namespace, image=image)
    click.echo(f"wrote {len(written)} files to {out_dir}:")
    for path in written:
        click.echo(f"  {path}")
