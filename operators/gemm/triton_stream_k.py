"""Stream-K for the persistent TMA kernel: the tiles of the last, partial wave and of the full
wave before it are shared out by k-blocks, so that every SM does the same work.

With ``T`` output tiles of ``I`` k-blocks each on ``G`` programs (one per SM), ``T = w * G + r``
and ``0 < r``, a data-parallel grid runs ``w + 1`` waves of whole tiles, the last with only
``r`` of its ``G`` SMs busy.  Here the first ``(w - 1) * G`` tiles stay whole (the data-parallel
loop), and the remaining ``S = G + r`` tiles' ``S * I`` k-blocks are cut into ``G`` contiguous
runs of equal length (to one k-block), program ``p`` taking run ``p``::

    run p = k-blocks [p * S * I // G, (p + 1) * S * I // G) of the S tiles, tile after tile

A run is at least ``I`` long (``S > G``), so a tile is cut at most once, between the end of run
``p`` and the start of run ``p + 1`` (boundary ``p``), and has two parts.  Of the two programs
the first to arrive at boundary ``p``'s flag stores its fp32 part in slot ``p`` of a workspace
and raises the flag; the second waits for the flag, adds the stored part to its own and applies
the epilogue.  The sum of two parts does not depend on which arrives first (fp32 addition is
commutative), so results are the same from run to run.  Under Triton's CPU interpreter,
programs run one after another in order, so program ``p`` has always published before ``p + 1``
arrives and nothing waits.

Flag protocol (per boundary, an int32 that starts and ends at 0): each arrival adds 1, the
publisher adds 2 once its part is stored; the second arrival waits until the flag reads 4, then
sets it back to 0.  All programs of the grid are resident at once (at most one per SM), so a
waiting program cannot keep the one it waits for from running.  The workspace is shared by
every call on a device: calls must not run concurrently (on two streams).
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl

from operators.gemm.triton_tiles import tile_coords
from operators.gemm.triton_tma_tiles import accumulate, store_output

MAX_TILE_ELEMENTS = 256 * 128
"""The largest output tile of any TMA config: a workspace slot holds one part of it in fp32."""


@triton.jit
def data_parallel_tiles(num_tiles, programs):
    """How many tiles the data-parallel loop computes whole: all but the last full wave and the
    partial one when the tiles leave a partial wave after at least one full wave, else all."""
    waves = num_tiles // programs
    whole = num_tiles
    if waves >= 1 and num_tiles % programs != 0:
        whole = (waves - 1) * programs
    return whole


@triton.jit
def stream_k_tiles(a_desc, b_desc, c_desc, bias_ptr, part_ptr, flag_ptr, first_tile,
                   M, N, K, stride_bias_m, stride_bias_n, alpha, beta,
                   A_TRANS: tl.constexpr, B_TRANS: tl.constexpr, BIAS_KIND: tl.constexpr,
                   DOT_PRECISION: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                   BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, EPILOGUE_SUBTILE: tl.constexpr):
    """This program's run of the k-blocks of tiles ``first_tile`` onwards (module docstring)."""
    pid = tl.program_id(0)
    programs = tl.num_programs(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_blocks = tl.cdiv(K, BLOCK_K)
    shared = (num_pid_m * num_pid_n - first_tile) * k_blocks
    it = pid * shared // programs
    run_end = (pid + 1) * shared // programs
    offs = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
    while it < run_end:
        tile = it // k_blocks
        k_first = it - tile * k_blocks
        k_last = min(k_blocks, k_first + run_end - it)
        pid_m, pid_n = tile_coords(first_tile + tile, num_pid_m, num_pid_n, GROUP_M)
        acc = accumulate(a_desc, b_desc, pid_m * BLOCK_M, pid_n * BLOCK_N, k_first, k_last,
                         A_TRANS, B_TRANS, DOT_PRECISION, BLOCK_M, BLOCK_N, BLOCK_K)
        finish = (k_first == 0) & (k_last == k_blocks)
        if (k_first > 0) | (k_last < k_blocks):
            boundary = pid - (k_first > 0).to(tl.int32)
            flag = flag_ptr + boundary
            slot = part_ptr + boundary * BLOCK_M * BLOCK_N + offs
            arrived = tl.atomic_add(flag, 1, sem="acq_rel")
            finish = arrived != 0
            if arrived == 0:
                tl.store(slot, acc)
                tl.debug_barrier()
                tl.atomic_add(flag, 2, sem="release")
            else:
                seen = arrived + 1
                while seen < 4:
                    seen = tl.atomic_add(flag, 0, sem="acquire")
                tl.debug_barrier()
                acc += tl.load(slot, cache_modifier=".cg")
                tl.atomic_xchg(flag, 0, sem="relaxed")
        if finish:
            store_output(c_desc, acc, bias_ptr, pid_m * BLOCK_M, pid_n * BLOCK_N, M, N,
                         stride_bias_m, stride_bias_n, alpha, beta, BIAS_KIND, BLOCK_M, BLOCK_N,
                         EPILOGUE_SUBTILE)
        it += k_last - k_first


@functools.cache
def workspace(device: torch.device, programs: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The fp32 part slots and the zeroed int32 flags of ``programs`` boundaries on ``device``,
    allocated once per device (the kernel leaves the flags at 0)."""
    parts = torch.empty(programs * MAX_TILE_ELEMENTS, dtype=torch.float32, device=device)
    flags = torch.zeros(programs, dtype=torch.int32, device=device)
    return parts, flags
