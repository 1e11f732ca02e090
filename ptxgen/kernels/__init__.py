"""ptxgen.kernels: the kernels users call, written in the tile IR and built from a config. (The row softmax is
``ptxgen.kernels.softmax.softmax``: exporting it here would hide its module behind the function.)"""
from .gemm import GemmConfig, choose_config
from .linalg import linear, matmul, scaled_mm
from .norms import layer_norm, rms_norm
from .rowwise import RowConfig, choose_row_config

__all__ = ["GemmConfig", "RowConfig", "choose_config", "choose_row_config", "layer_norm", "linear", "matmul",
           "rms_norm", "scaled_mm"]
