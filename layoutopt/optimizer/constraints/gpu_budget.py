"""GPUs of each type used by the plan stay within what the budget makes available."""

from __future__ import annotations

from layoutopt.optimizer.variables import LayoutVariables


class GpuBudget:
    """sum_c gpus_c * n_c <= B_g for every GPU type g with a count in the budget."""

    name = "gpu budget"

    def build(self, variables: LayoutVariables) -> None:
        for gpu, limit in sorted(variables.table.gpu_limits.items()):
            if not any(c.gpu == gpu for c in variables.table.candidates):
                continue
            # A budget of 32xH100 means no more than 32 H100s across all pools.
            variables.model.add(variables.gpus_of_type(gpu) <= limit).with_name(f"gpu_budget[{gpu}]")
