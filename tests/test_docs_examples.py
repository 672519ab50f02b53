"""The documented examples run as written, so the docs cannot silently rot.

- every ``layoutopt ...`` command line of README.md's "Using it" block runs with exit status 0 and
  no traceback (the slow ones are in ``SLOW_COMMANDS``, the known product bugs in ``KNOWN_BUGS``);
- every Python block of docs/api.md runs as a script (slow ones in ``SLOW_BLOCKS``);
- every block that shows output is run and its output compared: ``pycon`` blocks of README.md and
  docs/*.md as doctests, ``console`` blocks (``$ layoutopt ...`` then the output, ``...`` matching
  anything) by running each command; a stale figure in the docs fails the suite;
- every SLO and workload shape shown in examples/README.md loads.

Commands run in a scratch folder holding a link to ``examples/``, so the documented relative paths
(``examples/slo.yaml``, ``plan.json``, ``deploy/``) work and nothing is written into the repository.
A command that reads a file another documented command writes (``simulate plan.json`` after
``solve ... --output plan.json``) runs that command first when needed.
"""

from __future__ import annotations

import doctest
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
API_DOC = REPO / "docs" / "api.md"
EXAMPLES_README = REPO / "examples" / "README.md"

TIMEOUT_S = 120  # a hang, not a budget: every command kept here takes about 1-4 s
LAYOUTOPT = [sys.executable, "-c", "import sys; from layoutopt.cli import main; sys.argv[0] = 'layoutopt'; main()"]

# Commands (matched by a substring) left out because they take too long for the suite, and why.
SLOW_COMMANDS = {
    "--model deepseek-v3 --budget '$400/h'": (
        "a dollar cap opens every GPU type of the catalog: ~65,000 DeepSeek-V3 layouts are "
        "enumerated and bounded, about 9-10 s on 2 idle cores; tests/test_budget.py covers parsing dollar budgets"),
}
# docs/api.md Python blocks (matched by a substring) left out, and why.
SLOW_BLOCKS = {
    "api.sweep(": "a 36-cell sweep (2 models x 3 GPU types x 6 rates), about 5 s; tests/test_sweep*.py cover sweeps",
}


def _fenced_blocks(text: str, lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL)


def _section(text: str, heading: str) -> str:
    """The text under a ``## heading`` up to the next heading of the same level."""
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end != -1 else len(text)]


def readme_commands() -> list[str]:
    """The ``layoutopt`` lines of the first bash block under "Using it", continuations joined."""
    block = _fenced_blocks(_section(README.read_text(), "Using it"), "bash")[0]
    commands = []
    for line in block.replace("\\\n", " ").splitlines():
        line = " ".join(line.split())
        if line.startswith("layoutopt "):
            commands.append(line)
    return commands


COMMANDS = readme_commands()


def _mark(command: str):
    for key, reason in SLOW_COMMANDS.items():
        if key in command:
            return [pytest.mark.skip(reason=f"slow: {reason}")]
    return []


def _command_id(index: int, command: str) -> str:
    words = shlex.split(command)
    return f"{index:02d}-{'-'.join(words[1:3]) if words[1] == 'catalog' else words[1]}"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("docs")
    (folder / "examples").symlink_to(REPO / "examples", target_is_directory=True)
    return folder


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(args, check=False, cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT_S)


def _run_layoutopt(command: str, cwd: Path) -> subprocess.CompletedProcess:
    return _run(LAYOUTOPT + shlex.split(command)[1:], cwd)


def _producers(command: str) -> list[str]:
    """Earlier README commands whose ``--output FILE`` this command reads."""
    words = shlex.split(command)
    found = []
    for other in COMMANDS:
        other_words = shlex.split(other)
        if other is command or "--output" not in other_words:
            continue
        output = other_words[other_words.index("--output") + 1]
        if output in words[2:] and "--output" not in words:
            found.append(other)
    return found


def test_readme_block_is_found():
    assert len(COMMANDS) >= 10 and all(c.startswith("layoutopt ") for c in COMMANDS)
    # each line is one command as a shell runs it: no pipes of alternatives
    assert not any(" | " in c for c in COMMANDS), [c for c in COMMANDS if " | " in c]
    assert any(c.startswith("layoutopt solve") for c in COMMANDS)
    assert "layoutopt catalog gpus" in COMMANDS and "layoutopt catalog nodes" in COMMANDS


@pytest.mark.parametrize(
    "command",
    [pytest.param(c, marks=_mark(c), id=_command_id(i, c)) for i, c in enumerate(COMMANDS)],
)
def test_readme_command_runs(command: str, workdir: Path):
    for producer in _producers(command):
        output = shlex.split(producer)[shlex.split(producer).index("--output") + 1]
        if not (workdir / output).exists():
            done = _run_layoutopt(producer, workdir)
            assert done.returncode == 0, f"{producer}\n{done.stderr[-3000:]}"
    done = _run_layoutopt(command, workdir)
    assert "Traceback" not in done.stderr, f"{command}\n{done.stderr[-3000:]}"
    assert done.returncode == 0, f"{command}: exit {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    assert done.stdout.strip(), f"{command}: printed nothing"

    words = shlex.split(command)
    if words[1] == "solve" and "--model" not in words:
        # README: "the output says which defaults it used".
        assert "default used: model: qwen3-32b" in done.stdout
    if "--output" in words:
        assert (workdir / words[words.index("--output") + 1]).is_file()
    emitted = words[words.index("--emit") + 1] if "--emit" in words else words[3] if words[1] == "emit" else None
    if emitted:
        scripts = sorted((workdir / emitted / "launch").glob("*.sh"))
        assert scripts and (workdir / emitted / "plan.json").is_file()
        for script in scripts:
            checked = _run(["bash", "-n", str(script)], workdir)
            assert checked.returncode == 0, f"{script.name}: {checked.stderr}"


