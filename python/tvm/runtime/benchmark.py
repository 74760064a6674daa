"""Results of timing a function with :meth:`tvm.runtime.Module.time_evaluator`."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["BenchmarkResult"]


class BenchmarkResult:
    """The seconds per call of each measurement, with their summary statistics (in seconds)."""

    def __init__(self, results: Sequence[float]) -> None:
        if not results:
            raise ValueError("a BenchmarkResult needs at least one measurement")
        # Imported here: `statistics` (with fractions, decimal) adds milliseconds to `import tvm`.
        import statistics

        self.results: tuple[float, ...] = tuple(float(r) for r in results)
        self.mean = statistics.fmean(self.results)
        self.median = statistics.median(self.results)
        self.min = min(self.results)
        self.max = max(self.results)
        self.std = statistics.pstdev(self.results)

    def __repr__(self) -> str:
        return (
            f"BenchmarkResult(min={self.min}, mean={self.mean}, median={self.median}, "
            f"max={self.max}, std={self.std}, results={list(self.results)})"
        )

    def __str__(self) -> str:
        columns = ("mean (ms)", "median (ms)", "max (ms)", "min (ms)", "std (ms)")
        values = (self.mean, self.median, self.max, self.min, self.std)
        header = "".join(f"{c:>14}" for c in columns)
        row = "".join(f"{v * 1e3:>14.4f}" for v in values)
        return f"Execution time summary:\n{header}\n{row}\n"
