"""Control messages on `tts.control`: the cancel watch every stage asks (`cancel_watch`)."""
