"""ptxgen: a Hopper tile IR whose tensors carry layoutc layouts, compiled to PTX and run from Python.

The packages follow the data: ``ir`` (text, builder, ops) → ``verify`` / ``interp`` → ``lower`` (LLVM IR → PTX)
→ ``nvjitlink`` (PTX → cubin, in process) → ``runtime`` (CUDA driver, launch); a module imports only from its left
(``tests/ptxgen/test_import_graph.py`` checks it).
"""
