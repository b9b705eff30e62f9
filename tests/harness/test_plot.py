"""Plots: a panel per (op, mode, dtype) from a result file or a run, the ceiling of each cell's
traffic, failed and skipped cells marked rather than drawn at zero, and the plot command's errors.
"""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest

from harness.report.plot import plot_results
from harness.report.results import Record, read_json, write_json
from tests.helpers import ROOT, run_cli

RMS_NORM_BWD = ROOT / "results" / "h200" / "rms_norm" / "rms_norm_mode_bwd_bf16_r7.json"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
SHAPES = (1024, 4096, 8192)


def _gbps(backend: str, x: int, value: float | None, status: str = "ok", mode: str = "fwd") -> Record:
    return Record("exp", mode, "float32", x, backend, "gbps", value, "GB/s", status=status,
                  error=None if status == "ok" else "RuntimeError: boom")


def _accuracy(backend: str, x: int, passed: bool) -> Record:
    return Record("exp", "fwd", "float32", x, backend, "accuracy", float(passed), "bool")


def _lines(figure, panel: int = 0) -> dict[str, object]:
    """The artists of one panel's lines and marks, by label or gid."""
    ax = figure.axes[panel]
    return {line.get_gid() or line.get_label(): line for line in ax.get_lines()}


def test_a_committed_result_file_plots_to_png_and_svg(tmp_path: Path) -> None:
    header, records = read_json(RMS_NORM_BWD)
    png, svg = tmp_path / "bwd.png", tmp_path / "bwd.svg"
    plot_results(header, records, png)
    figure = plot_results(header, records, svg)
    assert png.read_bytes().startswith(PNG_MAGIC) and png.stat().st_size > 10_000
    text = svg.read_text()
    for label in ("rms_norm bwd bfloat16", "NVIDIA H200  ·  commit 38ba26b", "measured copy 4218 GB/s",
                  "4096x1024", "eager", "triton", "helion", "torch_compile"):
        assert f">{label}</text>" in text, label
    lines = _lines(figure)
    assert set(lines) == {"eager", "triton", "helion", "torch_compile", "ceiling"}
    assert list(lines["ceiling"].get_ydata()) == [pytest.approx(header["copy_gbps"])] * 9


def test_failed_inaccurate_and_skipped_cells_are_marked_and_not_drawn_at_zero(tmp_path: Path) -> None:
    records = [_gbps("eager", x, 10.0 * (i + 1)) for i, x in enumerate(SHAPES)]
    records += [_gbps("triton", 1024, 12.0), _gbps("triton", 4096, None, "error"),
                _gbps("triton", 8192, 40.0), _accuracy("triton", 8192, passed=False),
                _gbps("helion", 1024, None, "skipped")]
    header = {"device_name": "cpu", "git_commit": "abc", "ceilings_gbps": {"copy": 50.0}}
    figure = plot_results(header, records, tmp_path / "failed.png")
    lines = _lines(figure)
    triton = list(lines["triton"].get_ydata())
    assert triton[0] == 12.0 and math.isnan(triton[1]) and math.isnan(triton[2])
    assert all(math.isnan(v) for v in lines["helion"].get_ydata())
    assert 0 not in [v for line in figure.axes[0].get_lines() for v in line.get_ydata()]
    marks = sorted((line.get_gid(), round(line.get_xdata()[0])) for line in figure.axes[0].get_lines()
                   if ":" in (line.get_gid() or ""))
    assert marks == [("error:triton", 1), ("inaccurate:triton", 2), ("skipped:helion", 0)]
    texts = {t.get_text() for t in figure.axes[0].texts}
    assert {"triton error", "triton inaccurate", "helion skipped"} <= texts


@pytest.mark.parametrize(("header", "mode", "ceiling"), [
    ({"ceilings_gbps": {"copy": 100.0, "read2_write1": 120.0, "read": 150.0}}, "fwd", 100.0),
    ({"ceilings_gbps": {"copy": 100.0, "read2_write1": 120.0, "read": 150.0}}, "bwd", 120.0),
    ({"copy_gbps": 90.0}, "bwd", 90.0),
])
def test_the_ceiling_is_the_measured_bandwidth_of_the_cells_traffic(tmp_path: Path, header: dict,
                                                                     mode: str, ceiling: float) -> None:
    records = [_gbps("eager", x, 50.0, mode=mode) for x in SHAPES]
    figure = plot_results(header, records, tmp_path / "ceiling.png")
    assert list(_lines(figure)["ceiling"].get_ydata()) == [pytest.approx(ceiling)] * len(SHAPES)


