"""Attention forward (FlashAttention-3's structure in the tile IR): ``build(AttentionConfig(...))`` makes the kernel of
a configuration; ``attention`` / ``attention_varlen`` are the ops users call."""
from .build import build
from .config import AttentionConfig

__all__ = ["AttentionConfig", "build"]
