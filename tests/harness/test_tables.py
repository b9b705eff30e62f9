"""Terminal tables: x_val column, baseline first, spreads, footnotes and the average row.
"""

from __future__ import annotations

import math

import pytest

from harness.error_line import CONTEXT_LOST_NOTE, error_line
from harness.report.results import Record
from harness.report.table import AVERAGE_NOTE, TableData, render
from tests.helpers import sample_exp_records


def test_average_row_uses_geometric_mean_for_speedup_and_arithmetic_otherwise() -> None:
    data = TableData(sample_exp_records(), "numel")
    averages = dict(zip(data.header()[1:], data.averages(), strict=True))
    assert averages["triton-speedup"] == pytest.approx(math.sqrt(2.0 * 4.0))
    assert averages["eager-latency"] == pytest.approx((2.0 + 8.0) / 2)
    assert averages["triton-latency"] == pytest.approx(1.5)


def test_table_has_xval_column_baseline_first_spread_and_error_footnote() -> None:
    text = render(sample_exp_records(), "numel")
    lines = text.splitlines()
    header = lines[1].split()
    assert header[:3] == ["numel", "eager-latency", "eager-speedup"]
    assert "triton-latency" in header
    assert "2 (±1.0%)" in text
    assert any(line.startswith("average") for line in lines)
    assert AVERAGE_NOTE in text
    assert "ERR[1]" in text and "[1] eager: RuntimeError: out of memory" in text



def test_an_error_footnote_is_the_one_line_that_says_what_went_wrong() -> None:
    """The result file keeps CUDA's whole text; the table keeps the message and, for the cell
    that lost the CUDA context, that the run went on in a fresh process."""
    full = ("AcceleratorError: CUDA error: an illegal memory access was encountered\n"
            "Search for `cudaErrorIllegalAddress' in https://docs.nvidia.com/cuda/ for more information.\n"
            "CUDA kernel errors might be asynchronously reported at some other API call\n"
            f"Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions. {CONTEXT_LOST_NOTE}")
    records = [r for r in sample_exp_records() if r.status != "error"]
    records.append(Record("exp", "fwd", "float32", 8192, "triton", "latency", None, "ms",
                          status="error", error=full))
    text = render(records, "numel")
    footnote = next(line for line in text.splitlines() if line.startswith("[1]"))
    assert footnote == ("[1] triton: AcceleratorError: CUDA error: an illegal memory access was encountered "
                        f"{CONTEXT_LOST_NOTE}")
    assert "TORCH_USE_CUDA_DSA" not in text


def test_a_graph_breaks_error_line_is_dynamos_reason_not_a_traceback_frame() -> None:
    # Python's carets under a frame of the "from user code" trace are not a compiler's caret.
    text = ("GraphBreakError: graph break under torch.compile(fullgraph=True): Call to "
            "`torch._dynamo.graph_break()`\n  Explanation: User-inserted graph break.\n\nfrom user code:\n"
            '   File "/x/compile_support.py", line 22, in frame\n    return fn(*args, **kwargs)\n'
            '           ^^^^^^^^^^^^^^^^^^^\n  File "/x/graph_break_exp.py", line 19, in f\n'
            "    torch._dynamo.graph_break()\n\nSet TORCHDYNAMO_VERBOSE=1 for the internal stack trace")
    assert error_line(text) == ("GraphBreakError: graph break under torch.compile(fullgraph=True): "
                                "Call to `torch._dynamo.graph_break()`")


def test_a_dead_workers_error_line_is_its_cuda_error_not_an_earlier_warning() -> None:
    stderr = ("/some/lib.py:10: UserWarning: something benign\n"
              "terminate called after throwing an instance of 'c10::AcceleratorError'\n"
              "  what():  CUDA error: an illegal memory access was encountered\n"
              "Search for `cudaErrorIllegalAddress' in https://docs.nvidia.com/cuda/ for more information.")
    assert error_line(stderr) == "what():  CUDA error: an illegal memory access was encountered"
