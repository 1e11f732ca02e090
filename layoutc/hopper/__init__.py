"""layoutc.hopper: what Hopper's wgmma and TMA need from shared-memory layouts.

GMMA smem atoms (``gmma_atom``), the wgmma descriptor derived from a layout (``make_descriptor``,
``descriptor_verdict``, ``DescriptorIterator``, and CuTe's fragment view ``descriptor_fragment``), register fragments
as thread-value layouts (``accumulator_tv``, ``a_fragment_tv``, ``ldmatrix_tv``) and
those atoms repeated over a whole tile by several warps or warpgroups (``copy_tv``, ``wgmma_accumulator_tv``,
``wgmma_a_tv``, ``ldmatrix_tiled_tv``; ``tiled_tv``), TMA tensor-map parameters
(``make_tma_params``) and bank conflicts (``bank_conflicts``). A smem layout's outer Swizzle acts on byte addresses
(CuTe's smem convention). Element types are looked up by ``dtype``, which also takes CuTe's names (``bfloat16_t``,
``half_t``, ``float_e4m3_t``, ...).
"""
from .dtypes import DType, cute_names, dtype, known_dtypes
from .gmma import Major, SwizzleMode, gmma_atom, gmma_smem_layout
from .smem import byte_address, byte_addresses, split_smem_layout
from .descriptor import (
    DescriptorError, DescriptorFragment, DescriptorIterator, DescriptorVerdict, WgmmaDescriptor, WgmmaStep,
    core_matrix_addresses, descriptor_fragment, descriptor_verdict, make_descriptor, wgmma_k, wgmma_tiles,
)
from .fragments import (
    a_fragment_k, a_fragment_register, a_fragment_tv, accumulator_block_tv, accumulator_coords,
    accumulator_num_registers, accumulator_register, accumulator_tv, accumulator_warp_tv, ldmatrix_address_coords,
    ldmatrix_address_lanes, ldmatrix_register, ldmatrix_tile_shape, ldmatrix_tv, stmatrix_address_lanes, stmatrix_tv,
    tv_coord, tv_coords, tv_owners, tv_table, wgmma_n_values,
)
from .tiled import (
    copy_tv, ldmatrix_tiled_tv, stmatrix_tiled_tv, tiled_tv, vector_elements, wgmma_a_tv, wgmma_accumulator_tv,
)
from .banks import (
    BankReport, bank_conflicts, bank_conflicts_addresses, ldmatrix_access, lowering_access, max_vector_bytes,
    stmatrix_access, swizzle_chunk_bytes, thread_addresses, vector_groups,
)
from .tma import (
    TmaBox, TmaBoxes, TmaDataType, TmaError, TmaInterleave, TmaL2Promotion, TmaOobFill, TmaParams, TmaSwizzle,
    check_global_address, check_tma_params, make_tma_params, tma_boxes, tma_data_type,
)
