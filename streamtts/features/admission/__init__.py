"""Admission: refuse a request whose deadline the synthesize workers cannot meet, at once and
clearly (`overloaded`), instead of letting it queue until it is useless.

- `reporter`: a synthesize worker publishes its `LoadReport` on `tts.load` every second;
- `view`: the reports as a client sees them (followed live, stale ones dropped);
- `policy`: the pure decision — which worker a request's first span will queue on (Kafka's
  partitioner over its key), how long it waits there, how long it takes.
"""
