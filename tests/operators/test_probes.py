"""Every operator's probes (``operators/<op>/probes/``) import, on public names only, and
results/ holds their data, not code."""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import pkgutil
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from tests.helpers import tf32_allowed

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = sorted(f"operators.{path.parent.parent.name}.probes"
                  for path in ROOT.glob("operators/*/probes/__init__.py"))
PROBES = [(package, module.name) for package in PACKAGES
          for module in pkgutil.iter_modules(importlib.import_module(package).__path__)]


def test_the_gemm_and_rms_norm_probes_are_found() -> None:
    assert {"operators.gemm.probes", "operators.rms_norm.probes"} <= set(PACKAGES)


@pytest.mark.parametrize(("package", "name"), [probe for probe in PROBES if probe[1] != "common"])
def test_probe_imports_with_a_main(package: str, name: str) -> None:
    assert callable(importlib.import_module(f"{package}.{name}").main)


@pytest.mark.parametrize(("package", "name"), PROBES)
def test_probe_uses_public_names_of_the_operators_package_only(package: str, name: str) -> None:
    tree = ast.parse(Path(importlib.import_module(package).__path__[0], f"{name}.py").read_text())
    modules = set()  # local names bound to modules of the operators package
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("operators"):
            for alias in node.names:
                assert not alias.name.startswith("_"), f"{name} imports {node.module}.{alias.name}"
                if inspect.ismodule(getattr(importlib.import_module(node.module), alias.name)):
                    modules.add(alias.asname or alias.name)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules:
            assert not node.attr.startswith("_"), f"{name} uses {node.value.id}.{node.attr}"


def test_the_results_folder_holds_data_only() -> None:
    """No scripts, compiled code or kernel caches anywhere under ``results/``: probes live next
    to their kernels."""
    code = [path.relative_to(ROOT) for path in (ROOT / "results").rglob("*")
            if path.suffix in {".py", ".pyc", ".sh", ".so", ".cubin"} or "cache" in path.name.lower()]
    assert not code, code


@pytest.fixture
def tf32_dots():
    """fp32 operands on tensor-core dots, as bf16 ones are on the GPU: the plan's TMA kernel
    (exact fp32 dots take the pointer kernel)."""
    with tf32_allowed():
        yield


def checked_variants(probe_shape: Callable[[torch.Tensor, torch.Tensor, Callable], None],
                     a: torch.Tensor, b: torch.Tensor) -> list[str]:
    """The variants a gemm probe's ``probe_shape`` runs for ``a @ b``, each result checked
    against float64."""
    want = a.double() @ b.double()
    variants = []

    def run(variant: str, call) -> None:
        torch.testing.assert_close(call().double(), want, rtol=1e-4, atol=1e-4, msg=variant)
        variants.append(variant)

    probe_shape(a, b, run)
    return variants


def test_gemm_matmul_configs_runs_every_config_of_the_plans_kernel_through_the_interpreter() -> None:
    from harness.device import prepare_backends

    prepare_backends("cpu")
    from operators.gemm.probes.matmul_configs import probe_shape
    from operators.gemm.triton_configs import POINTER_CONFIGS

    a, b = torch.randn(20, 24), torch.randn(24, 36)  # 20 rows: under a TMA tile, the pointer kernel
    variants = checked_variants(probe_shape, a, b)
    assert variants[:2] == ["cublas", "helion"] and variants[2].startswith("triton autotuned (pointer ")
    assert len(variants) == 3 + len(POINTER_CONFIGS)


def test_gemm_matmul_configs_runs_every_gemv_config_at_one_row_over_a_transposed_b() -> None:
    from harness.device import prepare_backends

    prepare_backends("cpu")
    from operators.gemm.probes.matmul_configs import probe_shape
    from operators.gemm.triton_configs import GEMV_CONFIGS

    a, b = torch.randn(1, 40), torch.randn(36, 40).T  # grad @ w.T at M = 1
    variants = checked_variants(probe_shape, a, b)
    assert variants[2] == "triton autotuned (gemv N16xK16/s1/w4)"
    assert variants[3:] == [f"triton gemv N{c.kwargs['BLOCK_N']}xK{c.kwargs['BLOCK_K']}/s{c.num_stages}"
                            f"/w{c.num_warps}" for c in GEMV_CONFIGS]


