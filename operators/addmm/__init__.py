"""The addmm operator: beta * bias + alpha * (mat1 @ mat2), on the gemm operator's kernels."""
