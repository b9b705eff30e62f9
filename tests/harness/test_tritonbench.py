"""Our backends inside tritonbench: each tritonbench operator's input tuple mapped to our operators,
the backends registered on tritonbench's real operators and run by ``run.py tritonbench``, and
the one-line errors.  The tests that need tritonbench skip with the reason it cannot be imported
(it is not on PyPI; ``pip install git+https://github.com/meta-pytorch/tritonbench``)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from harness.operator import TritonbenchCall
from harness.tritonbench.adapters import tritonbench_adapters
from harness.tritonbench.registration import (
    BACKENDS,
    TritonbenchUnavailable,
    backend_callable,
    import_tritonbench,
)
from tests.helpers import ROOT, run_cli


def _tritonbench_missing() -> str | None:
    try:
        import_tritonbench()
    except TritonbenchUnavailable as exc:
        return str(exc)
    return None


MISSING = _tritonbench_missing()
needs_tritonbench = pytest.mark.skipif(MISSING is not None, reason=str(MISSING))


def _rms_norm_reference(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """What tritonbench's llama_rms baseline computes."""
    xf = x.float()
    return weight * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


# --- the adapters, on tuples shaped like tritonbench's (no tritonbench needed) -------------------

def test_vector_exp_takes_x_and_hands_back_the_output_dict_its_metrics_read() -> None:
    x = torch.rand(4096)
    call = tritonbench_adapters()["vector_exp"].adapt(x)
    assert (call.operator, call.inputs, call.options) == ("exp", (x,), {})
    assert tritonbench_adapters()["vector_exp"].wrap(lambda: x)() == {"output": x}


def test_rms_norm_without_a_weight_gets_ones_of_width_h_that_require_grad() -> None:
    x = torch.randn(8, 1024, dtype=torch.float16)
    call = tritonbench_adapters()["rms_norm"].adapt(1024, x)
    assert call.operator == "rms_norm" and call.inputs[0] is x
    weight, eps = call.inputs[1:]
    assert weight.dtype == torch.float16 and weight.requires_grad
    assert torch.equal(weight, torch.ones(1024, dtype=torch.float16))
    assert eps == 1e-6
    given = torch.randn(1024, dtype=torch.float16)
    assert tritonbench_adapters()["rms_norm"].adapt(1024, x, given).inputs[1] is given


def test_rms_norm_refuses_an_h_that_is_not_the_width_of_x() -> None:
    with pytest.raises(ValueError, match=r"H=512 but x is \(8, 1024\)"):
        tritonbench_adapters()["rms_norm"].adapt(512, torch.randn(8, 1024))


def test_gemm_without_bias_is_our_gemm_and_with_a_row_bias_our_addmm() -> None:
    a, w, bias = torch.randn(16, 8), torch.randn(8, 12), torch.randn(12)
    gemm = tritonbench_adapters()["gemm"].adapt
    assert gemm(a, w, None) == TritonbenchCall("gemm", (a, w))
    call = gemm(a, w, bias)
    assert (call.operator, call.inputs, call.options) == ("addmm", (bias, a, w), {"bias": "1d"})
    with pytest.raises(ValueError, match=r"does not add to N=12 columns \(give --bias 12\)"):
        gemm(a, w, torch.randn(5))


def test_addmm_takes_the_full_bias_first_as_tritonbench_yields_it() -> None:
    bias, mat1, mat2 = torch.randn(16, 12), torch.randn(16, 8), torch.randn(8, 12)
    addmm = tritonbench_adapters()["addmm"].adapt
    call = addmm(bias, mat1, mat2)
    assert (call.operator, call.inputs, call.options) == ("addmm", (bias, mat1, mat2), {"bias": "2d"})
    assert addmm(torch.randn(12), mat1, mat2).options == {"bias": "1d"}


def test_each_tritonbench_operator_is_adapted_by_the_operator_that_declares_it() -> None:
    assert {name: adapter.adapt.__module__ for name, adapter in tritonbench_adapters().items()} == {
        "vector_exp": "operators.exp.operator", "rms_norm": "operators.rms_norm.operator",
        "gemm": "operators.gemm.operator", "addmm": "operators.addmm.operator"}


def test_labels_are_three_of_our_backends_without_a_dash() -> None:
    assert BACKENDS == {"opbench_triton": "triton", "opbench_helion": "helion",
                        "opbench_torch_compile": "torch_compile"}
    assert not any("-" in label for label in BACKENDS)


