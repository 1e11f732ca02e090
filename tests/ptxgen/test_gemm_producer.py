"""The producer's options. ``GemmConfig.prefetch_maps``: the TMA descriptors fetched before the barriers are set
up (a hint: results unchanged). ``GemmConfig.load_batch``: the producer holds that many stages, then issues their TMA loads back to back. The
result must not depend on it: ragged k ranges (stream-K pieces, K not a multiple of the batch) end in single loads."""
import numpy as np
import pytest

from ptxgen.ir.text import print_module
from ptxgen.kernels.gemm import GemmConfig, build
from ptxgen.kernels.gemm import run as gemm_run

from test_kernels_gemm import rel_err, run_op


@pytest.mark.parametrize("config, shape, sms", [
    # swapped decode, stream-K on every SM: pieces of 3-4 k-tiles of 16, batches of 4 and a ragged rest
    (GemmConfig(bn=16, stages=8, load_batch=4, streamk=True, streamk_every_sm=True, streamk_min_saving=1,
                swap_ab=True), (13, 130, 1000), 5),
    # swapped data-parallel, K = 9 k-tiles: two batches of 4 and one single load per tile
    (GemmConfig(bn=64, stages=8, load_batch=4, swap_ab=True), (45, 300, 520), 3),
    # unswapped, overlapped TMA store, several tiles per CTA: the counter runs across tiles in batches of 3
    (GemmConfig(bn=128, stages=6, load_batch=3, epilogue="tma", overlap=1), (150, 200, 136 * 3), 2),
    # clusters of 2 sharing B by multicast
    (GemmConfig(bn=192, cluster=2, load_batch=2, epilogue="rows", epilogue_split=3), (300, 389, 520), 4),
    (GemmConfig(bn=128, stages=6, epilogue="tma", overlap=1, prefetch_maps=True), (150, 200, 136), 2),
], ids=lambda v: v.name if isinstance(v, GemmConfig) else None)
def test_batched_loads_match_float64(config, shape, sms):
    rng = np.random.default_rng()
    got, want = run_op(config.validate(), *shape, rng, sm_count=sms)
    assert rel_err(got, want) < 1e-2


def test_batch_reads_back_and_is_bounded_by_the_stages():
    config = GemmConfig(bn=16, stages=8, load_batch=4, streamk=True, streamk_every_sm=True, swap_ab=True)
    assert config.name == "h128x16s8q4skax"
    assert GemmConfig.from_name(config.name) == config
    with pytest.raises(ValueError, match=r"load_batch = 9: the producer issues the loads of 1 to stages = 8 k-tiles"):
        config.replace(load_batch=9).validate()


def test_prefetch_maps_prefetch_every_map_first():
    config = GemmConfig(bn=128, stages=6, epilogue="tma", overlap=1, prefetch_maps=True)
    assert config.name == "h128x128s6to1d" and GemmConfig.from_name(config.name) == config
    text = print_module(build(config))
    assert [line.strip() for line in text.splitlines() if "prefetch_map" in line] == [
        "tma.prefetch_map %a", "tma.prefetch_map %b", "tma.prefetch_map %c"]
    assert text.index("tma.prefetch_map %c") < text.index("pipeline.init")
    direct = print_module(build(config.replace(epilogue="direct", overlap=0)))
    assert "tma.prefetch_map %c" not in direct and "tma.prefetch_map %b" in direct


def test_batched_producer_keeps_wgmma_pipelined():
    """The batched producer's kernel compiles with no wgmma serialized by ptxas (C7514) and holds its batch of
    stages before the first load: `batch` acquires precede the batch's TMA loads in the loop body."""
    from ptxgen.lower import Specialization, TensorSpec, compile_kernel

    config = GemmConfig(bn=16, stages=8, load_batch=4, streamk=True, streamk_every_sm=True, streamk_min_saving=1,
                        swap_ab=True)
    text = print_module(build(config))
    body = text[text.index("%s_b0 = pipeline.acquire"):]
    assert body.index("%s_b3 = pipeline.acquire") < body.index("tma.load") < body.index("%s_b3, %m0")
    module = gemm_run.kernel_module(config)
    specs = dict(c=TensorSpec(0, True, 16), work=TensorSpec(1, True, 16), flags=TensorSpec(0, True, 16))
    compiled = compile_kernel(module.kernels[0], Specialization.of(**specs))
    assert "C7514" not in compiled.info_log


GPU_BATCHED = ["h128x16s8q2ska1x", "h128x16s8q4ska1x", "h128x16s12q6ska1x", "h128x32s8q4ska1x", "h128x64s8q4x",
               "h128x64s8q2ska5x", "h128x128s6to1q2", "h128x128s6to1d", "h128x16s8dska1x"]


@pytest.mark.gpu
@pytest.mark.parametrize("name", GPU_BATCHED)
def test_gpu_batched_loads_match_float64(name):
    """The batched producer on the GPU, on a decode-sized problem for the swapped configs (stream-K pieces of
    dozens of k-tiles over every SM) and a one-wave problem for the 128 × 128 tile."""
    from test_kernels_gemm import torch_or_skip, torch_rel_err
    from ptxgen.kernels import matmul

    torch = torch_or_skip()
    config = GemmConfig.from_name(name)
    m, n, k = {16: (16, 4096, 14336), 32: (32, 7168, 8192), 64: (64, 8192, 4096)}.get(config.bn, (512, 4096, 4096))
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        c = matmul(a, w.T, config=config)
        torch.cuda.synchronize()
        assert torch_rel_err(torch, c, a.double() @ w.double().T) < 1e-2
