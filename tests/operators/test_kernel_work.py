"""The work each operator's model gives a profiled kernel by its name (the kernel tables' GB/s
and TFLOP/s): the names are those of the operators' own kernels, and a matmul launch is one
whole matmul."""

from __future__ import annotations

import re

import pytest
import torch

from harness.operator import KernelWork, Mode
from operators.addmm.operator import ROW_SUM_PARTS_KERNELS, AddmmOperator
from operators.exp.operator import ExpOperator
from operators.gemm.operator import GemmOperator
from operators.rms_norm.operator import RMSNormOperator
from tests.helpers import ROOT


def _defined_kernels(folder: str) -> set[str]:
    """The names the profiler gives the kernels defined under ``operators/<folder>``: a Triton
    kernel's function name, a Helion kernel's ``_helion_`` and its function name."""
    names = set()
    for path in (ROOT / "operators" / folder).glob("*.py"):
        source = path.read_text()
        names |= set(re.findall(r"@triton\.jit\s*\ndef (\w+)\(", source))
        helion = re.findall(r"@helion\.kernel(?:\([^)]*\))?\s*\ndef (\w+)\(", source)
        names |= {f"_helion_{name}" for name in helion}
    return names


@pytest.mark.parametrize(("operator", "folder"), [(ExpOperator, "exp"), (RMSNormOperator, "rms_norm")])
def test_every_kernel_named_for_a_direction_s_work_is_the_operator_s_own(operator, folder: str) -> None:
    assert operator.whole_direction_kernels
    assert set(operator.whole_direction_kernels) <= _defined_kernels(folder)


def test_the_row_sum_kernel_named_for_addmm_s_bias_gradient_is_gemm_s_own() -> None:
    assert set(ROW_SUM_PARTS_KERNELS) <= _defined_kernels("gemm")


def test_each_matmul_launch_of_a_gemm_call_is_one_whole_matmul() -> None:
    shape = (300, 200, 100)
    op = GemmOperator("cuda", torch.bfloat16)
    whole = KernelWork((300 * 100 + 100 * 200 + 300 * 200) * 2, 2 * 300 * 200 * 100)
    matmuls = {name for name in _defined_kernels("gemm") if "matmul" in name}
    assert {"_matmul_tma_kernel", "_matmul_split_k_kernel", "_helion_matmul_kernel"} <= matmuls
    for name in [*matmuls, "nvjet_sm90_tst_192x208_64x4_1x2_h_bz_coopB_TNT", "triton_tem_fused_mm_0"]:
        for mode in Mode:
            assert op.kernel_work(shape, mode, name) == whole, name
    for name in ("_split_k_reduce_kernel", "_helion_split_k_reduce_kernel", "_row_sum_parts_kernel",
                 "void cublasLt::splitKreduce_kernel<32, 16>", "void at::native::reduce_kernel<128, 4>"):
        assert op.kernel_work(shape, Mode.BWD, name) is None, name


def test_addmm_s_row_sum_reads_the_whole_gradient_and_its_matmuls_are_gemm_s() -> None:
    op = AddmmOperator("cuda", torch.float16)
    row_sum = op.kernel_work((300, 200, 100), Mode.BWD, "_helion_row_sum_parts_kernel")
    assert row_sum == KernelWork(300 * 200 * 2)
    assert op.kernel_work((300, 200, 100), Mode.BWD, "_matmul_tma_kernel").flops == 2 * 300 * 200 * 100
