"""What a model's own files say, read alike by the repository (spec, rules, build) and by the glue serving
it: its inputs and outputs (`onnx_io`, as `tensors.TensorSpec`) and its external weight files
(`external_data`). A leaf: it imports nothing else of the package."""
