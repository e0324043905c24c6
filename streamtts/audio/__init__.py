"""Pure audio code (the bottom layer): PCM helpers, stateless effects and the codecs.

Nothing here knows about Kafka, settings or requests: samples in, samples or bytes out.
"""
