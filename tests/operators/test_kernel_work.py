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
                 "void cublasLt::splitKreduce_kernel<32, 16>", "void at::native::reduce_kernel<128, 4>",
                 "triton_poi_fused_addmm_0", "triton_red_fused_sum_0", "Memset (Device)",
                 "void at::native::elementwise_kernel<128, 2>", "Memcpy DtoD (Device -> Device)"):
        assert op.kernel_work(shape, Mode.BWD, name) is None, name


def test_the_rms_norm_kernels_given_a_direction_are_the_ones_that_do_all_its_row_work() -> None:
    given = RMSNormOperator.whole_direction_kernels
    assert {name for name, mode in given.items() if mode is Mode.FWD} == {
        "_rms_norm_fwd_kernel", "_rms_norm_fwd_looped_kernel", "_helion_rms_norm_fwd"}
    split_or_partial = {"_rms_norm_bwd_row_dot_kernel", "_rms_norm_bwd_stripe_kernel", "_sum_rows_kernel",
                        "_helion_rms_norm_bwd_row_dot", "_helion_rms_norm_bwd_stripe",
                        "_helion_rms_norm_dw_sum"}
    assert split_or_partial <= _defined_kernels("rms_norm") and not split_or_partial & set(given)
    backward = {name for name in _defined_kernels("rms_norm") if "_bwd" in name} - split_or_partial
    assert backward - {"_rms_norm_bwd_kernel"} and {n for n, m in given.items() if m is Mode.BWD} == backward


def test_addmm_s_row_sum_reads_the_whole_gradient_and_its_forward_launch_the_bias() -> None:
    shape = (300, 200, 100)
    op = AddmmOperator("cuda", torch.float16, {"bias": "2d", "alpha": 1.0, "beta": 1.0})
    row_sum = op.kernel_work(shape, Mode.BWD, "_helion_row_sum_parts_kernel")
    assert row_sum == KernelWork(300 * 200 * 2)
    gemm = GemmOperator("cuda", torch.float16).kernel_work(shape, Mode.BWD, "_matmul_tma_kernel")
    assert op.kernel_work(shape, Mode.BWD, "_matmul_tma_kernel") == gemm
    for mode in (Mode.FWD, Mode.FWD_NO_GRAD):
        forward = op.kernel_work(shape, mode, "_matmul_tma_kernel")
        assert forward == KernelWork(gemm.bytes_moved + 300 * 200 * 2, gemm.flops), "the 2-D bias read too"
