"""layoutc.hopper: what Hopper's wgmma and TMA need from shared-memory layouts."""
from .dtypes import DType, dtype, known_dtypes
from .gmma import Major, SwizzleMode, gmma_atom, gmma_smem_layout
from .smem import byte_address, byte_addresses, split_smem_layout
