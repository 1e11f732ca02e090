"""Attention forward (FlashAttention-3's structure in the tile IR): ``build(AttentionConfig(...))`` makes the kernel of
a configuration, ``choose_config`` picks one for a problem; ``attention`` and ``attention_varlen`` are the ops users call."""
from .api import attention, attention_varlen
from .build import build
from .config import AttentionConfig, choose_config

__all__ = ["AttentionConfig", "attention", "attention_varlen", "build", "choose_config"]
