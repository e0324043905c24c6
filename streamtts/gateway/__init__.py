"""HTTP/WebSocket gateway: a thin edge over the pipeline's Kafka topics (no synthesis here)."""
