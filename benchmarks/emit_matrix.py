"""Emit matrix: do the files of real plans start on every supported engine release?

    python benchmarks/emit_matrix.py [--cases qwen3-32b@32xH100,deepseek-v3@'$400/h'] [--releases vllm==0.33.0]

Solves each case (model @ budget, built-in workload and SLO), renders its deployment files for
every supported engine release (``report.engine_flags.SUPPORTED_VERSIONS``) and checks them with
the parsers the files meet in the field, not with our own lists:

- every launch script with ``bash -n``;
- every engine command line (scripts and manifests) against the release's flag table extracted
  from the engine's own argument parser (``unknown_flags``, ``bad_choices``);
- every Kubernetes object against the Kubernetes JSON schemas (``kubernetes_validate``, strict),
  a LeaderWorkerSet's leader and worker templates as pod templates;
- ``emit`` itself refuses a plan that breaks a rule of the release (``engines.plan_rule_violations``):
  such a refusal is printed, not counted as a problem.

Prints one line per case and release with what was refused, then the totals; exits 1 when any
check failed. Takes about a minute (the solves).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from test_report_flags import manifest_commands  # noqa: E402
from test_report_helpers import engine_commands  # noqa: E402
from test_report_kubernetes import _as_pod_template, _validate  # noqa: E402

from layoutopt.api import solve  # noqa: E402
from layoutopt.errors import InputError, LayoutoptError  # noqa: E402
from layoutopt.report.emit import render  # noqa: E402
from layoutopt.report.engine_flags import (  # noqa: E402
    SUPPORTED_VERSIONS, bad_choices, load_engine_flags, parse_engine, unknown_flags,
)

# Dense and MoE, one and several GPU types, NVIDIA and AMD, aggregated and disaggregated plans;
# sparse-attention MLA (GLM-5) on Blackwell and an INT4 multimodal MLA checkpoint (Kimi-K2.5).
CASES = ("qwen3-32b@32xH100", "deepseek-v3@$400/h", "llama-3.1-70b@16xH100", "qwen3-30b-a3b@8xB200",
         "llama-3.1-70b@8xH100+8xB200", "deepseek-v3@16xH200", "qwen3-32b@8xMI300X", "glm-5@16xB200",
         "kimi-k2.5@16xH200")
RELEASES = tuple(f"{engine}=={version}" for engine, versions in SUPPORTED_VERSIONS.items() for version in versions)


class Tally:
    def __init__(self) -> None:
        self.emits = self.scripts = self.manifests = self.flags = 0
        self.problems: list[str] = []

    def problem(self, text: str) -> None:
        self.problems.append(text)
        print(f"   PROBLEM {text}", flush=True)


def _bash_syntax_error(text: str) -> str | None:
    with tempfile.NamedTemporaryFile("w", suffix=".sh") as script:
        script.write(text)
        script.flush()
        done = subprocess.run(["bash", "-n", script.name], capture_output=True, text=True)
    return done.stderr.strip() or "bash -n failed" if done.returncode else None


def _kubernetes_objects(text: str) -> list[dict]:
    """The objects to validate: each document, an LWS's leader and worker templates as pod templates."""
    objects = []
    for doc in yaml.safe_load_all(text):
        if doc["kind"] == "LeaderWorkerSet":
            template = doc["spec"]["leaderWorkerTemplate"]
            objects += [_as_pod_template(template[k], doc["metadata"]["namespace"])
                        for k in ("leaderTemplate", "workerTemplate") if k in template]
        else:
            objects.append(doc)
    return objects


def check_files(files: dict[str, str], release: str, tally: Tally) -> None:
    ref = parse_engine(release)
    flags = load_engine_flags(ref.engine, ref.version)
    for path, text in sorted(files.items()):
        commands: list[list[str]] = []
        if path.endswith(".sh"):
            tally.scripts += 1
            error = _bash_syntax_error(text)
            if error:
                tally.problem(f"{release} {path}: {error}")
        if path.startswith("launch/"):
            commands = engine_commands(text)
        elif path.startswith("k8s/") and path.endswith((".yaml", ".yml")):
            for obj in _kubernetes_objects(text):
                tally.manifests += 1
                try:
                    _validate(obj)
                except Exception as exc:  # the validator's own error types
                    tally.problem(f"{release} {path}: schema: {str(exc)[:300]}")
            commands = [] if "router" in path else manifest_commands(text)
        for argv in commands:
            tally.flags += sum(token.startswith("--") for token in argv)
            bad = unknown_flags(argv, flags) + bad_choices(argv, flags)
            if bad:
                tally.problem(f"{release} {path}: flags {bad}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default=",".join(CASES), help="model@budget, comma-separated")
    parser.add_argument("--releases", default=",".join(RELEASES))
    args = parser.parse_args()
    tally = Tally()
    for case in args.cases.split(","):
        model, budget = case.split("@", 1)
        try:
            plan = solve(model, budget)
        except LayoutoptError as exc:  # infeasible or bad input: reported, not a file problem
            print(f"{case}: no plan ({str(exc)[:160]})")
            continue
        pools = "; ".join(f"{p.role} {p.instances}x{p.gpu} {p.layout.short_name()}" for p in plan.pools)
        print(f"{case}: {pools}", flush=True)
        for release in args.releases.split(","):
            try:
                files = render(plan, engine=release, plots=False)
            except InputError as exc:
                print(f"   {release}: emit refused: {str(exc)[:200]}")
                continue
            tally.emits += 1
            check_files(files, release, tally)
    print(f"emits {tally.emits}, scripts {tally.scripts}, Kubernetes objects {tally.manifests}, "
          f"engine flags checked {tally.flags}, problems {len(tally.problems)}")
    return 1 if tally.problems else 0


if __name__ == "__main__":
    sys.exit(main())
