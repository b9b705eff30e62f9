"""The exp operator: elementwise exponential, forward and backward."""
