"""The ``layoutc`` command line: show, check and explain layouts, wgmma descriptors, TMA maps and bank conflicts.

Every command prints a result or exits nonzero with a one-line reason on stderr.
"""
from __future__ import annotations

import argparse
import sys

from .errors import LayoutError

EXAMPLES = """\
examples:
  layoutc show "Sw<3,4,3> o (8,64):(64,1)"
  layoutc show "(4,(2,3)):(2,(1,8))" --svg layout.svg
  layoutc atom K SW128 bf16 --tile 128,64,3
  layoutc show "Sw<3,4,3> o (8,64):(64,1)" --dtype bf16
  layoutc desc "Sw<3,4,3> o (64,16):(64,1)" --dtype bf16 --major K
  layoutc desc "Sw<3,4,3> o ((64,2),(8,2)):((1,512),(64,1024))" --dtype bfloat16_t --major MN --mn 128
  layoutc frag "Sw<3,4,3> o ((8,16),(64,1),(1,4)):((64,512),(1,0),(0,8192))" --dtype bf16 --major K --operand A
  layoutc decode 0x4000004000010040
  layoutc tma --global "(4096,4096):(4096,1)" --box "Sw<3,4,3> o (8,64):(64,1)" --dtype bf16
  layoutc banks --tv "((8,4),8):((1,64),8)" --smem "Sw<3,4,3> o (8,64):(64,1)" --dtype bf16
  layoutc op composition "(12,(4,8)):(59,(13,1))" "<3:4,8:2>"
"""

_MN_HELP = ("rows of the wgmma tile described: 64 for A (the default: CuTe's 64-row warpgroup atom, or the whole "
            "extent below 64 rows), N for a B operand")

ALGEBRA_OPS = (
    "coalesce", "filter", "composition", "complement", "right_inverse", "left_inverse", "logical_divide",
    "zipped_divide", "tiled_divide", "flat_divide", "logical_product", "zipped_product", "tiled_product",
    "flat_product", "blocked_product", "raked_product", "tile_to_shape", "make_layout_like", "nullspace",
    "max_common_vector", "max_common_layout", "upcast", "downcast", "size", "cosize", "rank", "depth",
)


def _parse_layout(text: str):
    from .notation import parse_layout
    return parse_layout(text)


def _parse_ints(text: str) -> tuple:
    try:
        return tuple(int(x, 0) for x in text.replace("(", "").replace(")", "").split(",") if x.strip())
    except ValueError:
        raise LayoutError("cli", (text,), "expected comma-separated integers like 128,64,3") from None


def _index_grid(layout, element=None) -> str:
    """Text grid of a rank-1/2 layout's indices (rows: mode 0, columns: modes 1...).

    With ``element`` the layout is a shared-memory layout: its swizzle acts on byte addresses and the grid shows
    the physical element slot (byte address / element bytes) of each coordinate.
    """
    from .layout import rank, size
    from .int_tuple import product
    from .notation import to_str
    if element is not None:
        from .hopper.dtypes import dtype
        from .hopper.smem import byte_address
        bits = dtype(element).bits

        def value(i):
            return byte_address(layout, element, i) * 8 // bits
    else:
        value = layout
    if rank(layout) == 1:
        rows, cols = 1, size(layout)

        def at(r, c):
            return value(c)
    else:
        rows = product(layout.shape[0])
        cols = size(layout) // rows

        def at(r, c):
            return value(r + rows * c)
    rows_shown, cols_shown = min(rows, 64), min(cols, 32)
    # to_str: a layout of coordinates (basis strides) shows CuTe's (1,3), not Python's (1, 3)
    cells = [[to_str(at(r, c)) for c in range(cols_shown)] for r in range(rows_shown)]
    width = max(len(x) for row in cells for x in row)
    lines = ["     " + " ".join(f"{c:>{width}}" for c in range(cols_shown))]
    for r, row in enumerate(cells):
        lines.append(f"{r:>4} " + " ".join(f"{x:>{width}}" for x in row))
    if rows_shown < rows or cols_shown < cols:
        lines.append(f"(showing {rows_shown} of {rows} rows, {cols_shown} of {cols} columns)")
    return "\n".join(lines)


