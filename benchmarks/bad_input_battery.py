"""Thousands of hostile and absurd inputs through every loader and every CLI command; counts by outcome.

    PYTHONPATH=$PWD python benchmarks/bad_input_battery.py            # about 4,000 cases
    PYTHONPATH=$PWD python benchmarks/bad_input_battery.py --scale 3  # three times as many

The cases come from ``tests/input_fuzz.py`` (the same strategies as the property tests, with
more examples): loaders get arbitrary nested documents (NaN, infinities, huge integers, booleans,
unicode) as YAML/JSON/CSV and arbitrary bytes; every command except ``serve`` gets 1-3 options
set to hostile values. Outcomes: ``loaded``/``plan`` (0), ``infeasible`` (1), ``bad input``
(2, one line) are as specified; ``internal error`` (3), ``traceback`` or any other exception is
a bug, and the first few are printed with their command lines. Exit status 1 when a bug is seen.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import input_fuzz  # noqa: E402

# examples per target at --scale 1 (slow commands get fewer)
LOADER_DOCUMENTS = 250
LOADER_BYTES = 60
COMMAND_CASES = {"solve": 150, "estimate": 500, "simulate": 300, "emit": 40, "sweep": 40, "calibrate": 200}
OTHER_COMMAND_CASES = 100


def _run(strategy, count: int, record) -> None:
    @settings(max_examples=count, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(case=strategy)
    def each(case):
        record(case)

    each()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every case count")
    args = parser.parse_args()
    scratch = input_fuzz.Scratch()
    outcomes: dict[str, Counter] = {}
    bugs: list[str] = []
    started = time.perf_counter()
    try:
        for name, (load, suffix) in sorted(input_fuzz.loaders().items()):
            counter = outcomes.setdefault(f"loader {name}", Counter())

            def record_loader(value, load=load, suffix=suffix, counter=counter, name=name):
                path = scratch.root / f"doc{suffix}"
                path.write_bytes(value if isinstance(value, bytes) else input_fuzz.serialize(value, suffix))
                outcome = input_fuzz.run_loader(load, path)
                counter[outcome if outcome in ("loaded", "bad input") else "exception"] += 1
                if outcome not in ("loaded", "bad input"):
                    bugs.append(f"loader {name}: {outcome}")

            _run(input_fuzz.json_values(), int(LOADER_DOCUMENTS * args.scale), record_loader)
            _run(st.binary(max_size=400), int(LOADER_BYTES * args.scale), record_loader)
        for command in sorted(input_fuzz._commands()):
            counter = outcomes.setdefault(f"cli {command}", Counter())

            def record_cli(case, counter=counter):
                status, err = input_fuzz.run_case(case, scratch)
                outcome = input_fuzz.classify(status, err)
                counter[outcome] += 1
                if outcome in input_fuzz.BUGS or outcome.startswith("exit"):
                    bugs.append(f"{' '.join(case)!r}: {err.strip()[:300]}")

            count = int(COMMAND_CASES.get(command, OTHER_COMMAND_CASES) * args.scale)
            _run(input_fuzz.cli_case(scratch, command), count, record_cli)
    finally:
        scratch.close()
    elapsed_s = time.perf_counter() - started
    columns = ["loaded", "plan", "infeasible", "bad input", "internal error", "traceback", "exception"]
    print(f"{'target':<26}" + "".join(f"{c:>15}" for c in columns) + f"{'other':>8}")
    total: Counter = Counter()
    for target, counter in outcomes.items():
        total.update(counter)
        other = sum(v for k, v in counter.items() if k not in columns)
        print(f"{target:<26}" + "".join(f"{counter.get(c, 0):>15,}" for c in columns) + f"{other:>8,}")
    print(f"{'all':<26}" + "".join(f"{total.get(c, 0):>15,}" for c in columns)
          + f"{sum(v for k, v in total.items() if k not in columns):>8,}")
    print(f"{sum(total.values()):,} cases in {elapsed_s:,.0f} s; {len(bugs)} bugs")
    for bug in bugs[:10]:
        print(f"  bug: {bug}")
    return 1 if bugs else 0


if __name__ == "__main__":
    sys.exit(main())
