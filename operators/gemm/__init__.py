"""Matrix multiplication kernels (Triton and Helion) for the gemm and addmm operators."""
