"""rms_norm as ``torch.library`` custom ops with registered autograd, over any pair of host
functions ``forward(x, weight, eps) -> (y, rstd)`` and ``backward(dy, x, weight, rstd) -> (dx, dw)``:
the Triton backends' ops (``opbench::``) and the Helion ones' (``opbench_helion::``) are built
here alike.  ``rstd`` (fp32, one per row) is saved for the backward and is not differentiable.
"""

from collections.abc import Callable

import torch


def define_rms_norm_ops(
    namespace: str,
    forward: Callable[..., tuple[torch.Tensor, torch.Tensor]],
    backward: Callable[..., tuple[torch.Tensor, torch.Tensor]],
) -> tuple[Callable, Callable]:
    """Register ``<namespace>::rms_norm_fwd`` (``x, weight, eps -> y, rstd``) and
    ``::rms_norm_bwd`` (``dy, x, weight, rstd -> dx, dw``); returns both ops."""

    @torch.library.custom_op(f"{namespace}::rms_norm_fwd", mutates_args=())
    def rms_norm_fwd(x: torch.Tensor, weight: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
        return forward(x, weight, eps)

    @rms_norm_fwd.register_fake
    def _(x: torch.Tensor, weight: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
        return x.new_empty(x.shape), x.new_empty(x.shape[:1], dtype=torch.float32)

    @torch.library.custom_op(f"{namespace}::rms_norm_bwd", mutates_args=())
    def rms_norm_bwd(grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor,
                     rstd: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return backward(grad_out, x, weight, rstd)

    @rms_norm_bwd.register_fake
    def _(grad_out: torch.Tensor, x: torch.Tensor, weight: torch.Tensor,
          rstd: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x.new_empty(x.shape), weight.new_empty(weight.shape)

    def setup_context(ctx, inputs: tuple, output: tuple) -> None:
        x, weight, _ = inputs
        _, rstd = output
        ctx.mark_non_differentiable(rstd)
        # No zero-filled gradient for rstd: that fill was a kernel launch in every backward.
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(x, weight, rstd)

    def rms_norm_backward(ctx, grad_y: torch.Tensor | None, _grad_rstd: None) -> tuple:
        if grad_y is None:
            return None, None, None
        x, weight, rstd = ctx.saved_tensors
        dx, dw = rms_norm_bwd(grad_y, x, weight, rstd)
        return dx, dw, None

    rms_norm_fwd.register_autograd(rms_norm_backward, setup_context=setup_context)
    return rms_norm_fwd, rms_norm_bwd
