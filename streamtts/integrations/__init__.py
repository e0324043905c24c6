"""Plugins for the voice-agent frameworks, speaking the gateway's WebSocket protocol:
`streamtts.integrations.livekit` (livekit-agents, extra `livekit`) and
`streamtts.integrations.pipecat` (pipecat-ai, extra `pipecat`). Each imports its framework,
so import the one you use (docs/integrations.md)."""
