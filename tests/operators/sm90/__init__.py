"""Scripts that compile kernels for sm_90 on the CPU, each run by a test in a process of its own."""
