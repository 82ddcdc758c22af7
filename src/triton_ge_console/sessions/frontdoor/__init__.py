"""The OpenAI-compatible front door: `/v1/models`, `/v1/completions`, `/v1/chat/completions` over a
session's generate models, streamed through Triton's gRPC stream."""
