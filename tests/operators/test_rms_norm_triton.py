"""rms_norm's Triton kernels, plans and custom ops, run by Triton's CPU interpreter, against float64."""

from harness.device import prepare_backends

prepare_backends("cpu")

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from operators.rms_norm import strategy, triton_impl, triton_plans, triton_wide  # noqa: E402
from operators.rms_norm.triton_plans import BwdKernel, BwdPlan, FwdPlan  # noqa: E402
from tests.helpers import run_compiling  # noqa: E402
from tests.operators.rms_norm_helpers import (  # noqa: E402
    EPS,
    M,
    assert_matches_reference,
    bf16_backward_errors,
    reference,
    run_forward_backward,
    spy_on_launches,
)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_two_pass_backward_on_the_default_path_matches_reference(monkeypatch, narrow_bwd_rules, dtype):
    # Rules narrowed 256-fold: 200 (padded to 256, not a multiple of 16) takes two passes, in
    # fp16 as in fp32, with 4 column stripes and row sums over 4 chunks.
    narrow_bwd_rules(256)
    plan = BwdPlan(BwdKernel.TWO_PASS, 4, 64, 4, rows_per_program=4)
    monkeypatch.setitem(triton_plans.BWD_PLANS, strategy.BwdStrategy.TWO_PASS, lambda _: plan)
    monkeypatch.setattr(triton_wide, "_ROW_DOT_BLOCK_N", 64)
    assert triton_impl.bwd_plan(9, 200, dtype).kernel is BwdKernel.TWO_PASS
    outputs, expected = run_forward_backward(triton_impl.rms_norm, 9, 200, dtype)
    assert_matches_reference(outputs, expected, dtype)


PLANS = {
    "row_pairs": (FwdPlan(2, 4), BwdPlan(BwdKernel.ONE_PASS, 2, 256, 4, num_stages=2)),
    "fixed_rows": (FwdPlan(4, 4), BwdPlan(BwdKernel.ONE_PASS, 1, 256, 4, rows_per_program=5)),
    "two_pass": (FwdPlan(1, 4), BwdPlan(BwdKernel.TWO_PASS, 4, 64, 4, rows_per_program=10)),
    "prefetch": (FwdPlan(1, 4), BwdPlan(BwdKernel.ONE_PASS_PREFETCH, 2, 256, 4)),
    "prefetch_fixed_rows": (FwdPlan(1, 4),
                            BwdPlan(BwdKernel.ONE_PASS_PREFETCH, 1, 256, 4, rows_per_program=5)),
    "kept": (FwdPlan(1, 4), BwdPlan(BwdKernel.ONE_PASS_KEPT, 1, 256, 4, rows_per_program=5)),
    "fwd_looped": (FwdPlan(1, 4, num_stages=2, chunk=64), BwdPlan(BwdKernel.ONE_PASS, 1, 256, 4)),
    "row_split": (FwdPlan(1, 4), BwdPlan(BwdKernel.ROW_SPLIT, 1, 64, 4)),  # one part a row here
}


def test_default_path_at_5000_wide_launches_the_looped_forward_then_the_staged_backward(monkeypatch):
    # 5000-wide fp16 rows launch the two kernels the H200 probes chose (the forward in three
    # 2048-wide chunks, the last one masked; the backward padded to 8192, four stages) and
    # match float64; fp32 rows keep the register prefetch (their four stages overflow shared
    # memory).
    kernels = ("_rms_norm_fwd_looped_kernel", "_rms_norm_bwd_kernel")
    launched = spy_on_launches(monkeypatch, triton_impl, *kernels)
    outputs, expected = run_forward_backward(triton_impl.rms_norm, 5, 5000, torch.float16)
    assert launched == list(kernels)
    assert_matches_reference(outputs, expected, torch.float16)
    assert triton_impl.fwd_plan(5, 5000).chunk == 2048
    assert triton_impl.bwd_plan(5, 5000, torch.float16).num_stages == 4
    assert triton_impl.bwd_plan(5, 5000, torch.float32).kernel is BwdKernel.ONE_PASS_PREFETCH


