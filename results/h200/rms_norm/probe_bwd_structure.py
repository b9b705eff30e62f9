"""Why Helion's one-pass rms_norm backward beats Triton's at the same geometry: four variants.

At 4096x16384 the b4dec3a sweep had Helion's backward at 63.5% of copy bandwidth and
Triton's at 57.8%, with the same geometry (one row a step, 16 warps; probe 4 gave Triton
57.9% with 16 rows a program as well).  Helion's generated kernel differs from Triton's in
three ways: each program takes a contiguous run of rows (Triton's stride over the grid),
the width is compiled in with no masks, and offsets are int32.  This probe times, on each
shape, the main kernels (no partial-``dw`` sum) of:

* ``triton_default``: Triton's backward as ``bwd_plan`` launches it;
* ``triton_strided_rows``: Triton's one-pass kernel, ``ROWS`` rows a program, strided;
* ``contiguous_rows``: the same code with each program's rows contiguous (runtime width, masks);
* ``helion_style``: Helion's generated structure written in Triton (contiguous rows, width
  compiled in, no masks, int32 offsets);
* ``helion``: Helion's kernel with its stored config;
* ``bf16_kept``: Triton's one-pass kernel (strided rows) that keeps ``x`` and ``dy`` in bf16
  registers and converts them again where ``dx`` needs them, through the bit pattern, so the
  compiler cannot merge the two conversions into one live fp32 copy.  Offline ``ptxas`` for
  sm_90a: 124 registers and no spills for one 16384 row with 16 warps, where the one-pass
  kernel needs 128 and spills 92 bytes (added after probe 9, prediction 8 in NOTES.md; since
  probe 11 it is ``triton_impl``'s ``one_pass_kept`` kernel, which this variant runs).

Each result's ``dx`` and summed ``dw`` are checked against a float64 reference::

    python results/h200/rms_norm/probe_bwd_structure.py --out structure.json [--shape M,N]
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl
from probe_common import (
    DTYPE,
    bwd_inputs,
    check_and_time,
    probe_parser,
    shapes_from,
    start_gpu_timing,
    write_records,
)

from operators.rms_norm import helion_impl
from operators.rms_norm import triton_impl as impl

SHAPES = ((4096, 8192), (4096, 16384), (16384, 8192))


@triton.jit
def contiguous_rows_bwd(
    dy_ptr, x_ptr, w_ptr, rstd_ptr, dx_ptr, dw_partial_ptr, M, N, ROWS, BLOCK_N: tl.constexpr
):
    """Triton's one-pass backward (one row a step) over rows ``[pid * ROWS, (pid + 1) * ROWS)``.

    ``dx = rstd * (g - xhat * sum(g * xhat) / N)`` with ``xhat = x * rstd``, ``g = dy * w``;
    row ``pid`` of ``dw_partial`` gets the program's ``sum(dy * xhat)``.
    """
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    col_mask = cols < N
    dw = tl.zeros([BLOCK_N], dtype=tl.float32)
    for i in tl.range(0, ROWS, num_stages=1):
        row = pid * ROWS + i
        mask = col_mask & (row < M)
        offsets = row.to(tl.int64) * N + cols
        x = tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
        dy = tl.load(dy_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
        rstd = tl.load(rstd_ptr + row, mask=row < M, other=0.0)
        w = tl.load(w_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
        xhat = x * rstd
        g = dy * w
        c = tl.sum(g * xhat, axis=0) / N
        tl.store(dx_ptr + offsets, (rstd * (g - xhat * c)).to(dx_ptr.dtype.element_ty), mask=mask)
        dw += dy * xhat
    tl.store(dw_partial_ptr + pid.to(tl.int64) * N + cols, dw, mask=col_mask)


@triton.jit
def helion_style_bwd(
    dy_ptr, x_ptr, w_ptr, rstd_ptr, dx_ptr, dw_partial_ptr, ROWS: tl.constexpr, N: tl.constexpr
):
    """The same math in the shape of Helion's generated kernel.

    Width compiled in, no masks, int32 offsets, rows ``[pid * ROWS, (pid + 1) * ROWS)``
    (``M`` must be a multiple of ``ROWS``).
    """
    pid = tl.program_id(0)
    cols = tl.arange(0, N)
    dw = tl.zeros([N], dtype=tl.float32)
    for i in tl.range(0, ROWS):
        row = pid * ROWS + i
        x = tl.load(x_ptr + row * N + cols).to(tl.float32)
        dy = tl.load(dy_ptr + row * N + cols).to(tl.float32)
        rstd = tl.load(rstd_ptr + row)
        xhat = x * rstd
        g = dy * tl.load(w_ptr + cols).to(tl.float32)
        c = tl.sum(g * xhat, axis=0) / N
        tl.store(dx_ptr + row * N + cols, (rstd * (g - xhat * c)).to(dx_ptr.dtype.element_ty))
        dw += dy * xhat
    tl.store(dw_partial_ptr + pid * N + cols, dw)


def launch_variant(kernel, dy, x, weight, rstd, rows: int, warps: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``dx`` and the partial ``dw`` rows of ``kernel`` with ``rows`` rows a program."""
    m, n = x.shape
    programs = triton.cdiv(m, rows)
    dx = torch.empty_like(x)
    dw_partial = torch.empty(programs, n, dtype=torch.float32, device=x.device)
    if kernel is helion_style_bwd:
        kernel[(programs,)](dy, x, weight, rstd, dx, dw_partial, ROWS=rows, N=n, num_warps=warps)
    elif kernel is contiguous_rows_bwd:
        kernel[(programs,)](dy, x, weight, rstd, dx, dw_partial, m, n, rows, BLOCK_N=n, num_warps=warps)
    else:
        plan = impl.BwdPlan(kernel, 1, triton.next_power_of_2(n), warps, rows_per_program=rows)
        return impl.launch_bwd_partials(dy, x, weight, rstd, plan)
    return dx, dw_partial


def main() -> None:
    args = probe_parser(__doc__, "4096x8192, 4096x16384, 16384x8192").parse_args()
    timer, copy_gbps = start_gpu_timing()
    shapes = shapes_from(args.shape, SHAPES)
    records = []
    for m, n in shapes:
        x, weight, dy, rstd, dx_ref, dw_ref = bwd_inputs(m, n)
        nbytes = 3 * m * n * 2
        calls = {
            "triton_default": functools.partial(impl.launch_bwd_partials, dy, x, weight, rstd,
                                                impl.bwd_plan(m, n, DTYPE)),
            "helion": functools.partial(helion_impl.bwd_partials, dy, x, weight, rstd),
        }
        for name, kernel in (("triton_strided_rows", "one_pass"), ("contiguous_rows", contiguous_rows_bwd),
                             ("helion_style", helion_style_bwd), ("bf16_kept", "one_pass_kept")):
            for rows in (16, 32):
                for warps in (16, 32):
                    calls[f"{name} rows={rows} warps={warps}"] = functools.partial(
                        launch_variant, kernel, dy, x, weight, rstd, rows, warps)
        for label, call in calls.items():
            record = {"shape": [m, n], "variant": label, "copy_gbps": copy_gbps}
            records.append(check_and_time(timer, call, record, (dx_ref, dw_ref), nbytes))
        write_records(args.out, records)


if __name__ == "__main__":
    main()
