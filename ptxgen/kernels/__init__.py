"""ptxgen.kernels: the kernels users call, written in the tile IR and built from a config. (The row softmax is
``ptxgen.kernels.softmax.softmax``: exporting it here would hide its module behind the function.)"""
from .attention import AttentionConfig, attention, attention_varlen
from .fp8 import (
    fp8_gemm_nt, get_col_major_tma_aligned_tensor, get_m_alignment_for_contiguous_layout,
    get_mn_major_tma_aligned_tensor, get_tma_aligned_size, m_grouped_fp8_gemm_nt_contiguous,
    m_grouped_fp8_gemm_nt_masked,
)
from .gemm import GemmConfig, choose_config
from .gemm.heuristic import choose_block_scaled_config
from .linalg import linear, matmul, scaled_mm
from .norms import layer_norm, rms_norm
from .quantize import per_block_cast_to_fp8, per_token_cast_to_fp8
from .rowwise import RowConfig, choose_row_config

__all__ = ["AttentionConfig", "GemmConfig", "RowConfig", "attention", "attention_varlen", "choose_block_scaled_config",
           "choose_config", "choose_row_config", "fp8_gemm_nt", "get_col_major_tma_aligned_tensor",
           "get_m_alignment_for_contiguous_layout", "get_mn_major_tma_aligned_tensor", "get_tma_aligned_size",
           "layer_norm", "linear", "m_grouped_fp8_gemm_nt_contiguous", "m_grouped_fp8_gemm_nt_masked", "matmul",
           "per_block_cast_to_fp8", "per_token_cast_to_fp8", "rms_norm", "scaled_mm"]