CASES: dict[str, tuple[Callable[[], tuple[Any, ...]], Callable[..., torch.Tensor]]] = {
    "vector_exp": (lambda: (torch.rand(4096),), torch.exp),
    "rms_norm": (lambda: (200, torch.randn(6, 200)),
                 lambda h, x: _rms_norm_reference(x, torch.ones(h), 1e-6)),
    "gemm": (lambda: (torch.randn(32, 16), torch.randn(16, 24), None), lambda a, w, _: a @ w),
    "gemm_bias": (lambda: (torch.randn(32, 16), torch.randn(16, 24), torch.randn(24)),
                  lambda a, w, bias: a @ w + bias),
    "addmm": (lambda: (torch.randn(32, 24), torch.randn(32, 16), torch.randn(16, 24)), torch.addmm),
}


@pytest.mark.parametrize("backend", ["eager", "triton"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_our_backend_on_a_tritonbench_tuple_computes_what_its_baseline_does(case: str, backend: str) -> None:
    make, expected = CASES[case]
    inputs = make()
    out = backend_callable(case.removesuffix("_bias"), backend, "cpu", inputs)()
    out = out["output"] if isinstance(out, dict) else out
    torch.testing.assert_close(out, expected(*inputs), rtol=1e-4, atol=1e-4)


def test_a_backend_that_cannot_run_here_raises_its_reason() -> None:
    with pytest.raises(RuntimeError, match="triton cannot run here: .*interpreter"):
        backend_callable("vector_exp", "triton", "cpu", (torch.rand(64, dtype=torch.bfloat16),))


# --- the command line ---------------------------------------------------------------------------

def _run_py_without_tritonbench(*args: str) -> subprocess.CompletedProcess:
    """``run.py ARGS`` in a process where ``import tritonbench`` fails as when it is not installed."""
    probe = ("import runpy, sys; sys.modules['tritonbench'] = None; "
             f"sys.argv = ['run.py', *{list(args)!r}]; runpy.run_path('run.py', run_name='__main__')")
    return subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)


def test_without_tritonbench_run_py_tritonbench_exits_2_with_one_line() -> None:
    result = _run_py_without_tritonbench("tritonbench", "--", "--op", "rms_norm", "--device", "cpu")
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "run.py: error: tritonbench is not installed (it is not on PyPI): "
        "pip install git+https://github.com/meta-pytorch/tritonbench, "
        "or clone it and run `pip install -e .` there"], result.stderr
    assert result.stdout == ""


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks a machine without a CUDA GPU")
def test_without_a_gpu_tritonbench_on_its_default_device_is_refused_naming_device_cpu() -> None:
    # Without tritonbench that comes first; with it (a stand-in here), the device.
    result = _run_py_without_tritonbench("tritonbench", "--", "--op", "rms_norm")
    assert result.returncode == 2 and "tritonbench is not installed" in result.stderr
    probe = ("import importlib.machinery, runpy, sys, types; stand_in = types.ModuleType('tritonbench'); "
             "stand_in.__spec__ = importlib.machinery.ModuleSpec('tritonbench', None); "
             "sys.modules['tritonbench'] = stand_in; "
             "sys.argv = ['run.py', 'tritonbench', '--', '--op', 'rms_norm']; "
             "runpy.run_path('run.py', run_name='__main__')")
    result = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "run.py: error: tritonbench runs on cuda unless told otherwise and this machine has no CUDA "
        "GPU: add --device cpu"], result.stderr


def test_help_of_run_py_tritonbench_names_the_plugin_entry_point() -> None:
    result = _run_py_without_tritonbench("tritonbench", "--help")
    assert result.returncode == 0
    assert "harness.tritonbench.register_with_tritonbench" in result.stdout


@needs_tritonbench
@pytest.mark.parametrize(("args", "message"), [
    (["--op", "vector_exp,rms_norm"], "give one operator with --op"),
    (["--op", "vector_exp", "--isolate"], "--isolate runs in subprocesses"),
])
def test_what_would_run_in_subprocesses_is_refused_in_one_line(args: list[str], message: str) -> None:
    result = run_cli("tritonbench", "--", *args, "--device", "cpu")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("run.py: error: ") and message in lines[0], result.stderr


# --- inside the real tritonbench ----------------------------------------------------------------

def _tritonbench_operator(name: str, *args: str) -> Any:
    """tritonbench's operator ``name`` on the CPU in fp32, our backends registered on it."""
    from tritonbench.operators import load_opbench_by_name
    from tritonbench.utils.parser import get_parser

    from harness.tritonbench.registration import register_with_tritonbench

    argv = ["--op", name, "--device", "cpu", "--precision", "fp32", *args]
    tb_args, extra = get_parser(argv).parse_known_args(argv)
    assert register_with_tritonbench([name]) == {}
    return load_opbench_by_name(name)(tb_args=tb_args, extra_args=extra)


