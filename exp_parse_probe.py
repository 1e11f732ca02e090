import os, sys, time, tempfile, glob
t0 = time.perf_counter()
import lark
t1 = time.perf_counter()
print("lark import", round((t1 - t0) * 1e3, 1), "ms", lark.__file__, "tmp", tempfile.gettempdir(),
      "DONTWRITE", os.environ.get("PYTHONDONTWRITEBYTECODE"))
print("caches", [(p, os.path.getsize(p)) for p in glob.glob(os.path.join(tempfile.gettempdir(), ".lark_cache*"))])
from ptxgen.ir import text
s = time.perf_counter(); text._parser(); e = time.perf_counter()
print("tile grammar", round((e - s) * 1e3, 1), "ms")
src = open("examples/gemm_hopper.tile").read()
s = time.perf_counter(); text.parse_module(src, file="x"); e = time.perf_counter()
print("first parse_module", round((e - s) * 1e3, 1), "ms")
s = time.perf_counter(); text.parse_module(src, file="x"); e = time.perf_counter()
print("second parse_module", round((e - s) * 1e3, 1), "ms")
import cProfile, pstats
pr = cProfile.Profile(); pr.enable(); text.parse_module(src, file="x"); pr.disable()
pstats.Stats(pr).sort_stats("tottime").print_stats(8)
