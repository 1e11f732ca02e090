"""ptxgen.kernels: the kernels users call, written in the tile IR and built from a config."""
from .attention import AttentionConfig, attention
from .gemm import GemmConfig, choose_config
from .linalg import linear, matmul, scaled_mm

__all__ = ["AttentionConfig", "GemmConfig", "attention", "choose_config", "linear", "matmul", "scaled_mm"]
