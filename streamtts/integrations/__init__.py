"""Plugins for the voice-agent frameworks, speaking the gateway's WebSocket protocol:
`streamtts.integrations.livekit` (livekit-agents, extra `livekit`). Each imports its
framework, so import the one you use."""
