"""CPU tests of the Triton pointer kernel's 16-byte vector promise (``VECTOR``): the host promises
Triton that each operand's contiguous size and other stride, and the output's N and pitch, are
multiples of 16 bytes only where they are (under the interpreter a false promise cuts the
problem), and compiled for sm_90 the promise turns one-element loads into 16-byte ones.
"""

from pathlib import Path

from harness.device import prepare_backends

prepare_backends("cpu")


import pytest  # noqa: E402
import torch  # noqa: E402

from operators.gemm import alignment, triton_configs, triton_dispatch, triton_impl  # noqa: E402
from tests.helpers import run_compiling  # noqa: E402
from tests.operators.gemm_helpers import assert_close, randn  # noqa: E402


def test_the_pointer_kernel_promises_16_byte_vectors_only_where_every_promised_value_allows():
    a, b, out = torch.empty(24, 16)[:, :8], torch.empty(8, 40), torch.empty(24, 48)[:, :40]
    promised = triton_impl.pointer_promises(a, b, out, a_trans=False, b_trans=False)
    assert promised == (8, 16, 40, 40, 40, 48)  # K and A's row stride, N and B's, N and out's
    assert triton_impl.vector_elements(2, promised) == 8  # bf16, fp16
    assert triton_impl.vector_elements(4, promised) == 4  # fp32
    assert triton_impl.vector_elements(2, (*promised, 44)) == 1  # 44 is not a multiple of 8
    a_t, b_t = torch.empty(8, 24).T, torch.empty(40, 12)[:, :8].T  # (24, 8) and (8, 40), column-major
    assert triton_impl.pointer_promises(a_t, b_t, out, a_trans=True, b_trans=True)[:4] == (24, 24, 8, 12)
    # A (1, 8) view with strides (1, 1): its row stride, the constant 1 to Triton, is promised,
    # so no vector is (rewritten, it would become 0).
    one_row = torch.empty(8, 1).T
    one_row_promised = triton_impl.pointer_promises(one_row, b, out[:1], a_trans=False, b_trans=False)
    assert triton_impl.vector_elements(2, one_row_promised) == 1


PITCHES = {"tight": lambda size: size, "to 16": lambda size: -(-size // 16) * 16,
           "plus 4": lambda size: size + 4}
"""An operand's row pitch from its contiguous size: equal, rounded up to 16 elements (a multiple
of every VECTOR, whatever the size), or 4 more (for the sizes here not a multiple of 8: breaks
fp16's VECTOR only)."""


def _operand(rows: int, cols: int, transposed: bool, pitch: str, dtype: torch.dtype) -> torch.Tensor:
    """A (rows, cols) operand, row-major or a transposed view, with a row pitch of :data:`PITCHES`."""
    if transposed:
        return randn(cols, PITCHES[pitch](rows), dtype=dtype, grad=False)[:, :rows].T
    return randn(rows, PITCHES[pitch](cols), dtype=dtype, grad=False)[:, :cols]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize(("m", "n", "k"), [(40, 24, 8), (24, 56, 40), (40, 24, 9), (41, 24, 8), (40, 25, 8)])
@pytest.mark.parametrize("a_pitch", PITCHES)
@pytest.mark.parametrize("b_pitch", PITCHES)
def test_triton_pointer_kernel_matches_float64_with_and_without_vector_promises(dtype, m: int, n: int, k: int,
                                                                               a_pitch: str, b_pitch: str):
    # Under the interpreter the promise is arithmetic (x // VECTOR * VECTOR): a promise the host
    # made of a size or a stride that is not a multiple (K = 9 at a pitch of 16, a pitch of 12
    # for K = 8, M = 41, N = 25) would cut the problem and fail the check.  The output's pitch is
    # always padded to 16 bytes (output_buffer).
    for a_trans in (False, True):
        for b_trans in (False, True):
            a, b = _operand(m, k, a_trans, a_pitch, dtype), _operand(k, n, b_trans, b_pitch, dtype)
            out = alignment.output_buffer(m, n, dtype, a.device)
            triton_impl.tiled_matmul(a, b, out, triton_configs.NO_BIAS, None, 1.0, 0.0, "tf32",
                                     triton_dispatch.Kernel.POINTER)
            assert_close(out, a.double() @ b.double())


def test_triton_pointer_kernel_is_tuned_apart_per_vector_width():
    assert "VECTOR" in triton_impl._matmul_pointer_kernel.keys


def test_triton_pointer_kernel_compiles_to_16_byte_loads_where_promised_for_sm90():
    checked = run_compiling(Path(__file__).with_name("sm90") / "pointer_vectors_sm90.py")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.count("VECTOR=") == 6
