"""ptxgen.kernels: the kernels users call, written in the tile IR and built from a config."""