def cmd_show(args) -> int:
    from . import algebra, layout as layout_mod
    from .notation import to_str
    from .swizzle import ComposedLayout
    obj = _parse_layout(args.layout)
    inner = obj.inner if isinstance(obj, ComposedLayout) else obj
    print(f"layout   {to_str(obj)}")
    if isinstance(obj, ComposedLayout):
        print(f"outer    {to_str(obj.outer)}   offset {obj.offset}")
    print(f"shape    {to_str(inner.shape)}   stride {to_str(inner.stride)}")
    print(f"size     {layout_mod.size(inner)}   cosize {layout_mod.cosize(inner)}   "
          f"rank {layout_mod.rank(inner)}   depth {layout_mod.depth(inner)}")
    print(f"coalesce {to_str(layout_mod.coalesce(obj))}")
    try:
        algebra.complement(inner)
        complementable = True
    except LayoutError:
        complementable = False
    print(f"complementable (injective, strides sorted into a mixed radix) {'yes' if complementable else 'no'}")
    if args.dtype:
        print(f"physical element slots for {args.dtype} (the swizzle acts on byte addresses):")
    elif isinstance(obj, ComposedLayout):
        print("values of the function (the swizzle applied to element offsets); as a shared-memory layout the "
              "swizzle acts on bytes: pass --dtype to see physical slots")
    print(_index_grid(obj, args.dtype))
    if args.svg:
        from .picture import layout_svg
        with open(args.svg, "w") as f:
            f.write(layout_svg(obj))
        print(f"wrote {args.svg}")
    return 0


def cmd_atom(args) -> int:
    from .hopper.descriptor import descriptor_verdict
    from .hopper.gmma import gmma_atom, gmma_smem_layout
    from .layout import coalesce
    from .notation import to_str
    atom = gmma_atom(args.major, args.swizzle, args.dtype)
    print(f"atom       {to_str(atom)}")
    layout = atom
    if args.tile:
        layout = gmma_smem_layout(args.major, args.swizzle, args.dtype, _parse_ints(args.tile))
        print(f"tiled      {to_str(layout)}")
        print(f"coalesced  {to_str(coalesce(layout, (1,) * len(layout.inner)))}  (by mode)")
    base = int(args.base, 0)
    verdict = descriptor_verdict(layout, args.dtype, args.major, base, mn=args.mn)
    if not verdict.ok:
        raise LayoutError("atom", (layout,), f"wgmma cannot consume it: {verdict.reasons[0]}")
    print(f"wgmma tile {verdict.tile}")
    print(f"descriptor {verdict.descriptor}")
    return 0


def cmd_desc(args) -> int:
    from .hopper import descriptor
    layout = _parse_layout(args.layout)
    verdict = descriptor.descriptor_verdict(layout, args.dtype, args.major, int(args.base, 0), mn=args.mn)
    if not verdict.ok:
        raise LayoutError("desc", (layout,), verdict.reasons[0])
    print(verdict.descriptor)
    for note in verdict.notes:
        print(f"note: {note}")
    return 0


def cmd_frag(args) -> int:
    from .hopper.descriptor import descriptor_fragment
    layout = _parse_layout(args.layout)
    frag = descriptor_fragment(layout, args.dtype, args.major, args.operand, n=args.n, base_address=int(args.base, 0))
    print(f"partition  {frag.partition}   (thr_mma.partition_{frag.operand}: (MMA, MMA_MN, MMA_K, ...) in elements)")
    print(frag.print_tensor())
    print(frag.descriptor.cute_str())
    return 0


def cmd_decode(args) -> int:
    from .hopper.descriptor import WgmmaDescriptor
    try:
        value = int(args.hex, 16) if not args.hex.lower().startswith("0x") else int(args.hex, 0)
    except ValueError:
        raise LayoutError("decode", (args.hex,), "expected a hexadecimal 64-bit descriptor") from None
    print(WgmmaDescriptor.decode(value))
    return 0


def cmd_tma(args) -> int:
    from .hopper import tma
    global_layout = _parse_layout(args.global_layout)
    box = _parse_layout(args.box)
    params = tma.make_tma_params(global_layout, args.dtype, box)
    print(f"cuTensorMapEncodeTiled parameters for {args.dtype} {args.global_layout} with smem box {args.box}")
    rows = [
        ("tensorDataType", params.data_type.name), ("tensorRank", params.rank),
        ("globalDim", params.global_dims), ("globalStrides (bytes)", params.global_strides),
        ("boxDim", params.box_dims), ("elementStrides", params.element_strides),
        ("interleave", params.interleave.name), ("swizzle", params.swizzle.name),
        ("l2Promotion", params.l2_promotion.name), ("oobFill", params.oob_fill.name),
        ("expect-tx bytes per box", params.box_bytes), ("smem alignment (bytes)", params.smem_alignment),
    ]
    for name, value in rows:
        print(f"  {name:<24} {value}")
    return 0


