"""The rms_norm Triton and Helion kernels, run by Triton's CPU interpreter, against float64."""

from harness.device import prepare_backends

prepare_backends("cpu")

import helion  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

from operators.rms_norm import helion_impl, triton_impl  # noqa: E402

EPS = 1e-6
M = 37
TOLERANCES = {
    torch.float32: {"rtol": 1e-4, "atol": 1e-4},
    torch.float16: {"rtol": 1e-2, "atol": 1e-2},
}
IMPLS = {"triton": triton_impl, "helion": helion_impl}


def reference(x, weight, dy):
    """y, dx, dw from the formulas, in float64."""
    x, weight, dy = x.double(), weight.double(), dy.double()
    rstd = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS)
    xhat = x * rstd
    g = dy * weight
    dx = rstd * (g - xhat * (g * xhat).mean(-1, keepdim=True))
    return xhat * weight, dx, (dy * xhat).sum(0)


def run_forward_backward(rms_norm, m, n, dtype):
    x = torch.randn(m, n, dtype=dtype, requires_grad=True)
    weight = torch.randn(n, dtype=dtype, requires_grad=True)
    dy = torch.randn(m, n, dtype=dtype)
    y = rms_norm(x, weight, EPS)
    y.backward(dy)
    return (y, x.grad, weight.grad), reference(x.detach(), weight.detach(), dy)


def assert_matches_reference(outputs, expected, dtype):
    for name, got, want in zip(("y", "dx", "dw"), outputs, expected, strict=True):
        assert got.dtype == dtype, name
        torch.testing.assert_close(got.double(), want, **TOLERANCES[dtype], msg=name)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("n", [200, 256])
@pytest.mark.parametrize("impl", IMPLS)
def test_forward_and_gradients_match_float64_reference(impl, n, dtype):
    outputs, expected = run_forward_backward(IMPLS[impl].rms_norm, M, n, dtype)
    assert_matches_reference(outputs, expected, dtype)


@pytest.mark.parametrize("impl", IMPLS)
def test_eps_keeps_an_all_zero_row_finite(impl):
    """Without eps a zero row divides by zero: rstd = 1/sqrt(eps), y = 0, dx = dy * w / sqrt(eps)."""
    x = torch.randn(5, 200)
    x[2] = 0
    x.requires_grad_(True)
    weight = torch.randn(200, requires_grad=True)
    dy = torch.randn(5, 200)
    y = IMPLS[impl].rms_norm(x, weight, EPS)
    y.backward(dy)
    assert torch.isfinite(y).all() and torch.isfinite(x.grad).all() and torch.isfinite(weight.grad).all()
    expected = reference(x.detach(), weight.detach(), dy)
    assert_matches_reference((y, x.grad, weight.grad), expected, torch.float32)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_triton_wide_row_paths_match_reference(monkeypatch, dtype):
    # Rows count as wide from 64 columns: 200 is not a multiple of 16, so the split backward
    # (4 column stripes) runs, in fp16 as in fp32.
    monkeypatch.setattr(triton_impl, "_BWD_ONE_PASS_MAX_BLOCK_N", 64)
    split = triton_impl.BwdPlan("split", 4, 64, 4, rows_per_program=4)
    monkeypatch.setattr(triton_impl, "_SPLIT_STRIPE", split)
    monkeypatch.setattr(triton_impl, "_ROW_DOT_BLOCK_N", 64)  # the row sums loop over 4 chunks
    assert triton_impl.bwd_plan(9, 200, dtype).kernel == "split"
    outputs, expected = run_forward_backward(triton_impl.rms_norm, 9, 200, dtype)
    assert_matches_reference(outputs, expected, dtype)


