"""What a model's own files say, read alike by the repository (spec, rules, build) and by the glue serving
it: its inputs and outputs (`onnx_io`, as `tensors.TensorSpec`), its external weight files
(`external_data`), and the SoC an OM was built for, as ATC wrote it into the OM (`om_file`). A leaf: it
imports nothing else of the package but `errors`."""
