"""exp as ``torch.library`` custom ops with registered autograd, over any pair of host functions
``forward(x) -> y`` and ``backward(dy, y) -> dx`` that return new contiguous tensors: the Triton
backends' ops (``opbench::``) and the Helion ones' (``opbench_helion::``) are built here alike.

Forward: y = exp(x).  Backward: dx = dy * y, from the saved output (no second exp).  The fake
implementations give Dynamo the contiguous layout the host functions return, whatever the
input's strides.
"""

from collections.abc import Callable

import torch


def define_exp_ops(
    namespace: str,
    forward: Callable[[torch.Tensor], torch.Tensor],
    backward: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
) -> Callable[[torch.Tensor], torch.Tensor]:
    """Register ``<namespace>::exp_fwd`` (``x -> y``) and ``::exp_bwd`` (``dy, y -> dx``); returns
    the differentiable forward op."""

    @torch.library.custom_op(f"{namespace}::exp_fwd", mutates_args=())
    def exp_fwd(x: torch.Tensor) -> torch.Tensor:
        return forward(x)

    @exp_fwd.register_fake
    def _(x: torch.Tensor) -> torch.Tensor:
        return x.new_empty(x.shape)

    @torch.library.custom_op(f"{namespace}::exp_bwd", mutates_args=())
    def exp_bwd(dy: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return backward(dy, y)

    @exp_bwd.register_fake
    def _(dy: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return y.new_empty(y.shape)

    def setup_context(ctx, inputs: tuple, output: torch.Tensor) -> None:
        ctx.save_for_backward(output)

    def exp_backward(ctx, dy: torch.Tensor) -> torch.Tensor:
        (y,) = ctx.saved_tensors
        return exp_bwd(dy, y)

    exp_fwd.register_autograd(exp_backward, setup_context=setup_context)
    return exp_fwd