PLANS = {
    "persistent": (triton_impl.FwdPlan(2, 4, num_stages=2, persistent=True),
                   triton_impl.BwdPlan("one_pass", 2, 256, 4, num_stages=2)),
    "fixed_rows": (triton_impl.FwdPlan(4, 4),
                   triton_impl.BwdPlan("one_pass", 1, 256, 4, rows_per_program=5)),
    "split": (triton_impl.FwdPlan(1, 4),
              triton_impl.BwdPlan("split", 4, 64, 4, rows_per_program=10)),
    "prefetch": (triton_impl.FwdPlan(1, 4, num_stages=2, persistent=True),
                 triton_impl.BwdPlan("one_pass_prefetch", 2, 256, 4)),
    "prefetch_fixed_rows": (triton_impl.FwdPlan(1, 4),
                            triton_impl.BwdPlan("one_pass_prefetch", 1, 256, 4, rows_per_program=5)),
    "kept": (triton_impl.FwdPlan(1, 4),
             triton_impl.BwdPlan("one_pass_kept", 1, 256, 4, rows_per_program=5)),
    "fwd_looped": (triton_impl.FwdPlan(1, 4, num_stages=2, chunk=64),
                   triton_impl.BwdPlan("one_pass", 1, 256, 4)),
    "row_split": (triton_impl.FwdPlan(1, 4),  # one part a row under the interpreter
                  triton_impl.BwdPlan("row_split", 1, 64, 4)),
}


class LaunchSpy:
    """Stands in for a jitted kernel and records each launch's name before running it."""

    def __init__(self, kernel, name, launched):
        self.kernel, self.name, self.launched = kernel, name, launched

    def __getitem__(self, grid):
        self.launched.append(self.name)
        return self.kernel[grid]


def test_rows_5000_wide_run_the_looped_forward_and_pipelined_backward(monkeypatch):
    # The default path for 5000-wide fp16 rows must launch the two kernels the H200 probes
    # chose (the forward in three 2048-wide chunks, the last one masked; the backward padded
    # to 8192) and still match the float64 reference; fp32 rows keep the register prefetch
    # (four pipeline stages of fp32 rows overflow shared memory).
    launched = []
    for name in ("_rms_norm_fwd_looped_kernel", "_rms_norm_bwd_kernel"):
        monkeypatch.setattr(triton_impl, name, LaunchSpy(getattr(triton_impl, name), name, launched))
    outputs, expected = run_forward_backward(triton_impl.rms_norm, 5, 5000, torch.float16)
    assert launched == ["_rms_norm_fwd_looped_kernel", "_rms_norm_bwd_kernel"]
    assert_matches_reference(outputs, expected, torch.float16)
    assert triton_impl.fwd_plan(5, 5000).chunk == 2048
    assert triton_impl.bwd_plan(5, 5000, torch.float16).num_stages == 4
    assert triton_impl.bwd_plan(5, 5000, torch.float32).kernel == "one_pass_prefetch"


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
    launched = []
    name = "_rms_norm_bwd_row_split_kernel"
    monkeypatch.setattr(triton_impl, name, LaunchSpy(getattr(triton_impl, name), name, launched))
    outputs, expected = run_forward_backward(triton_impl.rms_norm, 3, 20000, torch.float16)
    assert launched == [name]
    assert_matches_reference(outputs, expected, torch.float16)


def test_only_bf16_keeps_its_input_at_16384_wide():
    # fp16's second conversion would be merged with the first, so it keeps the one-pass kernel.
    assert triton_impl.bwd_plan(4096, 16384, torch.bfloat16).kernel == "one_pass_kept"
    assert triton_impl.bwd_plan(4096, 10000, torch.bfloat16).kernel == "one_pass_kept"
    for dtype in (torch.float16, torch.float32):
        assert triton_impl.bwd_plan(4096, 16384, dtype).kernel == "one_pass"
    for n in (16400, 32768, 131072):
        assert triton_impl.bwd_plan(4096, n, torch.bfloat16).kernel == "row_split"
        assert triton_impl.bwd_plan(4096, n, torch.float16).kernel == "row_split"
        assert triton_impl.bwd_plan(4096, n, torch.float32).kernel == "split"
    # Past 16 parts, and widths whose loads cannot be vectorized (they spill), take the split.
    for n in (131088, 20001):
        assert triton_impl.bwd_plan(4096, n, torch.bfloat16).kernel == "split"
    # Below 4096 rows the kept-input kernel runs persistent, not on 32-row programs.
    assert triton_impl.bwd_plan(4095, 16384, torch.bfloat16).rows_per_program is None


