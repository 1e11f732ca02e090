"""Kernels shared by tests/ptxgen/test_lower.py (CPU: lower, assemble) and tests/ptxgen/test_lower_gpu.py (GPU vs interpreter).

ALLOPS uses every op of the language at least once (every arith op, every gpu index, scf.for with two carried
fragments and unroll, scf.if with a result, gtensor.dim, gmem.tile/load (with `other`)/store on 1-D and 2-D
tensors of f32, f16 and i32, every frag op, frag.reduce add/max/min). Its values stay where the GPU's and the
interpreter's arithmetic agree to f32 rounding (no division by zero, no out-of-range float→int, shifts < 32).
"""

ALLOPS = """\
kernel @allops(%x: gtensor<f32, 2>, %y: gtensor<f32, 2>, %ix: gtensor<i32, 1>, %h: gtensor<f16, 1>, %m: i32, %s: f32) {grid = (cdiv(%m, 2), 1, 1), block = (64, 1, 1)} {
  %t = gpu.thread_id {dim = x} : i32
  %bid = gpu.block_id {dim = x} : i32
  %lane = gpu.lane_id : i32
  %warp = gpu.warp_id : i32
  %wg = gpu.warpgroup_id : i32
  %bd = gpu.block_dim {dim = x} : i32
  %gd = gpu.grid_dim {dim = x} : i32
  %c0 = arith.const {value = 0} : i32
  %c2 = arith.const {value = 2} : i32
  %c3 = arith.const {value = 3} : i32
  %c7 = arith.const {value = 7} : i32
  %c16 = arith.const {value = 16} : i32
  %c64 = arith.const {value = 64} : i32
  %c128 = arith.const {value = 128} : i32
  %row0 = arith.mul %bid, %c2 : i32
  %n = gtensor.dim %x {mode = 1} : i32
  %fz = arith.const {value = 0.0} : f32
  %init = frag.splat %fz : frag<f32>[2]
  %sum, %big = scf.for %c0, %n, %c64, %init, %init {unroll = 2} : frag<f32>[2], frag<f32>[2] (%col: i32, %acc: frag<f32>[2], %mx: frag<f32>[2]) {
    %tile = gmem.tile %x, %row0, %col {shape = [(2,64)]} : gview<f32>[(2,64)]
    %v = gmem.load %tile, %t {tv = [((32,2),2):((4,1),2)], other = 0.5} : frag<f32>[2]
    %a1 = frag.sin %v : frag<f32>[2]
    %a2 = frag.cos %v : frag<f32>[2]
    %a3 = frag.fma %a1, %a1, %a2 : frag<f32>[2]
    %e = frag.exp %v : frag<f32>[2]
    %l = frag.log %e : frag<f32>[2]
    %ab = frag.abs %v : frag<f32>[2]
    %sq = frag.sqrt %ab : frag<f32>[2]
    %rs = frag.rsqrt %e : frag<f32>[2]
    %e2 = frag.exp2 %v : frag<f32>[2]
    %d = frag.div %e2, %e : frag<f32>[2]
    %mn = frag.min %d, %rs : frag<f32>[2]
    %ng = frag.neg %mn : frag<f32>[2]
    %sb = frag.sub %l, %ng : frag<f32>[2]
    %ad = frag.add %sb, %sq : frag<f32>[2]
    %ml = frag.mul %ad, %s : frag<f32>[2]
    %next = frag.add %acc, %ml : frag<f32>[2]
    %mx2 = frag.max %mx, %a3 : frag<f32>[2]
    scf.yield %next, %mx2
  }
  %rsum = frag.reduce %sum, %t {tv = [((32,2),2):((4,1),2)], tile = [(2,64)], mode = 1, kind = add} : frag<f32>[2]
  %rmax = frag.reduce %big, %t {tv = [((32,2),2):((4,1),2)], tile = [(2,64)], mode = 1, kind = max} : frag<f32>[2]
  %rmin = frag.reduce %sum, %t {tv = [((32,2),2):((4,1),2)], tile = [(2,64)], mode = 1, kind = min} : frag<f32>[2]
  %o1 = frag.add %rsum, %rmax : frag<f32>[2]
  %o2 = frag.sub %o1, %rmin : frag<f32>[2]
  %p = arith.cmp %lane, %c16 {pred = lt} : i1
  %sel = scf.if %p : f32 {
    %q = arith.add %s, %s : f32
    scf.yield %q
  } {
    %q2 = arith.mul %s, %s : f32
    scf.yield %q2
  }
  %o3 = frag.add %o2, %sel : frag<f32>[2]
  %ytile = gmem.tile %y, %row0, %c0 {shape = [(2,64)]} : gview<f32>[(2,64)]
  gmem.store %ytile, %t, %o3 {tv = [((32,2),2):((4,1),2)]}
  %hf = frag.cast %o3 : frag<f16>[2]
  %hbase = arith.mul %bid, %c128 : i32
  %htile = gmem.tile %h, %hbase {shape = [128]} : gview<f16>[128]
  gmem.store %htile, %t, %hf {tv = [(64,2):(2,1)]}
  %gt = arith.mul %bid, %bd : i32
  %gid = arith.add %gt, %t : i32
  %i1 = arith.div %gid, %c7 : i32
  %i2 = arith.rem %gid, %c7 : i32
  %i3 = arith.cdiv %gid, %c3 : i32
  %i4 = arith.min %i1, %i2 : i32
  %i5 = arith.max %i3, %warp : i32
  %i6 = arith.and %gid, %c7 : i32
  %i7 = arith.or %i6, %wg : i32
  %i8 = arith.xor %i7, %lane : i32
  %i9 = arith.shl %i8, %c2 : i32
  %i10 = arith.shr %i9, %c2 : i32
  %i11 = arith.sub %i10, %i5 : i32
  %ge = arith.cmp %i11, %c0 {pred = ge} : i1
  %i12 = arith.select %ge, %i11, %i4 : i32
  %f = arith.cast %i12 : f32
  %f2 = arith.mul %f, %s : f32
  %i13 = arith.cast %f2 : i32
  %w = arith.cast %i13 : i64
  %back = arith.cast %w : i32
  %gd2 = arith.add %back, %gd : i32
  %ivals = frag.splat %gd2 : frag<i32>[1]
  %itile = gmem.tile %ix, %gt {shape = [64]} : gview<i32>[64]
  gmem.store %itile, %t, %ivals {tv = [(64,1):(1,1)]}
}
"""


