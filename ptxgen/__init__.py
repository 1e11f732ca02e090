"""ptxgen: a Hopper tile IR whose tensors carry layoutc layouts, compiled to PTX and run from Python.

The packages follow the data: ``ir`` (text, builder, ops) → ``verify`` → ``interp`` (the CPU interpreter) and,
beside it, ``lower`` (LLVM IR → PTX → cubin) → ``runtime`` (CUDA driver, launch); each imports only packages before
it. ``nvjitlink`` (PTX → cubin, in process) imports nothing of ptxgen and serves both the lowering, which ends with it,
and the runtime. ``tests/test_import_graph.py`` checks the order.
"""