def test_unaligned_16_bit_rows_4096_wide_take_one_row_a_step_and_match_reference(monkeypatch):
    # 3001-wide fp16 rows (no 16-byte loads) run the plain one-pass kernel one row a step with
    # 4 warps (prediction 29); aligned 4096-wide rows and fp32 rows keep the prefetching kernel.
    name = "_rms_norm_bwd_kernel"
    launched = spy_on_launches(monkeypatch, triton_impl, name)
    outputs, expected = run_forward_backward(triton_impl.rms_norm, 5, 3001, torch.float16)
    assert launched == [name]
    assert_matches_reference(outputs, expected, torch.float16)
    assert triton_impl.bwd_plan(5, 3001, torch.float16).num_warps == 4
    assert triton_impl.bwd_plan(5, 4096, torch.float16).kernel is BwdKernel.ONE_PASS_PREFETCH
    assert triton_impl.bwd_plan(5, 3001, torch.float32).kernel is BwdKernel.ONE_PASS_PREFETCH


@pytest.mark.parametrize("n, chunk", [
    (1000, None), (2047, None), (2048, 1024), (3000, 1024), (5120, 2048), (16384, 4096), (32768, 8192),
    (100000, 8192), (131073, 8192),
])
def test_forward_loops_over_chunks_from_2048_wide_at_any_width(n, chunk):
    # Rows narrower than 2048 are tiled whole; wider ones loop, in chunks no wider than the
    # row, rows wider than the table's widest entry in its chunks rather than in one block
    # that would not fit in registers.
    plan = triton_impl.fwd_plan(4096, n)
    assert plan.chunk == chunk
    assert plan.chunk is None or plan.num_warps * 32 * 4 <= plan.chunk <= n


def test_looped_forward_writes_nothing_past_its_rows():
    # y is the front of a NaN-filled buffer one chunk longer: the masked stores of the last,
    # partial chunk of the last row must leave the rest of it alone.
    x, weight = torch.randn(M, 200), torch.randn(200)
    buffer = torch.full((M * 200 + 64,), float("nan"))
    rstd = torch.empty(M)
    triton_impl._rms_norm_fwd_looped_kernel[(M,)](x, weight, buffer, rstd, EPS, N=200, CHUNK=64, NUM_STAGES=1)
    assert buffer[M * 200:].isnan().all()
    assert not buffer[:M * 200].isnan().any()


def test_rows_32768_wide_run_the_row_split_backward(monkeypatch):
    # 20000-wide fp16 rows (padded to 32768) must take the row-split kernel, masked, on the default path.
    name = "_rms_norm_bwd_row_split_kernel"
    launched = spy_on_launches(monkeypatch, triton_wide, name)
    outputs, expected = run_forward_backward(triton_impl.rms_norm, 3, 20000, torch.float16)
    assert launched == [name]
    assert_matches_reference(outputs, expected, torch.float16)


def test_only_bf16_keeps_its_input_at_16384_wide():
    # fp16's second conversion would be merged with the first, so it keeps the one-pass kernel.
    assert triton_impl.bwd_plan(4096, 16384, torch.bfloat16).kernel is BwdKernel.ONE_PASS_KEPT
    assert triton_impl.bwd_plan(4096, 10000, torch.bfloat16).kernel is BwdKernel.ONE_PASS_KEPT
    for dtype in (torch.float16, torch.float32):
        assert triton_impl.bwd_plan(4096, 16384, dtype).kernel is BwdKernel.ONE_PASS
    for n in (16400, 32768, 131072):
        assert triton_impl.bwd_plan(4096, n, torch.bfloat16).kernel is BwdKernel.ROW_SPLIT
        assert triton_impl.bwd_plan(4096, n, torch.float16).kernel is BwdKernel.ROW_SPLIT
        assert triton_impl.bwd_plan(4096, n, torch.float32).kernel is BwdKernel.TWO_PASS
    # Past 16 parts, and widths whose loads cannot be vectorized (they spill), take two passes.
    for n in (131088, 20001):
        assert triton_impl.bwd_plan(4096, n, torch.bfloat16).kernel is BwdKernel.TWO_PASS
    # Below 4096 rows the kept-input kernel runs persistent, not on 32-row programs.
    assert triton_impl.bwd_plan(4095, 16384, torch.bfloat16).rows_per_program is None


