"""ptxgen.kernels: the kernels users call, written in the tile IR and built from a config."""
from .attention import AttentionConfig, attention, attention_varlen
from .gemm import GemmConfig, choose_config
from .linalg import linear, matmul, scaled_mm

__all__ = ["AttentionConfig", "GemmConfig", "attention", "attention_varlen", "choose_config", "linear", "matmul", "scaled_mm"]
