"""The runtime layer: settings, Kafka client factories (aiokafka and faust), topic names, the
stage seam and dead-letter path, JSON logs, telemetry, probes. Above contracts and audio, below
the features, processors, producers and sinks; it never imports them."""
