"""Write a plan's deployable outputs into a folder, touching only the files emit owns.

    from layoutopt import api
    files = api.emit(plan, "out/", engine="vllm", model_id="Qwen/Qwen3-32B")

Layout of the folder::

    plan.json  report.md  launch/<instance>.sh  router/router.sh  k8s/<pool>.yaml  k8s/router.yaml
    bench/bench.sh  plots/<name>.png|.svg  .layoutopt-emit.json

``.layoutopt-emit.json`` lists the files the last emit wrote. A folder that holds other files and
no such list is refused unless ``force``; with ``force`` (or a list) emit replaces only its own
files, removes those an earlier emit wrote that this one does not, and leaves everything else.
Every artifact is rendered in memory first and validated; each file is written to a temporary
sibling and renamed into place, and the list is written last.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from layoutopt.errors import InputError
from layoutopt.io_safe import dumps_json
from layoutopt.plan import Plan
from layoutopt.report import names
from layoutopt.report.deployment import prepare
from layoutopt.report.engine_flags import EngineRelease, as_release
from layoutopt.report.kubernetes import KubernetesOptions, default_image, kubernetes_manifests
from layoutopt.report.launch import DEFAULT_GPUS_PER_NODE, expand_instances, launch_scripts
from layoutopt.report.markdown import base_rate_rps, report_markdown
from layoutopt.report.plots import FrontierPoint, figure_bytes, plan_figures

PLOT_FORMATS = ("png", "svg")
MANIFEST_NAME = ".layoutopt-emit.json"


def render(plan: Plan, *, engine: str | EngineRelease = "vllm", model_id: str | None = None,
           checkpoints: tuple[str, ...] = (), namespace: str = "default", image: str | None = None, frontier: list[FrontierPoint] | None = None,
           gpus_per_node: int = DEFAULT_GPUS_PER_NODE, plots: bool = True,
           kubernetes: KubernetesOptions | None = None) -> dict[str, str | bytes]:
    """Every artifact of ``plan``: relative path -> text or bytes. Pure apart from reading data files."""
    release = as_release(engine)
    names.namespace(namespace)
    if image is not None:
        names.image(image)
    release, deployments = prepare(plan, release, model_id, checkpoints)
    instances = expand_instances(plan, gpus_per_node)
    options = (kubernetes or KubernetesOptions()).model_copy(update={"namespace": namespace, "image": image})
    # Standard JSON (an infinite prediction becomes null + non_finite_values) so load_plan reads it back.
    files: dict[str, str | bytes] = {"plan.json": dumps_json(plan.model_dump(mode="json")) + "\n"}
    files.update(launch_scripts(plan, instances, release, deployments))
    files.update(kubernetes_manifests(plan, instances, release, deployments, options))
    _add_optional(files, plan, instances, release, deployments, options)
    if plots:
        for name, fig in plan_figures(plan, frontier, base_rate_rps(plan)).items():
            for fmt in PLOT_FORMATS:
                files[f"plots/{name}.{fmt}"] = figure_bytes(fig, fmt)
    model = deployments[0].served.hf_id
    files["report.md"] = report_markdown(plan, instances, engine=release.engine, version=release.version, model=model,
                                         files=sorted(files), image=image or default_image(release),
                                         image_given=image is not None)
    return dict(sorted(files.items()))


def _add_optional(files, plan, instances, release, deployments, options) -> None:
    """The router and the benchmark, once those modules are present."""
    try:
        from layoutopt.report.router import router_files
    except ImportError:
        router_files = None
    if router_files is not None:
        files.update(router_files(plan, instances, release, options))
    try:
        from layoutopt.report.bench import bench_files
    except ImportError:
        bench_files = None
    if bench_files is not None:
        files.update(bench_files(plan, instances, release, deployments))


def _read_manifest(out_dir: Path) -> list[str] | None:
    path = out_dir / MANIFEST_NAME
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
        listed = data["files"]
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        raise InputError("out_dir", str(out_dir), f"a folder whose {MANIFEST_NAME} is emit's list of files "
                         "(it is unreadable; remove it or pass --force)") from None
    if not isinstance(listed, list) or not all(isinstance(p, str) for p in listed):
        raise InputError("out_dir", str(out_dir), f"a folder whose {MANIFEST_NAME} lists file names")
    return [p for p in listed if _inside(p)]


def _inside(relative: str) -> bool:
    """A path a manifest may name: relative, no '..', no absolute part."""
    parts = Path(relative).parts
    return bool(parts) and not Path(relative).is_absolute() and ".." not in parts


def _write_file(path: Path, content: str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_symlink() or (path.exists() and not path.is_file()):
        raise InputError("out_dir", str(path), "a path emit can write a file to (it is a link or a folder)")
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(content if isinstance(content, bytes) else content.encode())
        os.chmod(tmp, 0o755 if path.suffix == ".sh" else 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _write_tree(root: Path, files: dict[str, str | bytes]) -> None:
    for relative, content in files.items():
        _write_file(root / relative, content)


def _check_target(out_dir: Path, force: bool) -> list[str]:
    """The files an earlier emit wrote there (to replace or remove); refuses foreign folders."""
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError("out_dir", str(out_dir), "a folder (it is a file)")
    if not out_dir.exists():
        return []
    previous = _read_manifest(out_dir)
    if previous is not None:
        return previous
    if any(out_dir.iterdir()) and not force:
        raise InputError("out_dir", str(out_dir), "an empty folder or one an earlier emit wrote",
                         "it holds other files; pass --force to write emit's files beside them")
    return []


def _remove_stale(out_dir: Path, previous: list[str], current: dict[str, str | bytes]) -> None:
    for relative in previous:
        if relative in current or relative == MANIFEST_NAME:
            continue
        path = out_dir / relative
        if path.is_file() and not path.is_symlink():
            path.unlink()
            parent = path.parent
            while parent != out_dir and parent.is_dir() and not any(parent.iterdir()):
                parent.rmdir()
                parent = parent.parent


def emit(plan: Plan, out_dir: str | Path, *, engine: str | EngineRelease = "vllm", model_id: str | None = None,
         checkpoints: tuple[str, ...] = (), namespace: str = "default", image: str | None = None, frontier: list[FrontierPoint] | None = None,
         gpus_per_node: int = DEFAULT_GPUS_PER_NODE, plots: bool = True, force: bool = False,
         kubernetes: KubernetesOptions | None = None) -> list[Path]:
    """Write every artifact of ``plan`` under ``out_dir``; return the files written, sorted.

    ``checkpoints`` (``PRECISION=ORG/NAME``, as ``solve --checkpoint``) name checkpoints of the pools'
    weight precisions besides the catalog's; ``frontier`` replaces the plot points derived from the plan and its alternatives;
    ``gpus_per_node`` shapes the generic nodes used when the plan has no placement; ``force``
    writes into a folder holding files emit did not write (only emit's own files are touched).
    """
    files = render(plan, engine=engine, model_id=model_id, checkpoints=checkpoints, namespace=namespace, image=image, frontier=frontier,
                   gpus_per_node=gpus_per_node, plots=plots, kubernetes=kubernetes)
    out_dir = Path(out_dir)
    previous = _check_target(out_dir, force)
    out_dir.mkdir(parents=True, exist_ok=True)
    # The list names every file this emit may leave behind before any is written, so an
    # interrupted emit still leaves a folder a rerun recognises as its own.
    _write_manifest(out_dir, sorted(set(previous) | set(files)))
    _write_tree(out_dir, files)
    _remove_stale(out_dir, previous, files)
    _write_manifest(out_dir, sorted(files))
    return sorted([out_dir / relative for relative in files] + [out_dir / MANIFEST_NAME])


def _write_manifest(out_dir: Path, relatives: list[str]) -> None:
    manifest = {"written_by": "layoutopt emit", "files": relatives}
    _write_file(out_dir / MANIFEST_NAME, json.dumps(manifest, indent=2) + "\n")
