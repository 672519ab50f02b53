"""``layoutopt emit PLAN.json DIR``: launch scripts, router, Kubernetes manifests, benchmark, report and plots."""

from __future__ import annotations

import click

from layoutopt.errors import InputError
from layoutopt.plan import Plan, load_plan


def plan_engine(plan: Plan) -> str:
    """The engine the plan was made for, when layoutopt writes launch files for it."""
    from layoutopt.report.engine_flags import parse_engine

    try:
        return parse_engine(plan.engine, "plan.engine").spec
    except InputError:
        raise InputError("--engine", None, "vllm, vllm==0.13.0, sglang or sglang==0.5.3",
                         f"the plan was made for {plan.engine!r}, which layoutopt writes no launch files for") from None


@click.command("emit")
@click.argument("plan_file", type=click.Path(dir_okay=False))
@click.argument("out_dir", type=click.Path(file_okay=False))
@click.option("--engine", default=None,
              help="serving engine and version: vllm (0.33.0), vllm==0.13.0, sglang (0.5.23), sglang==0.5.3 "
                   "(default: the plan's engine)")
@click.option("--model-id", default=None,
              help="HuggingFace id to serve (default: the catalog's id, or its pre-quantized checkpoint); "
                   "required when the plan's model is a config.json")
@click.option("--checkpoint", "checkpoints", multiple=True, metavar="PRECISION=ORG/NAME",
              help="a checkpoint of one weight precision to serve (as given to solve --checkpoint), e.g. "
                   "fp4=nvidia/Qwen3-32B-FP4; repeatable")
@click.option("--namespace", default="default", show_default=True, help="Kubernetes namespace of the manifests")
@click.option("--image", default=None, help="container image (default: the engine's official image for its version)")
@click.option("--hf-token-secret", default="hf-token", show_default=True,
              help="Kubernetes Secret holding the HuggingFace token (key 'token'; optional at run time)")
@click.option("--model-cache-pvc", default=None, help="PersistentVolumeClaim for the model cache (default: an emptyDir)")
@click.option("--rdma-resource", default="rdma/ib", show_default=True,
              help="device-plugin resource pods request where KV crosses the NIC; 'none' for none")
@click.option("--pin-nodes/--no-pin-nodes", default=None,
              help="pin pods to the placement's host names (default: only for plans placed on a --cluster file)")
@click.option("--force", is_flag=True, help="write into a folder holding other files (only emit's own files are touched)")
def command(plan_file: str, out_dir: str, engine: str | None, model_id: str | None, checkpoints: tuple[str, ...],
            namespace: str, image: str | None,
            hf_token_secret: str, model_cache_pvc: str | None, rdma_resource: str, pin_nodes: bool | None,
            force: bool) -> None:
    """Write plan.json, report.md, launch/*.sh, k8s/*.yaml and plots/* for PLAN_FILE into OUT_DIR.

    OUT_DIR may be '.'; a folder holding other files is refused unless --force, and emit lists
    the files it wrote in OUT_DIR/.layoutopt-emit.json so a rerun replaces only those.
    """
    from layoutopt.report.emit import emit
    from layoutopt.report.kubernetes import KubernetesOptions

    plan = load_plan(plan_file)
    if engine is None:
        engine = plan_engine(plan)
    rdma = None if rdma_resource.lower() == "none" else rdma_resource
    options = KubernetesOptions(hf_token_secret=hf_token_secret, model_cache_pvc=model_cache_pvc,
                                rdma_resource=rdma, pin_nodes=pin_nodes)
    written = emit(plan, out_dir, engine=engine, model_id=model_id, checkpoints=checkpoints, namespace=namespace, image=image, force=force,
                   kubernetes=options)
    click.echo(f"wrote {len(written)} files to {out_dir}:")
    for path in written:
        click.echo(f"  {path}")
