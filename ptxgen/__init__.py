"""ptxgen: a Hopper tile IR whose tensors carry layoutc layouts, compiled to PTX and run from Python.

``ptxgen.runtime`` holds the in-process PTX→cubin assembler (nvJitLink) and the CUDA driver layer.
"""
