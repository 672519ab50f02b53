"""Write a plan's deployable outputs into one directory, all or nothing.

    from layoutopt import api
    files = api.emit(plan, "out/", engine="vllm", model_id="Qwen/Qwen3-32B")

Layout of the directory::

    plan.json  report.md  launch/<instance>.sh  k8s/<pool>.yaml  plots/<name>.png|.svg

Every artifact is rendered in memory first, written to a temporary sibling directory, and only
then moved into place; a failure leaves the previous contents (or nothing) behind.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from layoutopt.errors import InputError, LayoutoptError
from layoutopt.plan import Plan
from layoutopt.report.engine_flags import ENGINES, load_engine_flags
from layoutopt.report.kubernetes import kubernetes_manifests
from layoutopt.report.launch import DEFAULT_GPUS_PER_NODE, expand_instances, launch_scripts
from layoutopt.report.markdown import base_rate_rps, report_markdown
from layoutopt.report.plots import FrontierPoint, figure_bytes, plan_figures

PLOT_FORMATS = ("png", "svg")


def resolve_model_id(plan: Plan, model_id: str | None) -> str:
    """``model_id`` if given, else the catalog's HuggingFace id of ``plan.model``, else the name."""
    if model_id:
        return model_id
    try:
        from layoutopt.model_catalog.catalog import get_model

        return get_model(plan.model).hf_id or plan.model
    except (LayoutoptError, ImportError, OSError):
        return plan.model


def render(plan: Plan, *, engine: str = "vllm", model_id: str | None = None, namespace: str = "default",
           image: str | None = None, frontier: list[FrontierPoint] | None = None,
           gpus_per_node: int = DEFAULT_GPUS_PER_NODE, plots: bool = True) -> dict[str, str | bytes]:
    """Every artifact of ``plan``: relative path -> text or bytes. Pure apart from reading data files."""
    if engine not in ENGINES:
        raise InputError("--engine", engine, f"one of {', '.join(ENGINES)}")
    load_engine_flags(engine)
    if not plan.pools or plan.totals is None:
        raise InputError("plan", plan.status, "a plan with pools (the solver found none)")
    model = resolve_model_id(plan, model_id)
    instances = expand_instances(plan, gpus_per_node)
    files: dict[str, str | bytes] = {"plan.json": json.dumps(plan.model_dump(mode="json"), indent=2) + "\n"}
    files.update(launch_scripts(plan, instances, engine=engine, model=model))
    files.update(kubernetes_manifests(plan, instances, engine=engine, model=model, namespace=namespace, image=image))
    if plots:
        for name, fig in plan_figures(plan, frontier, base_rate_rps(plan)).items():
            for fmt in PLOT_FORMATS:
                files[f"plots/{name}.{fmt}"] = figure_bytes(fig, fmt)
    files["report.md"] = report_markdown(plan, instances, engine=engine, model=model, files=sorted(files))
    return dict(sorted(files.items()))


def _write_tree(root: Path, files: dict[str, str | bytes]) -> None:
    for relative, content in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
        if relative.endswith(".sh"):
            path.chmod(0o755)


def _install(staging: Path, out_dir: Path) -> None:
    """Move ``staging`` to ``out_dir``; an earlier emit output there is replaced as a whole."""
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError("out_dir", str(out_dir), "a directory (it is a file)")
    if out_dir.exists() and any(out_dir.iterdir()):
        if not (out_dir / "plan.json").is_file():
            raise InputError("out_dir", str(out_dir), "an empty directory or an earlier emit output "
                             "(it holds other files)")
        old = Path(tempfile.mkdtemp(dir=out_dir.parent, prefix=f".{out_dir.name}.old-"))
        os.replace(out_dir, old / "previous")
        os.replace(staging, out_dir)
        shutil.rmtree(old, ignore_errors=True)
        return
    if out_dir.exists():
        out_dir.rmdir()
    os.replace(staging, out_dir)


def emit(plan: Plan, out_dir: str | Path, *, engine: str = "vllm", model_id: str | None = None,
         namespace: str = "default", image: str | None = None, frontier: list[FrontierPoint] | None = None,
         gpus_per_node: int = DEFAULT_GPUS_PER_NODE, plots: bool = True) -> list[Path]:
    """Write every artifact of ``plan`` under ``out_dir``; return the files written, sorted.

    ``frontier`` replaces the plot points derived from the plan and its alternatives (the solver
    can pass the best plans of the budget); ``gpus_per_node`` shapes the generic nodes used when
    the plan has no placement.
    """
    files = render(plan, engine=engine, model_id=model_id, namespace=namespace, image=image,
                   frontier=frontier, gpus_per_node=gpus_per_node, plots=plots)
    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=out_dir.parent, prefix=f".{out_dir.name}.tmp-"))
    try:
        staging.chmod(0o755)  # mkdtemp makes it private; the output is an ordinary directory
        _write_tree(staging, files)
        _install(staging, out_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return [out_dir / relative for relative in files]