API_BLOCKS = _fenced_blocks(API_DOC.read_text(), "python")


def _block_marks(block: str):
    for key, reason in SLOW_BLOCKS.items():
        if key in block:
            return [pytest.mark.skip(reason=f"slow: {reason}")]
    return []


def test_api_doc_blocks_are_found():
    assert API_BLOCKS and any("api.sweep(" in block for block in API_BLOCKS)


@pytest.mark.parametrize(
    "block",
    [pytest.param(b, marks=_block_marks(b), id=f"block{i}") for i, b in enumerate(API_BLOCKS)],
)
def test_api_doc_python_block_runs(block: str, workdir: Path, tmp_path: Path):
    script = tmp_path / "snippet.py"
    script.write_text(block)
    done = _run([sys.executable, str(script)], workdir)
    assert done.returncode == 0, f"docs/api.md block failed:\n{block}\n{done.stderr[-3000:]}"


def _yaml_blocks(path: Path, heading: str) -> list[str]:
    return _fenced_blocks(_section(path.read_text(), heading), "yaml")


def test_examples_readme_slo_block_loads(tmp_path: Path):
    from layoutopt import api

    (block,) = _yaml_blocks(EXAMPLES_README, "SLO file")
    (tmp_path / "slo.yaml").write_text(block)
    slo = api.load_slo(tmp_path / "slo.yaml")
    assert slo.attainment == 0.9


def test_examples_readme_length_shapes_load(tmp_path: Path):
    """Each ``input_tokens:`` line of the workload-file block is a valid length distribution."""
    from layoutopt import api

    (block,) = _yaml_blocks(EXAMPLES_README, "Workload file")
    lines = [line for line in block.splitlines() if line.startswith("input_tokens:")]
    assert len(lines) >= 5
    for line in lines:
        path = tmp_path / "workload.yaml"
        path.write_text(f"{line}\noutput_tokens: 100\n")
        workload = api.load_workload(path)
        assert workload.input_tokens is not None, line


def test_example_yaml_files_load():
    from layoutopt import api
    from layoutopt.topology import load_cluster

    examples = REPO / "examples"
    for path in sorted(examples.glob("slo*.yaml")):
        api.load_slo(path)
    for path in sorted(examples.glob("workload-*.yaml")):
        api.load_workload(path)
    for path in sorted((examples / "clusters").glob("*.yaml")):
        load_cluster(path)
    assert yaml.safe_load((examples / "sweep.yaml").read_text())["models"]


DOC_FILES = [README, *sorted((REPO / "docs").glob("*.md"))]
PYCON_BLOCKS = [(path, block) for path in DOC_FILES for block in _fenced_blocks(path.read_text(), "pycon")]
CONSOLE_BLOCKS = [(path, block) for path in DOC_FILES for block in _fenced_blocks(path.read_text(), "console")]
_FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def test_output_blocks_are_found():
    assert any(path == API_DOC and "api.solve(" in block for path, block in PYCON_BLOCKS) and CONSOLE_BLOCKS


@pytest.mark.parametrize("path,block", [pytest.param(p, b, id=f"{p.name}-{i}") for i, (p, b) in enumerate(PYCON_BLOCKS)])
def test_pycon_block_prints_what_it_shows(path: Path, block: str, workdir: Path, monkeypatch):
    monkeypatch.chdir(workdir)
    test = doctest.DocTestParser().get_doctest(block, {}, f"{path.name} pycon block", str(path), 0)
    runner = doctest.DocTestRunner(optionflags=_FLAGS)
    report: list[str] = []
    runner.run(test, out=report.append)
    assert runner.failures == 0, f"{path.name}: the block's shown output is stale:\n" + "".join(report)


def console_commands(block: str) -> list[tuple[str, str]]:
    """(command, expected output) per ``$ `` line of a console block."""
    found: list[tuple[str, list[str]]] = []
    for line in block.splitlines():
        if line.startswith("$ "):
            found.append((line[2:], []))
        elif found:
            found[-1][1].append(line)
    return [(command, "\n".join(lines).strip() + "\n") for command, lines in found]


@pytest.mark.parametrize("path,block", [pytest.param(p, b, id=f"{p.name}-{i}") for i, (p, b) in enumerate(CONSOLE_BLOCKS)])
def test_console_block_prints_what_it_shows(path: Path, block: str, workdir: Path):
    checker = doctest.OutputChecker()
    for command, expected in console_commands(block):
        assert command.startswith("layoutopt "), command
        done = _run_layoutopt(command, workdir)
        assert done.returncode == 0, f"{command}: exit {done.returncode}\n{done.stderr[-2000:]}"
        shown = "\n".join(line.rstrip() for line in done.stdout.strip().splitlines()) + "\n"
        assert checker.check_output(expected, shown, _FLAGS), (
            f"{path.name}: `{command}` no longer prints what the docs show.\n--- docs\n{expected}--- now\n{shown}")
