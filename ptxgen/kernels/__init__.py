"""ptxgen.kernels: the kernels users call, written in the tile IR and built from a config. (The row softmax is
``ptxgen.kernels.softmax.softmax``: exporting it here would hide its module behind the function.)

The GEMM ops (``matmul``, ``linear``, ``scaled_mm``, ``choose_config``) and attention are imported with the package;
the block-scaled FP8 GEMMs, the quantizers and the row-wise norms on first use (``LAZY``): a process that only
multiplies matrices does not pay for importing them (their modules are a noticeable share of a cold first ``matmul``
where Python compiles the sources at import). ``from ptxgen.kernels import rms_norm`` and ``ptxgen.kernels.rms_norm``
work as if they had been imported eagerly.
"""
import importlib

from .attention import AttentionConfig, attention, attention_varlen
from .gemm import GemmConfig, choose_config
from .gemm.heuristic import choose_block_scaled_config
from .linalg import linear, matmul, scaled_mm

# exported name -> the module that defines it (relative to this package), imported on first access
LAZY = {
    **dict.fromkeys(("fp8_gemm_nt", "get_col_major_tma_aligned_tensor", "get_m_alignment_for_contiguous_layout",
                     "get_mk_alignment_for_contiguous_layout", "get_mn_major_tma_aligned_tensor",
                     "get_tma_aligned_size", "m_grouped_fp8_gemm_nt_contiguous", "m_grouped_fp8_gemm_nt_masked"),
                    ".fp8"),
    **dict.fromkeys(("layer_norm", "rms_norm"), ".norms"),
    **dict.fromkeys(("per_block_cast_to_fp8", "per_token_cast_to_fp8"), ".quantize"),
    **dict.fromkeys(("RowConfig", "choose_row_config"), ".rowwise"),
}


def __getattr__(name: str):
    """A ``LAZY`` export: its module imported now, the value kept in the package. Post: ``ptxgen.kernels.X`` is the
    same object as ``ptxgen.kernels.<module>.X`` (e.g. ``rms_norm`` is ``ptxgen.kernels.norms.rms_norm``)."""
    module = LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(LAZY))


__all__ = ["AttentionConfig", "GemmConfig", "RowConfig", "attention", "attention_varlen", "choose_block_scaled_config",
           "choose_config", "choose_row_config", "fp8_gemm_nt", "get_col_major_tma_aligned_tensor",
           "get_m_alignment_for_contiguous_layout", "get_mk_alignment_for_contiguous_layout",
           "get_mn_major_tma_aligned_tensor", "get_tma_aligned_size",
           "layer_norm", "linear", "m_grouped_fp8_gemm_nt_contiguous", "m_grouped_fp8_gemm_nt_masked", "matmul",
           "per_block_cast_to_fp8", "per_token_cast_to_fp8", "rms_norm", "scaled_mm"]
