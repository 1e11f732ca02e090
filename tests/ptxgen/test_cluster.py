"""Clusters in the tile IR: CTAs of a cluster run concurrently in the interpreter; a multicast TMA load writes every
CTA's smem and completes on every CTA's barrier; a cluster pipeline is released by the consumers of all CTAs;
barrier.cluster publishes inits cluster-wide; the mistakes (no barrier.cluster before a multicast, a CTA exiting
while its peer still releases into it, multicast without a cluster) are reported; the persistent GEMM with clusters of
2 and B multicast matches float64; the lowering emits the cluster forms."""
from __future__ import annotations

import pathlib

import ml_dtypes
import numpy as np
import pytest

from ptxgen.interp import InterpreterError, interpret, run_cta
from ptxgen.ir.text import parse_module
from ptxgen.kernels.gemm import GemmConfig, build
from ptxgen.lower import compile_kernel
from ptxgen.verify import VerifyError, verify

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"

# Each CTA of a cluster of 2 loads HALF of a 16 x 32 tile (its rank's 8 rows) and multicasts it into both CTAs; after
# the wait every CTA holds the whole tile and writes it to its own 16 rows of y.
MULTICAST = """kernel @mc(%x: tmap<f32, 2>[(8,32):(32,1)], %y: gtensor<f32, 2>) {grid = (4, 1, 1), block = (128, 1, 1), cluster = (2, 1, 1)} {
  %buf = smem.alloc {align = 128} : smem<f32>[(16,32):(32,1)]
  %pipe = pipeline.alloc {stages = 1, consumers = 4, cluster = 2} : pipeline<1>
  %t = gpu.thread_id {dim = x} : i32
  %rank = gpu.cluster_rank : i32
  %blk = gpu.block_id {dim = x} : i32
  %c0 = arith.const {value = 0} : i32
  %c8 = arith.const {value = 8} : i32
  %c16 = arith.const {value = 16} : i32
  %leader = arith.cmp %t, %c0 {pred = eq} : i1
  scf.if %leader {
    pipeline.init %pipe
  }
  barrier.cluster
  scf.if %leader {
    %s = pipeline.acquire %pipe, %c0 {bytes = 2048} : i32
    %half = smem.tile %buf, %rank {mode = 0, size = 8} : smem<f32>[(8,32):(32,1)]
    %row = arith.mul %rank, %c8 : i32
    tma.load %x, %half, %pipe, %s, %row, %c0 {multicast = true}
  }
  %s2 = pipeline.wait %pipe, %c0 : i32
  %v = smem.load %buf, %t {tv = [(128,4):(4,1)]} : frag<f32>[4]
  %w = arith.mul %blk, %c16 : i32
  %g = gmem.tile %y, %w, %c0 {shape = [(16,32)]} : gview<f32>[(16,32)]
  gmem.store %g, %t, %v {tv = [(128,4):(4,1)]}
  pipeline.release %pipe, %s2
  barrier.cluster
}
"""


def run_multicast(text):
    x = np.random.default_rng().standard_normal((16, 32)).astype(np.float32)
    y = np.full((64, 32), -7.0, np.float32)
    interpret(parse_module(text, file="mc.tile"), {"x": x, "y": y})
    return x, y


def test_multicast_fills_every_cta_of_the_cluster():
    x, y = run_multicast(MULTICAST)
    for b in range(4):
        assert np.array_equal(y[16 * b:16 * b + 16], x), b


def test_multicast_counts_every_ctas_bytes_in_the_expect_tx_rule():
    bad = MULTICAST.replace("{bytes = 2048}", "{bytes = 1024}")
    with pytest.raises(VerifyError) as e:
        verify(parse_module(bad, file="mc.tile"))
    assert "expect_tx of 1024 bytes on %pipe.full[%s] but the tma.loads that complete on it deliver 2048 bytes" in str(
        e.value)


def test_multicast_needs_a_cluster():
    bad = MULTICAST.replace(", cluster = (2, 1, 1)", "").replace(", cluster = 2}", "}")
    with pytest.raises(VerifyError) as e:
        verify(parse_module(bad, file="mc.tile"))
    assert "multicast needs a kernel launched in clusters of 2 or more CTAs" in str(e.value)


def test_a_multicast_before_the_cluster_barrier_is_reported():
    bad = MULTICAST.replace("  barrier.cluster\n  scf.if %leader {\n    %s", "  barrier.cta\n  scf.if %leader {\n    %s", 1)
    with pytest.raises(InterpreterError) as e:
        run_multicast(bad)
    assert "tma.load: multicasts into %pipe.full[0] of CTA rank 1 of the cluster before a barrier.cluster made its init visible" in str(e.value)


