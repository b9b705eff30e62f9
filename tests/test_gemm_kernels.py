"""CPU tests of the gemm/addmm kernels (Triton and Helion through Triton's interpreter).

Every output and gradient is compared against a float64 reference computed on the same inputs.
Shapes are small (the interpreter is slow) and include sizes that are not multiples of 16: the
Triton launcher takes its TMA path for 16-byte aligned strides (64x48x80, 40x36x20 in fp32) and
its pointer path otherwise (37x45x29).  The tests allow TF32 dots, as the TMA path requires for
fp32; the interpreter computes every dot exactly anyway.
"""

from harness.device import prepare_backends

prepare_backends("cpu")

import pytest  # noqa: E402
import torch  # noqa: E402

from operators.gemm import helion_impl, triton_impl  # noqa: E402

IMPLS = {"triton": triton_impl, "helion": helion_impl}
SHAPES = [(37, 45, 29), (64, 48, 80)]
TOL = {torch.float32: 1e-4, torch.float16: 2e-2}


@pytest.fixture(autouse=True, scope="module")
def _allow_tf32():
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")
    yield
    torch.set_float32_matmul_precision(previous)


def _randn(*shape: int, dtype: torch.dtype = torch.float32, grad: bool = True) -> torch.Tensor:
    return torch.randn(*shape, dtype=dtype).requires_grad_(grad)


def _assert_close(actual: torch.Tensor, expected: torch.Tensor) -> None:
    tol = TOL[actual.dtype]
    torch.testing.assert_close(actual.double(), expected, rtol=tol, atol=tol)


def _reference(fn, inputs: list[torch.Tensor], dy: torch.Tensor):
    """Output and input gradients of ``fn`` evaluated in float64."""
    upcast = [t.detach().double().requires_grad_(t.requires_grad) for t in inputs]
    out = fn(*upcast)
    out.backward(dy.double())
    return out.detach(), [t.grad for t in upcast]


def _check(fn, ref_fn, inputs: list[torch.Tensor]) -> None:
    out = fn(*inputs)
    dy = torch.randn_like(out)
    out.backward(dy)
    ref_out, ref_grads = _reference(ref_fn, inputs, dy)
    _assert_close(out.detach(), ref_out)
    for tensor, ref_grad in zip(inputs, ref_grads, strict=True):
        if tensor.requires_grad:
            _assert_close(tensor.grad, ref_grad)
        else:
            assert tensor.grad is None


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("shape", SHAPES)
def test_matmul_output_and_gradients_match_float64(impl: str, shape: tuple[int, int, int]):
    m, n, k = shape
    _check(IMPLS[impl].matmul, torch.matmul, [_randn(m, k), _randn(k, n)])


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("bias_dims", [1, 2])
def test_addmm_output_and_gradients_match_float64(impl: str, shape: tuple[int, int, int],
                                                  bias_dims: int):
    m, n, k = shape
    bias = _randn(n) if bias_dims == 1 else _randn(m, n)

    def run(b, x, y):
        return IMPLS[impl].addmm(b, x, y, alpha=1.5, beta=-0.75)

    def reference(b, x, y):
        return torch.addmm(b, x, y, alpha=1.5, beta=-0.75)

    _check(run, reference, [bias, _randn(m, k), _randn(k, n)])


@pytest.mark.parametrize("impl", IMPLS)
def test_addmm_default_scalars_match_float64(impl: str):
    _check(IMPLS[impl].addmm, torch.addmm, [_randn(36), _randn(40, 20), _randn(20, 36)])


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("needs", ["a", "b"])
def test_matmul_computes_only_requested_gradients(impl: str, needs: str):
    a, b = _randn(40, 20, grad=needs == "a"), _randn(20, 36, grad=needs == "b")
    _check(IMPLS[impl].matmul, torch.matmul, [a, b])


@pytest.mark.parametrize("impl", IMPLS)
def test_addmm_computes_only_requested_gradients(impl: str):
    bias, mat1, mat2 = _randn(36, grad=False), _randn(40, 20, grad=False), _randn(20, 36)

    def run(b, x, y):
        return IMPLS[impl].addmm(b, x, y, alpha=2.0, beta=0.5)

    def reference(b, x, y):
        return torch.addmm(b, x, y, alpha=2.0, beta=0.5)

    _check(run, reference, [bias, mat1, mat2])


def test_triton_matmul_fp16_matches_float64():
    a, b = _randn(64, 80, dtype=torch.float16), _randn(80, 48, dtype=torch.float16)
    _check(triton_impl.matmul, torch.matmul, [a, b])