def test_gemm_tiled_candidates_runs_each_pick_on_every_tiled_kernel_it_fits(monkeypatch, tf32_dots) -> None:
    from harness.device import prepare_backends

    prepare_backends("cpu")
    from operators.gemm.probes import tiled_candidates

    picks = ((16, 32, 16, 2, 4), (64, 16, 16, 2, 4))  # the second's BLOCK_M exceeds M: no TMA variant
    monkeypatch.setattr(tiled_candidates, "INDUCTOR_PICKS", {"40,48,32,t": picks})
    a, b = torch.randn(40, 32), torch.randn(48, 32).T  # B column-major, as the backward's dX
    variants = checked_variants(tiled_candidates.probe_shape, a, b)
    assert variants == ["cublas", "triton plan (tma)",
                        "triton pointer 16x32x16/s2/w4", "triton tma 16x32x16/s2/w4 persistent",
                        "triton tma 16x32x16/s2/w4", "triton pointer 64x16x16/s2/w4"]


@pytest.mark.parametrize("b_transposed", [False, True])
def test_gemm_padded_pitch_runs_the_plans_config_on_128_byte_pitches(b_transposed: bool, tf32_dots) -> None:
    from harness.device import prepare_backends

    prepare_backends("cpu")
    from operators.gemm.probes.padded_pitch import pitched, probe_shape

    a = torch.randn(40, 36)
    b = torch.randn(50, 36).T if b_transposed else torch.randn(36, 50)
    wide = pitched(b)
    assert torch.equal(wide, b) and (wide.stride(1) if b_transposed else wide.stride(0)) == 64
    variants = checked_variants(probe_shape, a, b)
    assert variants[:2] == ["cublas", "triton plan (32x32x16/s2/w4 persistent epilogue_subtile)"]
    assert variants[2:] == ["b pitched", "b and out pitched", "a, b and out pitched",
                            "b copied to a pitched buffer in the call"]


def test_gemm_pitch_counters_runs_cublas_the_plan_and_its_config_on_128_byte_pitches(
        monkeypatch, tf32_dots) -> None:
    from harness.device import prepare_backends

    prepare_backends("cpu")
    from operators.gemm.probes import pitch_counters

    pitches = []

    def recorded(a, b, out, kernel, config):
        pitches.append([t.stride(0) * t.element_size() for t in (a, b, out)])
        return tiled_into(a, b, out, kernel, config)

    tiled_into = pitch_counters.tiled_into
    monkeypatch.setattr(pitch_counters, "tiled_into", recorded)
    a, b = torch.randn(40, 36), torch.randn(36, 52)  # rows of 144 and 208 bytes: 16-, not 128-byte multiples
    assert checked_variants(pitch_counters.probe_shape, a, b) == [
        "cublas", "triton plan (32x32x16/s2/w4 persistent epilogue_subtile)", "a, b and out pitched"]
    assert pitches and all(pitch % 128 == 0 for pitch in pitches[-1])


def test_gemm_pitch_counters_launches_each_variant_once_inside_its_nvtx_ranges(monkeypatch, tmp_path) -> None:
    from operators.gemm.probes import pitch_counters

    events = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    monkeypatch.setattr(torch.cuda.nvtx, "range_push", lambda name: events.append(f"push {name}"))
    monkeypatch.setattr(torch.cuda.nvtx, "range_pop", lambda: events.append("pop"))
    calls = [pitch_counters.Variant(label, f"{label} variant",
                                    lambda label=label: events.append(f"call {label}"))
             for label in ("cublas", "plan", "pitched")]
    ranges = pitch_counters.counted_launches("8,8,8", calls, skip={"plan variant"})
    assert ranges == ["8,8,8 cublas", "8,8,8 pitched"]
    assert events == ["push counted", "push 8,8,8 cublas", "call cublas", "pop", "pop",
                      "push counted", "push 8,8,8 pitched", "call pitched", "pop", "pop"]

    def failing() -> None:
        raise RuntimeError("a failed launch")

    events.clear()
    with pytest.raises(RuntimeError):
        pitch_counters.counted_launches("8,8,8", [pitch_counters.Variant("plan", "plan", failing)], set())
    assert events == ["push counted", "push 8,8,8 plan", "pop", "pop"]

    out = tmp_path / "probe.json"
    report = {"device": "cpu", "records": [{"shape": "8,8,8"}]}
    out.write_text(json.dumps(report))
    pitch_counters.add_counted(out, ranges)
    assert json.loads(out.read_text()) == {**report, "counted": ranges}
