"""RMS normalization (Llama-style) in Triton and Helion, forward and backward."""
