"""The audit trail on `tts.audit`: the background writer and the reader (`log`)."""
