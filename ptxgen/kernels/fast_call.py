"""The ops' repeated GPU call: a call whose signature (each torch tensor's shape, strides, dtype, device and address
mod 16, plus what else its checks read) matches an earlier one skips every check and choice — its first call passed
them — and only writes the new addresses into the prepared call site's argument block and launches.

Used by ``linalg`` (matmul, linear, scaled_mm) and ``fp8`` (the block-scaled GEMMs). A call site's parameters
take tensor addresses in two forms, a pointer slot or a TMA tensor map (128 bytes, encoded per address and kept for
the addresses torch's allocator hands out again)."""
from __future__ import annotations

from . import arguments

FAST_LIMIT = 1024      # remembered signatures per op family (the table is emptied when full)
MAPS_PER_CALL = 64     # tensor maps remembered per parameter of a fast call (per address: torch reuses a few)


def call_mode(autotune: bool, config) -> object:
    """What besides the tensors decides a GEMM op call's path: the ``autotune`` flag, with the ``GemmConfig`` the call
    forces (if any). ``call_mode(False, None)`` = False; with a config, (False, config). Post: equal modes choose the
    same configuration for equal tensor signatures."""
    return autotune if config is None else (autotune, config)


def signature_key(op: str, autotune, tensors, extra=()) -> tuple | None:
    """The signature of a call (without its stream): the op, its mode (``autotune``: the autotune flag, or (that flag,
    the ``GemmConfig`` a call forces)), per tensor its shape, strides, dtype, device index and address mod 16, then
    ``extra``; None unless every tensor is a torch Tensor or Parameter (``arguments.TORCH[0]``).
    ``signature_key("matmul", False, (a, b))`` for bf16 (16, 64) and (64, 32) CUDA tensors =
    ``("matmul", False, (16, 64), (64, 1), torch.bfloat16, 0, 0, (64, 32), (32, 1), torch.bfloat16, 0, 0)``.
    Post: equal keys mean every check of the ops passes alike (they read nothing else)."""
    if any(type(t) not in arguments.TORCH[0] for t in tensors):
        return None
    key = [op, autotune]
    for t in tensors:
        key += (t.shape, t.stride(), t.dtype, t.get_device(), t.data_ptr() & 15)
    return tuple(key) + tuple(extra)


def remember(table: dict, key: tuple, call: "FastCall") -> None:
    """``table[key] = call``, the table emptied first when it holds ``FAST_LIMIT`` calls."""
    if len(table) >= FAST_LIMIT:
        table.clear()
    table[key] = call


class FastCall:
    """A GPU call of one signature after its first call: the call site prepared with every parameter packed, and
    ``slots``: (kernel parameter, index of the address it takes). ``fast(addresses, out)``: ``addresses`` are the
    op's tensor arguments' ``data_ptr()`` in the op's order (``out``'s last when the caller passed one); with
    ``allocate`` (``torch.empty``) C is allocated of the remembered shape, dtype and device and its address appended
    (the kernels write every element of C) → C (else ``out``). The kernel's views of the arguments (a transpose, the
    swap of A and B, C's transposed view, a broadcast bias) all start at the arguments' own addresses — the ops
    remember no call whose views do not — so the addresses are all a repeated call needs.
    Post: the launch's argument block equals the one the checked path would pack for the same tensors."""

    __slots__ = ("allocate", "shape", "dtype", "device", "block", "maps", "pointers", "site")

    def __init__(self, site, slots, allocate, shape, dtype, device):
        self.site, self.allocate = site, allocate
        self.shape, self.dtype, self.device = tuple(shape), dtype, device
        self.block = site.block_launch
        self.maps, self.pointers = [], []
        for name, source in slots:
            kind, offset = site.tensor_slot(name)
            if kind == "tmap":
                self.maps.append((source, offset, name, {}))
            else:
                self.pointers.append((source, offset // 8))

    def __call__(self, addresses, out=None):
        if self.allocate is None:
            c = out
        else:
            c = self.allocate(self.shape, dtype=self.dtype, device=self.device)
            # torch's allocator hands out blocks aligned far beyond the 16 bytes the site's C was specialized for
            addresses = (*addresses, c.data_ptr())
        block = self.block
        data = block.bytes
        for source, offset, name, maps in self.maps:
            ptr = addresses[source]
            blob = maps.get(ptr)
            if blob is None:
                if len(maps) >= MAPS_PER_CALL:
                    maps.clear()
                blob = maps[ptr] = self.site.tensor_map(name, ptr)
            data[offset:offset + 128] = blob
        u64 = block.u64
        for source, slot in self.pointers:
            u64[slot] = addresses[source]
        err = block.cu_launch(block.cfg, block.handle, block.address, 0)[0]
        if err:
            block.failed(err)
        return c