def test_row_split_slots_carry_each_rows_shares_to_its_sum():
    # Three parts publish their shares of rows 0 and 1 (the interpreter runs them one after
    # another); each row's sum read back from the 64-bit slots is its own shares' sum, sign
    # and all, with every slot flagged ready.
    @triton.jit
    def publish(slot_ptr, shares_ptr, PARTS: tl.constexpr):
        part = tl.program_id(0)
        for row in range(2):
            triton_impl._publish_share(slot_ptr, row, part, tl.load(shares_ptr + row * PARTS + part), PARTS)

    @triton.jit
    def read(slot_ptr, out_ptr, PARTS: tl.constexpr, SLOTS: tl.constexpr):
        row = tl.program_id(0)
        tl.store(out_ptr + row, triton_impl._row_sum_of_shares(slot_ptr, row, PARTS, SLOTS))

    shares = torch.tensor([[-1.5, 2.25, 1e-3], [4.0, -0.5, 3e-2]])
    slots, totals = torch.zeros(6, dtype=torch.int64), torch.empty(2)
    publish[(3,)](slots, shares, PARTS=3)
    assert ((slots >> 32) == 1).all()
    read[(2,)](slots, totals, PARTS=3, SLOTS=4)
    torch.testing.assert_close(totals, shares.sum(1), rtol=1e-6, atol=0)


def test_prefetching_backward_refuses_a_grid_whose_step_would_wrap():
    # Its next-row step is an int32 product; 2**18 one-row programs of 8192 reach 2**31.
    x = torch.zeros(1, 1, dtype=torch.bfloat16).expand(2**18, 8192)
    plan = triton_impl.BwdPlan("one_pass_prefetch", 1, 8192, 16, rows_per_program=1)
    with pytest.raises(ValueError, match="2\\*\\*31"):
        triton_impl._launch_one_pass_bwd(x, x, x[0], x[:, 0].float(), x, plan)


def test_backward_plans_refuse_settings_their_kernel_would_ignore():
    for plan in (("one_pass_kept", 2, 256, 4), ("row_split", 2, 256, 4)):
        with pytest.raises(ValueError, match="one row a step"):
            triton_impl.BwdPlan(*plan)
    with pytest.raises(ValueError, match="pipeline"):
        triton_impl.BwdPlan("one_pass_prefetch", 1, 256, 4, num_stages=2)
    with pytest.raises(ValueError, match="persistent"):
        triton_impl.BwdPlan("row_split", 1, 256, 4, rows_per_program=8)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_second_conversion_to_fp32_is_exact(dtype):
    # The kept-input backward converts bf16 through its bit pattern: it must equal .float().
    @triton.jit
    def convert(src, dst, BLOCK: tl.constexpr):
        offsets = tl.arange(0, BLOCK)
        tl.store(dst + offsets, triton_impl._fp32_again(tl.load(src + offsets)))

    x = (torch.randn(64) * 1e3).to(dtype)
    x[:3] = torch.tensor([0.0, -0.0, 1e-30]).to(dtype)
    out = torch.empty(64)
    convert[(1,)](x, out, BLOCK=64)
    assert torch.equal(out, x.float())


def test_looped_forward_plan_refuses_settings_it_would_ignore_or_cannot_compile():
    with pytest.raises(ValueError, match="one row per program"):
        triton_impl.FwdPlan(4, 8, chunk=1024)
    with pytest.raises(ValueError, match="plain grid"):
        triton_impl.FwdPlan(1, 8, persistent=True, chunk=1024)
    with pytest.raises(ValueError, match="power of two"):
        triton_impl.FwdPlan(1, 8, chunk=3000)