def cmd_banks(args) -> int:
    from .hopper.banks import bank_conflicts
    tv = _parse_layout(args.tv)
    smem = _parse_layout(args.smem)
    report = bank_conflicts(tv, smem, args.dtype, access_bytes=args.access_bytes)
    print(report)
    return 0


def cmd_op(args) -> int:
    import layoutc
    from .notation import parse, to_str
    fn = getattr(layoutc, args.name)
    operands = []
    for text in args.operands:
        operands.append(parse(text))
    print(to_str(fn(*operands)))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="layoutc", description="Show, check and explain CuTe layouts and what Hopper needs from them.",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("show", help="print a layout, its properties and its index grid",
                       epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("layout", help='CuTe notation, e.g. "(4,(2,3)):(2,(1,8))" or "Sw<3,4,3> o (8,64):(64,1)"')
    p.add_argument("--svg", metavar="FILE", help="also write an SVG picture")
    p.add_argument("--dtype", help="treat it as a shared-memory layout of this element type (swizzle on bytes)")
    p.set_defaults(run=cmd_show)

    p = sub.add_parser("atom", help="print a GMMA smem atom and its tiling")
    p.add_argument("major", choices=["K", "MN", "k", "mn"])
    p.add_argument("swizzle", help="INTER, SW32, SW64 or SW128")
    p.add_argument("dtype", help="element type, e.g. bf16, f16, e4m3, tf32, or CuTe's bfloat16_t, half_t, ...")
    p.add_argument("--tile", help="tile shape, e.g. 128,64,3")
    p.add_argument("--base", default="0x400", help="smem byte address of the buffer (default 0x400)")
    p.add_argument("--mn", type=int, default=None, help=_MN_HELP)
    p.set_defaults(run=cmd_atom)

    p = sub.add_parser("desc", help="derive the wgmma smem descriptor of a layout")
    p.add_argument("layout")
    p.add_argument("--dtype", required=True)
    p.add_argument("--major", required=True, choices=["K", "MN", "k", "mn"])
    p.add_argument("--base", default="0x400", help="smem byte address of the tile (default 0x400, where dynamic "
                   "shared memory starts on Hopper)")
    p.add_argument("--mn", type=int, default=None, help=_MN_HELP)
    p.set_defaults(run=cmd_desc)

    p = sub.add_parser("frag", help="CuTe's descriptor fragment: make_fragment_A/B(thr_mma.partition_A/B(smem))")
    p.add_argument("layout")
    p.add_argument("--dtype", required=True)
    p.add_argument("--major", required=True, choices=["K", "MN", "k", "mn"])
    p.add_argument("--operand", default="A", choices=["A", "B", "a", "b"])
    p.add_argument("--n", type=int, default=None, help="the wgmma atom's N (default for B: the layout's N extent)")
    p.add_argument("--base", default="0x400", help="smem byte address of the layout (default 0x400)")
    p.set_defaults(run=cmd_frag)

    p = sub.add_parser("decode", help="decode a 64-bit wgmma descriptor")
    p.add_argument("hex")
    p.set_defaults(run=cmd_decode)

    p = sub.add_parser("tma", help="derive cuTensorMapEncodeTiled parameters")
    p.add_argument("--global", dest="global_layout", required=True,
                   help='global tensor layout, strides in elements, e.g. "(4096,4096):(4096,1)"')
    p.add_argument("--box", required=True, help="smem box layout (possibly swizzled)")
    p.add_argument("--dtype", required=True)
    p.set_defaults(run=cmd_tma)

    p = sub.add_parser("banks", help="count shared-memory bank conflicts of a warp access")
    p.add_argument("--tv", required=True, help="thread-value layout (thread, value) -> smem element index")
    p.add_argument("--smem", required=True, help="shared-memory layout")
    p.add_argument("--dtype", required=True)
    p.add_argument("--access-bytes", type=int, default=None)
    p.set_defaults(run=cmd_banks)

    p = sub.add_parser("op", help="apply an algebra operation to layouts/tilers/ints in CuTe notation")
    p.add_argument("name", choices=ALGEBRA_OPS)
    p.add_argument("operands", nargs="+")
    p.set_defaults(run=cmd_op)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except LayoutError as e:
        print(f"layoutc {args.command}: {e}".splitlines()[0], file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
