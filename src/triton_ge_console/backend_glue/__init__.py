"""The GE backend glue: a Triton Python-based backend over AscendCL, with ONNX Runtime CPU emulation."""