@pytest.mark.parametrize("n", [256, 200])
def test_triton_looped_forward_matches_reference(n):
    # 64-wide chunks: four full ones at 256, three and a masked one at 200.
    x, weight = torch.randn(M, n), torch.randn(n)
    y, rstd = triton_impl.launch_fwd(x, weight, EPS, triton_impl.FwdPlan(1, 4, chunk=64))
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


@pytest.mark.parametrize("rows, tile", [(37, None), (37, (8, 16)), (600, None)])
def test_partial_dw_rows_sum_to_weight_dtype(rows, tile):
    # (8, 16) loops over the rows in 5 steps and masks the last of 13 column blocks.
    partial = torch.randn(rows, 200)
    weight = torch.randn(200, dtype=torch.float16)
    dw = triton_impl.sum_partial_rows(partial, weight, tile)
    assert dw.dtype == torch.float16
    torch.testing.assert_close(dw.double(), partial.double().sum(0).half().double(), rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("rows", [3, 37])
def test_helion_dw_sum_adds_partial_rows_in_weight_dtype(rows):
    partial = torch.randn(rows, 200)
    weight = torch.randn(200, dtype=torch.float16)
    dw = helion_impl.rms_norm_dw_sum(partial, weight)
    assert dw.dtype == torch.float16
    torch.testing.assert_close(dw.double(), partial.double().sum(0).half().double(), rtol=1e-3, atol=1e-3)


def test_unknown_backward_kernel_is_refused():
    x = torch.randn(4, 8)
    valid = "valid: one_pass, one_pass_prefetch, one_pass_kept, row_split, split"
    with pytest.raises(ValueError, match=valid):
        triton_impl.launch_bwd(x, x, torch.randn(8), torch.ones(4), triton_impl.BwdPlan("fused", 1, 8, 4))


@pytest.mark.parametrize(
    ("shared_rows_max_width", "kernels"),
    [(256, ["rms_norm_bwd_shared_rows", "rms_norm_dw_sum"]),
     (128, ["rms_norm_bwd_row_dot", "rms_norm_bwd_stripe", "rms_norm_dw_sum"])],
)
def test_helion_wide_row_backwards_match_reference(monkeypatch, shared_rows_max_width, kernels):
    # Rows count as wide from 128 columns: 200 (padded to 256) takes shared rows, or the split.
    monkeypatch.setattr(helion_impl, "BWD_MAX_WIDTH", 128)
    monkeypatch.setattr(helion_impl, "SHARED_ROWS_MAX_WIDTH", shared_rows_max_width)
    assert helion_impl.bwd_kernel_names(200, torch.float32) == kernels
    outputs, expected = run_forward_backward(helion_impl.rms_norm, M, 200, torch.float32)
    assert_matches_reference(outputs, expected, torch.float32)


def helion_bwd(dy, x, weight, rstd):
    """Helion's backward kernels for ``x``'s width: ``dx`` and the summed fp32 ``dw``."""
    dx, dw_partial = helion_impl.bwd_partials(dy, x, weight, rstd)
    return dx, dw_partial.sum(0)


def bf16_backward_errors(bwd, m, n):
    """Largest ``dx`` and ``dw`` errors of a bf16 backward, over the largest float64 value."""
    x, weight, dy = (torch.randn(m, n).bfloat16(), torch.randn(n).bfloat16(), torch.randn(m, n).bfloat16())
    rstd = torch.rsqrt(x.double().pow(2).mean(-1) + EPS).float()
    dx, dw = bwd(dy, x, weight, rstd)
    _, dx_want, dw_want = reference(x, weight, dy)
    return [((got.double() - want).abs().max() / want.abs().max()).item()
            for got, want in ((dx, dx_want), (dw, dw_want))]


def test_bf16_backwards_at_16384_wide_keep_their_input_and_match_reference(monkeypatch):
    # 10000-wide bf16 rows (padded to 16384) take the kept-input kernels of both backends.
    launched = []
    name = "_rms_norm_bwd_kept_kernel"
    monkeypatch.setattr(triton_impl, name, LaunchSpy(getattr(triton_impl, name), name, launched))
    for backend, bwd in (("triton", triton_impl.rms_norm_bwd), ("helion", helion_bwd)):
        dx_err, dw_err = bf16_backward_errors(bwd, 5, 10000)
        assert dx_err < 1e-2 and dw_err < 1e-2, backend  # bf16 keeps 8 bits: 4e-3 per rounding
    assert launched == [name]
    # Helion's kernel converts the kept bf16 rows again through their bit pattern, fp16 not.
    for dtype, kept in ((torch.bfloat16, True), (torch.float16, False)):
        args = helion_impl.tuning_args("rms_norm_bwd", 8, 10000, dtype, "cpu")
        config = helion.Config(programs_per_sm=1, num_warps=4)
        code = helion_impl.rms_norm_bwd.bind(args).to_triton_code(config)
        assert ("tl.int16, bitcast=True" in code) == kept, dtype


def test_helion_row_split_parts_fit_their_slots():
    # A row's parts publish into SLOTS_PER_ROW slots, and each needs an SM of its own.
    most_parts = helion_impl.SHARED_ROWS_MAX_WIDTH // helion_impl.ROW_SPLIT_MIN_PART
    assert most_parts <= helion_impl.SLOTS_PER_ROW
    for config in helion_impl.tuning_candidates("rms_norm_bwd_row_split", helion_impl.SHARED_ROWS_MAX_WIDTH):
        assert config["block_sizes"][0] >= helion_impl.ROW_SPLIT_MIN_PART


@pytest.mark.parametrize("m", [3, 7])
def test_helion_row_split_backward_matches_reference(monkeypatch, m):
    # 16-bit rows wider than BWD_MAX_WIDTH (here 128) with N a multiple of 16 take the row
    # split (one part a row under the interpreter); 3 rows leave one of its 4 groups idle.
    monkeypatch.setattr(helion_impl, "BWD_MAX_WIDTH", 128)
    assert helion_impl.bwd_kernel_names(208, torch.bfloat16)[0] == "rms_norm_bwd_row_split"
    assert helion_impl.bwd_kernel_names(208, torch.float16)[0] == "rms_norm_bwd_row_split"
    assert helion_impl.bwd_kernel_names(200, torch.bfloat16)[0] == "rms_norm_bwd_shared_rows"
    assert helion_impl.bwd_kernel_names(208, torch.float32)[0] == "rms_norm_bwd_shared_rows"
    dx_err, dw_err = bf16_backward_errors(helion_bwd, m, 208)
    assert dx_err < 1e-2 and dw_err < 1e-2


@pytest.mark.parametrize("plan", [triton_impl.BwdPlan("one_pass_kept", 1, 256, 4),
                                  triton_impl.BwdPlan("row_split", 1, 64, 4)], ids=["kept", "row_split"])
def test_triton_bf16_plans_match_reference(plan):
    # The kept-input kernel on a persistent grid and the row split (one part a row here).
    dx_err, dw_err = bf16_backward_errors(lambda *args: triton_impl.launch_bwd(*args, plan), 7, 200)
    assert dx_err < 1e-2 and dw_err < 1e-2


@pytest.mark.parametrize("impl", IMPLS)
def test_rejects_input_that_is_not_2d(impl):
    with pytest.raises(ValueError, match="2-D"):
        IMPLS[impl].rms_norm(torch.randn(2, 3, 8), torch.randn(8))


def test_triton_custom_ops_pass_opcheck():
    x = torch.randn(5, 48, requires_grad=True)
    weight = torch.randn(48, requires_grad=True)
    torch.library.opcheck(torch.ops.opbench.rms_norm_fwd.default, (x, weight, EPS))
    # The backward op has no autograd formula of its own (no double backward).
    x, weight = x.detach(), weight.detach()
    _, rstd = triton_impl.rms_norm_fwd(x, weight, EPS)
    dy = torch.randn(5, 48)
    torch.library.opcheck(torch.ops.opbench.rms_norm_bwd.default, (dy, x, weight, rstd))


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


@pytest.mark.parametrize(
    ("kernel_name", "n"),
    [("rms_norm_fwd", 4096), ("rms_norm_bwd", 4096), ("rms_norm_bwd", 16384),
     ("rms_norm_bwd_row_dot", 32768), ("rms_norm_bwd_stripe", 32768), ("rms_norm_bwd_shared_rows", 32768),
     ("rms_norm_bwd_row_split", 32768),
     ("rms_norm_dw_sum", 4096)],
)
def test_helion_tuning_candidates_generate_triton_code(kernel_name, n):
    args = helion_impl.tuning_args(kernel_name, 64, n, torch.float16, "cpu")
    bound = helion_impl.KERNELS[kernel_name].bind(args)
    candidates = helion_impl.tuning_candidates(kernel_name, n)
    assert 4 <= len(candidates) <= 12
    for config in candidates:
        assert "@triton.jit" in bound.to_triton_code(config)


@pytest.mark.parametrize(("name", "rows"), [("rms_norm_dw_sum", 2048)])
def test_helion_many_rows_slots_are_tuned_on_many_rows(name, rows):
    jobs = helion_impl.tuning_jobs(torch.float16, "cpu")
    job = next(job for job in jobs if job.key == f"{name}|float16|n4096|rows{rows}")
    assert job.make_args.args[:3] == (name, rows, 4096)  # arguments are only made when tuned
    bound = helion_impl.KERNELS[name].bind(helion_impl.tuning_args(name, 64, 4096, torch.float16, "cpu"))
    for config in job.candidates:
        assert "@triton.jit" in bound.to_triton_code(config)


def test_helion_kernels_prefer_their_many_rows_config_from_many_rows(monkeypatch):
    # With many-rows slots from 32 rows (backward) and 2 partial rows (sum), a 64-row input
    # must ask for both many-rows configs first, and a 1-row input for the backward's width
    # config; the sum still gets one partial row per program (4 under the interpreter).
    calls = []

    def record(kernel, store, keys, *args):
        calls.append((kernel.name, keys))
        return kernel(*args)

    monkeypatch.setattr(helion_impl, "call_with_stored_config", record)
    slots = {"rms_norm_bwd": (32, 32768), "rms_norm_dw_sum": (2, 2048)}
    monkeypatch.setattr(helion_impl, "MANY_ROWS_SLOTS", slots)
    for m in (64, 1):
        run_forward_backward(helion_impl.rms_norm, m, 200, torch.float32)
    width = {name: f"{name}|float32|n256" for name in helion_impl.KERNELS}
    width["rms_norm_fwd"] = "rms_norm_fwd|float32|n128"  # the forward's bucket is the power of two below
    assert calls == [
        ("rms_norm_fwd", (width["rms_norm_fwd"],)),
        ("rms_norm_bwd", (width["rms_norm_bwd"] + "|rows32768", width["rms_norm_bwd"])),
        ("rms_norm_dw_sum", (width["rms_norm_dw_sum"] + "|rows2048", width["rms_norm_dw_sum"])),
        ("rms_norm_fwd", (width["rms_norm_fwd"],)),
        ("rms_norm_bwd", (width["rms_norm_bwd"],)),
        ("rms_norm_dw_sum", (width["rms_norm_dw_sum"] + "|rows2048", width["rms_norm_dw_sum"])),
    ]