def test_exiting_while_the_peer_still_releases_is_reported():
    bad = MULTICAST[:MULTICAST.rindex("  barrier.cluster\n")] + "}\n"
    with pytest.raises(InterpreterError) as e:
        run_multicast(bad)
    # the first access into a peer after the last barrier.cluster (here a multicast) is named
    assert str(e.value).startswith("mc.tile:19:5: tma.load: CTA rank 1 multicasts into the shared memory of CTA rank 0 "
                                   "after the cluster's last barrier.cluster: that CTA may already have exited")


def test_run_cta_refuses_cluster_kernels():
    with pytest.raises(InterpreterError, match="use interpret"):
        run_cta(parse_module(MULTICAST, file="mc.tile"), {"x": np.zeros((16, 32), np.float32),
                                                          "y": np.zeros((64, 32), np.float32)})


def test_cluster_forms_are_lowered():
    ptx = compile_kernel(parse_module(MULTICAST, file="mc.tile")).ptx
    for form in ("barrier.cluster.arrive.release.aligned", "barrier.cluster.wait.acquire.aligned", "%cluster_ctarank",
                 ".multicast::cluster", "mapa.shared::cluster.u32", "mbarrier.arrive.shared::cluster.b64"):
        assert form in ptx, form


def gemm_kernel(dtype: str = "bf16", **fields):
    """The library's persistent GEMM of ``GemmConfig(dtype, **fields)``."""
    return build(GemmConfig(dtype, **fields))


@pytest.mark.parametrize("m, n, k, sms, bn, cluster", [(300, 260, 200, 4, 128, 2), (129, 513, 72, 2, 256, 2),
                                                       (1, 8, 8, 2, 128, 2), (700, 260, 200, 8, 128, 4)])
def test_cluster_gemm_matches_float64(m, n, k, sms, bn, cluster):
    kernel = gemm_kernel("bf16", bn=bn, stages=3, cluster=cluster)
    rng = np.random.default_rng()
    a = rng.standard_normal((m, k)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((n, k)).astype(ml_dtypes.bfloat16)
    c = np.full((m, n), -7.0, dtype=ml_dtypes.bfloat16)
    interpret(kernel, {"a": a, "b": b, "c": c, "m": m, "n": n, "k": k, "sms": sms})
    want = a.astype(np.float64) @ b.astype(np.float64).T
    assert np.linalg.norm(c.astype(np.float64) - want) / np.linalg.norm(want) < 1e-2


@pytest.mark.gpu
def test_gpu_multicast_and_cluster_gemm():
    torch = pytest.importorskip("torch")
    from ptxgen.runtime import gpu_available, jit
    if not gpu_available():
        pytest.skip("needs a CUDA GPU")
    x = np.random.default_rng().standard_normal((16, 32)).astype(np.float32)
    y = np.full((64, 32), -7.0, np.float32)
    jit(parse_module(MULTICAST, file="mc.tile"))(x=x, y=y)
    for blk in range(4):
        assert np.array_equal(y[16 * blk:16 * blk + 16], x), blk
    for m, n, k in ((4096, 4096, 4096), (3001, 2999, 2008)):
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        c = torch.full((m, n), -7.0, device="cuda", dtype=torch.bfloat16)
        sms = torch.cuda.get_device_properties(0).multi_processor_count
        jit(gemm_kernel("bf16", cluster=2))(a=a, b=b, c=c, m=m, n=n, k=k, sms=sms)
        torch.cuda.synchronize()
        want = a.double() @ b.double().T
        assert (torch.linalg.norm(c.double() - want) / torch.linalg.norm(want)).item() < 1e-2


@pytest.mark.gpu
def test_gpu_resident_ctas_are_whole_clusters_and_size_a_persistent_grid():
    """A persistent GEMM in clusters of 4 launched with ``sms = resident_ctas()`` starts every CTA at once (an H100
    fits 30 clusters of 4 of this 1-CTA-per-SM kernel: 120 CTAs, not 132) and is right; without clusters every SM
    holds one."""
    torch = pytest.importorskip("torch")
    from ptxgen.runtime import gpu_available, jit, multiprocessor_count
    if not gpu_available():
        pytest.skip("needs a CUDA GPU")
    m, n, k = 2048, 1536, 1024
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    want = a.double() @ b.double().T
    sms = multiprocessor_count()
    for cluster in (1, 4):
        c = torch.full((m, n), -7.0, device="cuda", dtype=torch.bfloat16)
        kern = jit(gemm_kernel("bf16", cluster=cluster))
        site = kern.prepare(a=a, b=b, c=c, m=m, n=n, k=k, sms=sms)
        ctas = site.compiled.resident_ctas()
        assert 0 < ctas <= sms and ctas % cluster == 0, (cluster, ctas)
        if cluster == 1:
            assert ctas == sms        # 1 CTA per SM: the shared memory of the 4-stage 128 x 256 ring
        kern(a=a, b=b, c=c, m=m, n=n, k=k, sms=ctas)
        torch.cuda.synchronize()
        assert (torch.linalg.norm(c.double() - want) / torch.linalg.norm(want)).item() < 1e-2, cluster