def test_triton_takes_tma_path_only_for_aligned_tensor_core_dots_of_tile_size():
    def uses_tma(a: torch.Tensor, b: torch.Tensor, precision: str = "tf32") -> bool:
        a_trans, b_trans = a.stride(0) == 1, b.stride(0) == 1
        out = torch.empty(a.shape[0], b.shape[1])
        return triton_impl._uses_tma(a, a_trans, b, b_trans, out, precision)

    assert uses_tma(torch.randn(64, 80), torch.randn(80, 48))
    assert uses_tma(torch.randn(80, 64).T, torch.randn(48, 80).T)
    assert not uses_tma(torch.randn(37, 29), torch.randn(29, 48))
    assert not uses_tma(torch.randn(29, 37).T, torch.randn(37, 48))
    assert not uses_tma(torch.randn(64, 80), torch.randn(80, 48), precision="ieee")
    assert not uses_tma(torch.randn(16, 80), torch.randn(80, 48))


@pytest.mark.parametrize("transposed", ["a", "b", "both"])
def test_triton_reads_transposed_operands_in_place(transposed: str):
    a = torch.randn(48, 40).T if transposed in ("a", "both") else torch.randn(40, 48)
    b = torch.randn(36, 48).T if transposed in ("b", "both") else torch.randn(48, 36)
    bias = torch.randn(40, 36)
    out = triton_impl.fused_matmul(a, b, bias, alpha=0.5, beta=2.0)
    _assert_close(out, 0.5 * a.double() @ b.double() + 2.0 * bias.double())


@pytest.mark.parametrize(("persistent", "subtile"), [(False, False), (True, False), (False, True)])
def test_triton_tma_kernel_schedules_match_float64(persistent: bool, subtile: bool):
    a, b, bias = torch.randn(64, 80), torch.randn(48, 80).T, torch.randn(48)
    out = torch.empty(64, 48)
    args = dict(
        a_desc=triton_impl._descriptor(a, False), b_desc=triton_impl._descriptor(b, True),
        c_desc=triton_impl._descriptor(out, False), bias_ptr=bias, M=64, N=48, K=80,
        stride_bias_m=0, stride_bias_n=1, alpha=2.0, beta=0.5, A_TRANS=False, B_TRANS=True,
        BIAS_KIND=triton_impl.ROW_BIAS, DOT_PRECISION="tf32", BLOCK_M=32, BLOCK_N=32,
        BLOCK_K=16, GROUP_M=2, PERSISTENT=persistent, EPILOGUE_SUBTILE=subtile,
    )
    triton_impl._set_block_shapes(args)
    triton_impl._matmul_tma_kernel.fn[triton_impl._grid(a.device)](**args)
    _assert_close(out, 2.0 * a.double() @ b.double() + 0.5 * bias.double())


def test_triton_custom_ops_pass_opcheck():
    a, b, bias = _randn(37, 29), _randn(29, 45), _randn(45)
    torch.library.opcheck(torch.ops.opbench.matmul.default, (a, b))
    torch.library.opcheck(torch.ops.opbench.addmm.default, (bias, a, b, 1.5, 0.5))
    torch.library.opcheck(torch.ops.opbench.addmm.default, (None, a, b, 2.0, 0.0))


def test_triton_ops_compile_without_graph_breaks():
    def loss(bias, x, y):
        return (triton_impl.addmm(bias, x, y, alpha=1.5, beta=0.5) + triton_impl.matmul(x, y)).sum()

    compiled = torch.compile(loss, fullgraph=True, backend="aot_eager")
    inputs = [_randn(36), _randn(40, 20), _randn(20, 36)]
    compiled(*inputs).backward()

    def reference(bias, x, y):
        return torch.addmm(bias, x, y, alpha=1.5, beta=0.5) + x @ y

    _, ref_grads = _reference(reference, inputs, torch.ones(40, 36))
    for tensor, ref_grad in zip(inputs, ref_grads, strict=True):
        _assert_close(tensor.grad, ref_grad)


@pytest.mark.parametrize("kernel_name", helion_impl.KERNELS)
@pytest.mark.parametrize("bucket", ["small|nn", "large|nt", "large|tn"])
def test_helion_tuning_candidates_generate_triton_code(kernel_name: str, bucket: str):
    args = helion_impl.tuning_args(kernel_name, bucket, torch.float16, "cpu")
    x, y = args[:2] if kernel_name == "matmul" else args[1:3]
    assert helion_impl.bucket(x, y) == bucket
    bound = helion_impl.KERNELS[kernel_name].bind(args)
    for config in helion_impl.tuning_candidates(kernel_name, bucket):
        assert "tl.dot" in bound.to_triton_code(config)
