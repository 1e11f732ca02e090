"""Attention forward (FlashAttention-3's structure in the tile IR): ``build(AttentionConfig(...))`` makes the kernel of
a configuration, ``choose_config`` picks one for a problem; ``attention`` is the op users call."""
from .api import attention
from .build import build
from .config import AttentionConfig, choose_config

__all__ = ["AttentionConfig", "attention", "build", "choose_config"]
