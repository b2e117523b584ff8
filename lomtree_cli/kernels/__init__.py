"""Numba kernels: flat arrays in, flat arrays out, one compiled call per chunk."""