def test_row_split_share_cells_carry_each_rows_shares_to_its_sum():
    # Three parts publish their shares of rows 0 and 1 (the interpreter runs them one after
    # another); each row's sum read back from the 64-bit cells is its own shares' sum, sign
    # and all, with every cell flagged ready.
    @triton.jit
    def publish(cell_ptr, shares_ptr, PARTS: tl.constexpr):
        part = tl.program_id(0)
        for row in range(2):
            triton_wide._publish_share(cell_ptr, row, part, tl.load(shares_ptr + row * PARTS + part), PARTS)

    @triton.jit
    def read(cell_ptr, out_ptr, PARTS: tl.constexpr, CELLS: tl.constexpr):
        row = tl.program_id(0)
        tl.store(out_ptr + row, triton_wide._row_sum_of_shares(cell_ptr, row, PARTS, CELLS))

    shares = torch.tensor([[-1.5, 2.25, 1e-3], [4.0, -0.5, 3e-2]])
    cells, totals = torch.zeros(6, dtype=torch.int64), torch.empty(2)
    publish[(3,)](cells, shares, PARTS=3)
    assert ((cells >> 32) == 1).all()
    read[(2,)](cells, totals, PARTS=3, CELLS=4)
    torch.testing.assert_close(totals, shares.sum(1), rtol=1e-6, atol=0)


def test_prefetching_backward_refuses_a_grid_whose_step_would_wrap():
    # Its next-row step is an int32 product; 2**18 one-row programs of 8192 reach 2**31.
    x = torch.zeros(1, 1, dtype=torch.bfloat16).expand(2**18, 8192)
    plan = BwdPlan(BwdKernel.ONE_PASS_PREFETCH, 1, 8192, 16, rows_per_program=1)
    with pytest.raises(ValueError, match="2\\*\\*31"):
        triton_impl._launch_one_pass_bwd(x, x, x[0], x[:, 0].float(), x, plan)


def test_backward_plans_refuse_settings_their_kernel_would_ignore():
    for plan in ((BwdKernel.ONE_PASS_KEPT, 2, 256, 4), (BwdKernel.ROW_SPLIT, 2, 256, 4)):
        with pytest.raises(ValueError, match="one row a step"):
            BwdPlan(*plan)
    with pytest.raises(ValueError, match="pipeline"):
        BwdPlan(BwdKernel.ONE_PASS_PREFETCH, 1, 256, 4, num_stages=2)
    with pytest.raises(ValueError, match="persistent"):
        BwdPlan(BwdKernel.ROW_SPLIT, 1, 256, 4, rows_per_program=8)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_second_conversion_to_fp32_is_exact(dtype):
    # The kept-input backward converts bf16 through its bit pattern: it must equal .float().
    @triton.jit
    def convert(src, dst, BLOCK: tl.constexpr):
        offsets = tl.arange(0, BLOCK)
        tl.store(dst + offsets, triton_wide._fp32_again(tl.load(src + offsets)))

    x = (torch.randn(64) * 1e3).to(dtype)
    x[:3] = torch.tensor([0.0, -0.0, 1e-30]).to(dtype)
    out = torch.empty(64)
    convert[(1,)](x, out, BLOCK=64)
    assert torch.equal(out, x.float())


def test_forward_plans_refuse_settings_their_kernel_cannot_run():
    with pytest.raises(ValueError, match="one row per program"):
        FwdPlan(4, 8, chunk=1024)
    with pytest.raises(ValueError, match="power of two"):
        FwdPlan(1, 8, chunk=3000)
    with pytest.raises(ValueError, match="nothing to pipeline"):
        FwdPlan(2, 8, num_stages=2)


