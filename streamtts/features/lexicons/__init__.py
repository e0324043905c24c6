"""Tenant lexicons on `tts.lexicons`: the live book every segment stage reads (`book`), the
writer (`store`) and the CSV/YAML/JSON files the CLI uploads (`files`). Applying a lexicon to
text is segment logic and stays there (`processors.segment.lexicon`)."""