@pytest.fixture
def addmm_loadable(monkeypatch: pytest.MonkeyPatch) -> None:
    """tritonbench's addmm module imports kernels it does not hold at import time: an HSTU kernel
    from ``generative_recommenders``, and (at snapshot db2155c) a ``streamk_matmul`` its gemm's
    ``stream_k`` no longer defines.  Stand-ins let it, and so its real input tuples, load."""
    import importlib
    import types

    if importlib.util.find_spec("generative_recommenders") is None:
        stub = types.ModuleType("tritonbench.operators.addmm.hstu")
        stub.triton_addmm = torch.addmm
        monkeypatch.setitem(sys.modules, "tritonbench.operators.addmm.hstu", stub)
    stream_k = importlib.import_module("tritonbench.operators.gemm.stream_k")
    if not hasattr(stream_k, "streamk_matmul"):
        monkeypatch.setattr(stream_k, "streamk_matmul", torch.matmul, raising=False)


@needs_tritonbench
def test_registration_adds_our_three_labels_to_tritonbench_operators() -> None:
    from tritonbench.utils.triton_op import REGISTERED_BENCHMARKS

    from harness.tritonbench.registration import register_with_tritonbench

    not_loaded = register_with_tritonbench()
    assert set(not_loaded) <= {"addmm"}, not_loaded
    for name in set(tritonbench_adapters()) - set(not_loaded):
        assert set(BACKENDS) <= set(REGISTERED_BENCHMARKS[name])
    assert register_with_tritonbench() == not_loaded, "registering again changes nothing"


TRITONBENCH_CASES = {
    # case -> tritonbench operator, its arguments, its baseline backend
    "vector_exp": ("vector_exp", [], "torch_exp"),
    "rms_norm": ("rms_norm", [], "llama_rms"),
    "gemm": ("gemm", ["--m", "64", "--n", "48", "--k", "32"], "aten_matmul"),
    "gemm_bias": ("gemm", ["--m", "64", "--n", "48", "--k", "32", "--bias", "48"], "aten_matmul"),
    "addmm": ("addmm", ["--m", "64", "--n", "48", "--k", "32"], "aten_addmm"),
}


@needs_tritonbench
@pytest.mark.usefixtures("addmm_loadable")
@pytest.mark.parametrize("label", ["opbench_triton", "opbench_torch_compile"])
@pytest.mark.parametrize("case", sorted(TRITONBENCH_CASES))
def test_tritonbench_input_tuples_give_the_baselines_outputs(case: str, label: str) -> None:
    name, args, baseline = TRITONBENCH_CASES[case]
    bench = _tritonbench_operator(name, *args)
    if name == "rms_norm":
        bench.M = 8  # its rows (2048); H stays as tritonbench yields it
    inputs = next(iter(bench.get_input_iter()))
    ours, theirs = getattr(bench, label)(*inputs)(), getattr(bench, baseline)(*inputs)()
    if name == "vector_exp":
        ours, theirs = ours["output"], theirs["output"]
    torch.testing.assert_close(ours, theirs, rtol=1e-4, atol=1e-4)


@needs_tritonbench
def test_tritonbench_rms_norm_backward_runs_on_our_backend() -> None:
    """tritonbench's own ``get_bwd_fn`` drives our output; ``x`` is given ``requires_grad`` here (its
    older versions leave it off, so they time the weight gradient only) to check dx too."""
    bench = _tritonbench_operator("rms_norm", "--bwd")
    bench.M = 8
    hidden, x = next(iter(bench.get_input_iter()))
    x.requires_grad_(True)
    grads = []
    for label in ("llama_rms", "opbench_triton"):
        torch.manual_seed(0)  # the same dy for both
        bench.get_bwd_fn(getattr(bench, label)(hidden, x))()
        grads.append(x.grad)
        x.grad = None
    torch.testing.assert_close(grads[1], grads[0], rtol=1e-4, atol=1e-4)


@needs_tritonbench
def test_run_py_tritonbench_shows_our_columns_beside_tritonbench_backends(tmp_path: Path) -> None:
    out = tmp_path / "vector_exp.json"
    result = run_cli("tritonbench", "--", "--op", "vector_exp", "--device", "cpu", "--precision", "fp32",
                     "--num-inputs", "1", "--only", "torch_exp,opbench_triton,opbench_helion",
                     "--metrics", "latency,accuracy", "--iter", "5", "--warmup", "1",
                     "--output-json", str(out))
    assert result.returncode == 0, result.stderr
    header = next(line for line in result.stdout.splitlines() if "x_val" in line).split()
    assert header[:2] == ["x_val", "torch_exp-latency"]
    assert {"opbench_triton-accuracy", "opbench_helion-latency"} <= set(header)
    saved = json.loads(out.read_text())
    assert any("opbench_triton" in key for key in saved), sorted(saved)