@pytest.mark.parametrize("n", [256, 200])
def test_triton_looped_forward_matches_reference(n):
    # 64-wide chunks: four full ones at 256, three and a masked one at 200.
    x, weight = torch.randn(M, n), torch.randn(n)
    y, rstd = triton_impl.launch_fwd(x, weight, EPS, FwdPlan(1, 4, chunk=64))
    rstd_want = torch.rsqrt(x.double().pow(2).mean(-1) + EPS)
    torch.testing.assert_close(rstd.double(), rstd_want, rtol=1e-5, atol=1e-6)
    y_want = x.double() * rstd_want[:, None] * weight.double()
    torch.testing.assert_close(y.double(), y_want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("plan", PLANS)
def test_triton_launch_plans_match_reference(plan):
    # Every plan the H200 probe compares must compute the same thing; M=37 leaves partial blocks.
    fwd_plan, bwd_plan = PLANS[plan]
    x, weight, dy = torch.randn(M, 200), torch.randn(200), torch.randn(M, 200)
    y, rstd = triton_impl.launch_fwd(x, weight, EPS, fwd_plan)
    dx, dw = triton_impl.launch_bwd(dy, x, weight, rstd, bwd_plan)
    expected = reference(x, weight, dy)
    assert_matches_reference((y, dx, dw), expected, torch.float32)


class _KeywordSpy:
    """Stands in for a jitted kernel: records each launch's keywords, then runs it unless ``run`` is False."""

    def __init__(self, kernel: triton.JITFunction, run: bool = True):
        self.kernel, self.run, self.launches = kernel, run, []

    def __getitem__(self, grid: tuple):
        def launch(*args, **kwargs):
            self.launches.append(kwargs)
            return self.kernel[grid](*args, **kwargs) if self.run else None
        return launch


@pytest.mark.parametrize("plan", ["row_pairs", "two_pass", "kept", "row_split"])
def test_cpu_launches_use_no_programmatic_dependent_launch(monkeypatch, plan):
    # On the CPU (the interpreter) every backward kernel gets USE_PDL=False and the dw sum no
    # launch_pdl; the decision is the launch device's, not the one of the module's import.
    assert not triton_plans.grid_dependency_control(torch.device("cpu"))
    main_kernels = {"row_pairs": (triton_impl, "_rms_norm_bwd_kernel"),
                    "two_pass": (triton_wide, "_rms_norm_bwd_stripe_kernel"),
                    "kept": (triton_wide, "_rms_norm_bwd_kept_kernel"),
                    "row_split": (triton_wide, "_rms_norm_bwd_row_split_kernel")}
    module, name = main_kernels[plan]
    main, dw_sum = _KeywordSpy(getattr(module, name)), _KeywordSpy(triton_impl._sum_rows_kernel)
    monkeypatch.setattr(module, name, main)
    monkeypatch.setattr(triton_impl, "_sum_rows_kernel", dw_sum)
    x, weight, dy = torch.randn(M, 200), torch.randn(200), torch.randn(M, 200)
    y, rstd = triton_impl.launch_fwd(x, weight, EPS, PLANS[plan][0])
    dx, dw = triton_impl.launch_bwd(dy, x, weight, rstd, PLANS[plan][1])
    assert_matches_reference((y, dx, dw), reference(x, weight, dy), torch.float32)
    assert [launch["USE_PDL"] for launch in main.launches + dw_sum.launches] == [False, False]
    assert "launch_pdl" not in dw_sum.launches[0]


def test_programmatic_dependent_launch_is_decided_per_device(monkeypatch, request):
    # Compiled, only devices of capability 9.0 or later take it; the dw sum's launch_pdl and
    # USE_PDL come from the same decision.
    request.addfinalizer(triton_plans._capability.cache_clear)
    triton_plans._capability.cache_clear()
    capabilities = {0: (9, 0), 1: (8, 0)}
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda index: capabilities[index])
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 1)
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    assert triton_plans.grid_dependency_control(torch.device("cuda", 0))
    assert not triton_plans.grid_dependency_control(torch.device("cuda", 1))
    assert not triton_plans.grid_dependency_control(torch.device("cuda"))  # the current device, 1
    assert not triton_plans.grid_dependency_control(torch.device("cpu"))
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # read at each launch, not cached
    assert not triton_plans.grid_dependency_control(torch.device("cuda", 0))

    dw_sum = _KeywordSpy(triton_impl._sum_rows_kernel, run=False)
    monkeypatch.setattr(triton_impl, "_sum_rows_kernel", dw_sum)
    monkeypatch.setattr(triton_impl, "grid_dependency_control", lambda device: True)
    triton_impl.sum_partial_rows(torch.randn(4, 8), torch.randn(8))
    assert dw_sum.launches[0]["USE_PDL"] is True and dw_sum.launches[0]["launch_pdl"] is True


@pytest.mark.parametrize("rows", [37, 600])
def test_partial_dw_rows_sum_to_weight_dtype(rows):
    # 37 rows: one masked step of 64 rows, the last of four 64-wide column blocks masked;
    # 600 rows: two steps of 512 rows, the second masked, over 8-wide column blocks.
    partial = torch.randn(rows, 200)
    weight = torch.randn(200, dtype=torch.float16)
    dw = triton_impl.sum_partial_rows(partial, weight)
    assert dw.dtype == torch.float16
    torch.testing.assert_close(dw.double(), partial.double().sum(0).half().double(), rtol=1e-3, atol=1e-3)