def test_one_shape_still_draws_its_ceiling_as_a_segment(tmp_path: Path) -> None:
    figure = plot_results({"copy_gbps": 90.0}, [_gbps("eager", 1024, 50.0)], tmp_path / "one.png")
    ceiling = _lines(figure)["ceiling"]
    assert list(ceiling.get_ydata()) == [90.0, 90.0] and list(ceiling.get_xdata()) == [-0.4, 0.4]


def test_a_compute_bound_operator_plots_tflops_against_the_datasheet_peak(tmp_path: Path) -> None:
    path = ROOT / "results" / "h200" / "gemm" / "gemm_bwd_bf16_r7.json"
    header, records = read_json(path)
    figure = plot_results(header, records, tmp_path / "gemm.svg")
    ax = figure.axes[0]
    assert ax.get_ylabel() == "TFLOP/s"
    assert set(_lines(figure)["ceiling"].get_ydata()) == {header["peak_tflops"]}
    assert "datasheet peak 989 TFLOP/s" in (tmp_path / "gemm.svg").read_text()
    latency = plot_results(header, records, tmp_path / "gemm_latency.png", metric="latency")
    assert latency.axes[0].get_yscale() == "log"


def test_the_plot_command_writes_next_to_the_file_or_to_o_and_refuses_bad_input(tmp_path: Path,
                                                                               capsys) -> None:
    from harness.cli import main as cli

    path = tmp_path / "run.json"
    header, records = read_json(RMS_NORM_BWD)
    write_json(path, header, records)
    assert cli.main(["plot", str(path)]) == 0
    assert (tmp_path / "run.png").read_bytes().startswith(PNG_MAGIC)
    assert cli.main(["plot", str(path), "-o", str(tmp_path / "out.svg"), "--metric", "latency"]) == 0
    assert "rms_norm bwd bfloat16" in (tmp_path / "out.svg").read_text()
    capsys.readouterr()
    pdf = tmp_path / "out.pdf"
    for argv, message in (
        (["--metric", "speedup"], "unknown metric 'speedup' (valid: latency, gbps, tflops)"),
        (["-o", str(pdf)], f"cannot plot to {pdf} (valid suffixes: .png, .svg)"),
        (["--mode", "fwd"], f"{path}: no latency/gbps/tflops records for mode fwd (it has: bwd)"),
    ):
        with pytest.raises(SystemExit) as exit_info:
            cli.main(["plot", str(path), *argv])
        assert exit_info.value.code == 2
        assert capsys.readouterr().err.strip() == f"run.py: error: {message}"


def test_a_run_with_plot_writes_the_plot_after_its_tables(tmp_path: Path) -> None:
    out = tmp_path / "run.png"
    run = run_cli("--op", "exp", "--shape", "1000", "--shape", "2000", "--only", "eager,triton",
                  "--metrics", "accuracy,latency,gbps", "--rep", "1", "--warmup", "0",
                  "--output-json", str(tmp_path / "run.json"), "--plot", str(out))
    assert run.returncode == 0, run.stderr
    assert out.read_bytes().startswith(PNG_MAGIC)
    assert f"plot: {out}" in run.stdout
    assert run.stdout.index("exp fwd float32") < run.stdout.index("plot: ")


def test_the_harness_imports_matplotlib_only_to_plot() -> None:
    code = "import sys, harness.cli.main, harness.report.plot; print('matplotlib' in sys.modules)"
    shown = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                           timeout=120)
    assert shown.stdout.strip() == "False", shown.stderr


def test_a_ceiling_equal_but_for_rounding_is_labelled_with_its_value() -> None:
    # Per-shape ceilings computed from one bandwidth differ in their last bits.
    import matplotlib.pyplot as plt

    from harness.report.plot import Panel, _draw_ceiling

    panel = Panel("exp fwd", "gbps", "numel", ["1", "2"], {}, [], [60.71400933378052, 60.714009333780524],
                  "measured copy")
    figure, ax = plt.subplots()
    _draw_ceiling(ax, panel)
    assert [t.get_text() for t in ax.texts] == ["measured copy 60.7 GB/s"]
    plt.close(figure)