def copy_scale(dtype: str) -> str:
    """z = cast<T>(cast<f32>(x) * cast<f32>(s)) over a 1-D tensor of any length: 128 threads x 8 contiguous
    values per 1024-element tile (16-byte vectors for 2-byte types, 2 x 16 bytes for 4-byte ones)."""
    return f"""\
kernel @copy_scale_{dtype}(%x: gtensor<{dtype}, 1>, %z: gtensor<{dtype}, 1>, %n: i32, %s: {dtype}) {{grid = (cdiv(%n, 1024), 1, 1), block = (128, 1, 1)}} {{
  %b = gpu.block_id {{dim = x}} : i32
  %t = gpu.thread_id {{dim = x}} : i32
  %c = arith.const {{value = 1024}} : i32
  %o = arith.mul %b, %c : i32
  %xv = gmem.tile %x, %o {{shape = [1024]}} : gview<{dtype}>[1024]
  %zv = gmem.tile %z, %o {{shape = [1024]}} : gview<{dtype}>[1024]
  %f = gmem.load %xv, %t {{tv = [(128,8):(8,1)], other = 1}} : frag<{dtype}>[8]
  %g = frag.cast %f : frag<f32>[8]
  %sf = arith.cast %s : f32
  %h = frag.mul %g, %sf : frag<f32>[8]
  %k = frag.cast %h : frag<{dtype}>[8]
  gmem.store %zv, %t, %k {{tv = [(128,8):(8,1)]}}
}}
"""


DTYPES = ("f32", "f16", "bf16", "i32", "u32", "i64", "u64", "e4m3", "e5m2", "i1")


class HostLX:
    """The piece of a lowering context emit_layout and the swizzle helpers use, over a builder of a host-JIT function."""

    def __init__(self, builder):
        from llvmlite import ir

        self.b = builder
        self._ir = ir

    def i32(self, n):
        return self._ir.Constant(self._ir.IntType(32), int(n))