def test_unknown_backward_kernel_is_refused():
    x = torch.randn(4, 8)
    valid = "valid: one_pass, one_pass_prefetch, one_pass_kept, row_split, two_pass"
    with pytest.raises(ValueError, match=valid):
        triton_impl.launch_bwd(x, x, torch.randn(8), torch.ones(4), BwdPlan("fused", 1, 8, 4))


def test_triton_bf16_backward_at_16384_wide_runs_the_kept_input_kernel(monkeypatch):
    # 10000-wide bf16 rows (padded to 16384) take the kernel that keeps them in bf16.
    name = "_rms_norm_bwd_kept_kernel"
    launched = spy_on_launches(monkeypatch, triton_wide, name)
    dx_err, dw_err = bf16_backward_errors(triton_impl.rms_norm_bwd, 5, 10000)
    assert dx_err < 1e-2 and dw_err < 1e-2  # bf16 keeps 8 bits: 4e-3 per rounding
    assert launched == [name]


@pytest.mark.parametrize("plan", [BwdPlan(BwdKernel.ONE_PASS_KEPT, 1, 256, 4),
                                  BwdPlan(BwdKernel.ROW_SPLIT, 1, 64, 4)], ids=["kept", "row_split"])
def test_triton_bf16_plans_match_reference(plan):
    # The kept-input kernel on a persistent grid and the row split (one part a row here).
    dx_err, dw_err = bf16_backward_errors(lambda *args: triton_impl.launch_bwd(*args, plan), 7, 200)
    assert dx_err < 1e-2 and dw_err < 1e-2


def test_triton_custom_ops_pass_opcheck():
    x = torch.randn(5, 48, requires_grad=True)
    weight = torch.randn(48, requires_grad=True)
    torch.library.opcheck(torch.ops.opbench.rms_norm_fwd.default, (x, weight, EPS))
    # The backward op has no autograd formula of its own (no double backward).
    x, weight = x.detach(), weight.detach()
    _, rstd = triton_impl.rms_norm_fwd(x, weight, EPS)
    dy = torch.randn(5, 48)
    torch.library.opcheck(torch.ops.opbench.rms_norm_bwd.default, (dy, x, weight, rstd))
    # A transposed x: the fakes give the contiguous layout the host functions return.
    xt = torch.randn(48, 5).t()
    torch.library.opcheck(torch.ops.opbench.rms_norm_fwd.default, (xt, weight, EPS))
    _, rstd = triton_impl.rms_norm_fwd(xt, weight, EPS)
    torch.library.opcheck(torch.ops.opbench.rms_norm_bwd.default, (torch.randn(48, 5).t(), xt, weight, rstd))


def test_triton_backward_runs_no_fill_for_the_rstd_gradient():
    # rstd is an output of the forward op that nothing differentiates; a zero-filled gradient
    # for it was one more kernel launch inside every timed backward on the GPU.
    x = torch.randn(M, 200, requires_grad=True)
    weight = torch.randn(200, requires_grad=True)
    y = triton_impl.rms_norm(x, weight, EPS)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        y.backward(torch.randn_like(y))
    ops = {event.name for event in prof.events()}
    assert "opbench::rms_norm_bwd" in ops
    assert not ops & {"aten::zeros_like", "aten::zeros", "aten::fill_", "aten::zero_"}


def test_triton_rms_norm_compiles_without_graph_breaks():
    def loss(x, weight):
        return (triton_impl.rms_norm(x, weight, EPS) * 2.0).sum()

    x = torch.randn(M, 200, requires_grad=True)
    weight = torch.randn(200, requires_grad=True)
    compiled = torch.compile(loss, fullgraph=True, backend="aot_eager")
    eager_grads = torch.autograd.grad(loss(x, weight), (x, weight))
    compiled_value = compiled(x, weight)
    compiled_grads = torch.autograd.grad(compiled_value, (x, weight))
    torch.testing.assert_close(compiled_value, loss(x, weight))
    for got, want in zip(compiled_grads, eager_grads, strict=True):
        torch.testing.assert_close(got, want)


def test_default_backward_plans_compile_for_sm90_within_shared_memory():
    # The four-stage 8192-wide plan once went to fp32 rows too, which need 288 KiB of shared
    # memory.  The check compiles kernels, which the interpreter this session runs cannot.
    check = run_compiling(Path(__file__).with_name("sm90") / "rms_norm_plans_fit_sm90.py")
    assert check.returncode == 0, check.stdout + check.stderr
    assert check.stdout.count("B of shared memory") == 7 * 3, check.stdout  # 7 widths, 3 dtypes
