"""The GEMMs: ``build(GemmConfig(...))`` makes the persistent warp-specialized wgmma kernel of a configuration;
``choose_config`` picks one from the problem's shape; ``simple`` is the one-tile-per-CTA producer/consumer GEMM."""
from .build import build
from .config import STREAMK_MIN_SAVING, TILE_FILE, GemmConfig, k_tile
from .heuristic import choose_config
from .schedule import splitk_slices, streamk_buffers, streamk_ktiles_saved

__all__ = ["GemmConfig", "STREAMK_MIN_SAVING", "TILE_FILE", "build", "choose_config", "k_tile", "splitk_slices",
           "streamk_buffers", "streamk_ktiles_saved"]
