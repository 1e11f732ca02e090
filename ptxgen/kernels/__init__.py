"""ptxgen.kernels: the kernels users call, written in the tile IR and built from a config."""
from .gemm import GemmConfig, choose_config
from .linalg import linear, matmul, scaled_mm
from .norms import layer_norm, rms_norm
from .rowwise import RowConfig, choose_row_config
from .softmax import softmax

__all__ = ["GemmConfig", "RowConfig", "choose_config", "choose_row_config", "layer_norm", "linear", "matmul",
           "rms_norm", "scaled_mm", "softmax"]
