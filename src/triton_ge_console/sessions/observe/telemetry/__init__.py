"""NPU telemetry: npu-smi, an npu-exporter and the GE glue's metrics, merged per device."""
