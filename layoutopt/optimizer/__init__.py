"""The layout optimizer: candidates -> integer table -> CP-SAT -> Plan.

Laid out like the CP-SAT Primer's examples, one concern per module:

- data: ``space`` (layouts proposed), ``filters`` (named drop rules), ``enumeration`` (perf model
  calls, the ``CandidateTable`` of ``candidates``), ``scaling`` (the one float -> int step);
- model: ``variables`` (the decision variables), ``constraints/`` (one module per family),
  ``objectives``, ``solver`` (the formulation in its docstring, Dinkelbach, statuses),
  ``search`` (top-k alternatives);
- cluster files: ``cluster_fit`` (free GPUs, NVLink domains, packing limits, KV links of a cluster),
  ``placing`` (the placement stage and its feedback into a second solve);
- checks and results: ``validate`` (no solver import), ``assemble``/``latency``/``explain``/
  ``diagnose``/``plan_builder`` (the ``Plan`` of ``plan``), ``solve`` (the public entry point).

Rendering lives in ``layoutopt.report.plan_table``.
"""
