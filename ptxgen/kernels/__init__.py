"""ptxgen.kernels: the kernels users call, written in the tile IR and built from a config."""
from .fp8 import (
    fp8_gemm_nt, get_col_major_tma_aligned_tensor, get_m_alignment_for_contiguous_layout,
    get_mn_major_tma_aligned_tensor, get_tma_aligned_size, m_grouped_fp8_gemm_nt_contiguous,
    m_grouped_fp8_gemm_nt_masked,
)
from .gemm import GemmConfig, choose_config
from .gemm.heuristic import choose_block_scaled_config
from .linalg import linear, matmul, scaled_mm
from .quantize import per_block_cast_to_fp8, per_token_cast_to_fp8

__all__ = ["GemmConfig", "choose_block_scaled_config", "choose_config", "fp8_gemm_nt",
           "get_col_major_tma_aligned_tensor", "get_m_alignment_for_contiguous_layout",
           "get_mn_major_tma_aligned_tensor", "get_tma_aligned_size", "linear", "m_grouped_fp8_gemm_nt_contiguous",
           "m_grouped_fp8_gemm_nt_masked", "matmul", "per_block_cast_to_fp8", "per_token_cast_to_fp8", "scaled_mm"]
