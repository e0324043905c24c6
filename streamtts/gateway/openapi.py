"""The OpenAPI 3.0 document, hand-written (Starlette has no model-driven generator), with the
deployment's limits and voices filled in so clients and fuzzers see the real constraints."""

from __future__ import annotations

from typing import Any

from streamtts.gateway.settings import GatewaySettings
from streamtts.gateway.voices import OPENAI_VOICES
from streamtts.schemas.names import AUDIO_FORMATS, WAV_CODECS
from streamtts.schemas.request import LANGUAGES


def _error(description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
    }


AUDIO_CONTENT = {
    "audio/mpeg": {"schema": {"type": "string", "format": "binary"}},
    "audio/ogg": {"schema": {"type": "string", "format": "binary"}},
    "audio/wav": {"schema": {"type": "string", "format": "binary"}},
    "audio/flac": {"schema": {"type": "string", "format": "binary"}},
    "audio/L16": {"schema": {"type": "string", "format": "binary"}},
    "audio/basic": {"schema": {"type": "string", "format": "binary"}},
    "audio/x-alaw-basic": {"schema": {"type": "string", "format": "binary"}},
}
LOOKUP_ERRORS = {
    "429": _error("Too many lookups of requests this gateway does not hold (see Retry-After)"),
    "503": _error("The results history is being searched; retry shortly"),
}
AUTH_ERRORS = {
    "401": _error("Missing or invalid API key (unauthorized), or one past its not_after (key_expired)"),
    "403": _error(
        "The client address is outside the key's or tenant's allowlist (denied_address); "
        "POST /v1/speech also: acting for another tenant or choosing a reply topic (forbidden)"
    ),
}
GONE = {
    "410": _error(
        "The stored audio is gone: past the result's expires_at (expired: the tenant's retention) "
        "or deleted from object storage (gone)"
    )
}
COMMON_ERRORS = {
    "400": _error("Invalid request"),
    **AUTH_ERRORS,
    "413": _error("Body or text too large"),
    "429": _error("Tenant rate limit exceeded (see Retry-After)"),
    "503": _error("Kafka unavailable"),
}
WAIT = {
    "name": "wait",
    "in": "query",
    "description": "long poll: seconds to wait for the request to finish",
    "schema": {"type": "number", "minimum": 0, "maximum": 30},
}
REQUEST_ID = {
    "name": "request_id",
    "in": "path",
    "required": True,
    "schema": {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"},
}


def openapi_document(settings: GatewaySettings, voices: list[str]) -> dict[str, Any]:
    # Enumerated so generated requests are valid; Kokoro blends ("jm_kumo:0.7+jf_alpha:0.3")
    # are accepted too, beyond what the enum can say.
    voice_schema = {
        "type": "string",
        "enum": ["auto", *voices],
        "example": "en_joe",
        "description": "A voice id (GET /v1/voices), 'auto', or a Kokoro blend 'a:0.7+b:0.3'",
    }
    text = {"type": "string", "minLength": 1, "maxLength": settings.max_text_chars}
    return {
        "openapi": "3.0.3",
        "info": {
            "title": "streamtts gateway",
            "version": "1.0.0",
            "description": "HTTP/WebSocket edge of the streamtts Kafka pipeline (WebSocket: /v1/stream).",
        },
        "servers": [{"url": "/"}],
        "security": [{"bearer": []}, {"apiKey": []}],
        "components": {
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer"},
                "apiKey": {"type": "apiKey", "in": "header", "name": "X-API-Key"},
            },
            "schemas": {
                "Error": {
                    "type": "object",
                    "required": ["error"],
                    "properties": {
                        "error": {
                            "type": "object",
                            "required": ["code", "message"],
                            "properties": {"code": {"type": "string"}, "message": {"type": "string"}},
                        }
                    },
                },
                "SpeechRequest": {
                    "type": "object",
                    "additionalProperties": False,
                    "required": ["text"],
                    "properties": {
                        "text": text,
                        "voice": voice_schema,
                        "language": {"type": "string", "enum": list(LANGUAGES)},
                        "format": {"type": "string", "enum": list(AUDIO_FORMATS)},
                        "wav_codec": {
                            "type": "string",
                            "enum": list(WAV_CODECS),
                            "description": "what a wav file holds: 16-bit PCM or G.711 (wav only)",
                        },
                        "sample_rate": {"type": "integer", "minimum": 8000, "maximum": 48000},
                        "speed": {"type": "number", "minimum": 0.5, "maximum": 2.0},
                        "cache": {"type": "boolean", "description": "use the render cache (default true)"},
                        "timestamps": {
                            "type": "boolean",
                            "description": "word timestamps on every chunk; captions at .../captions",
                        },
                        "text_type": {
                            "type": "string",
                            "enum": ["text", "ssml"],
                            "description": "ssml: text is an SSML document (malformed: status failed)",
                        },
                        "delivery": {
                            "type": "object",
                            "additionalProperties": False,
                            "properties": {"storage": {"type": "boolean"}, "presign": {"type": "boolean"}},
                        },
                        "metadata": {
                            "type": "object",
                            "maxProperties": 16,
                            "additionalProperties": {"type": "string"},
                        },
                    },
                },
                "Accepted": {
                    "type": "object",
                    "required": ["id", "status", "status_url", "audio_url"],
                    "properties": {
                        "id": {"type": "string"},
                        "status": {"type": "string"},
                        "status_url": {"type": "string"},
                        "audio_url": {"type": "string"},
                    },
                },
                "Status": {
                    "type": "object",
                    "required": ["id", "status", "format", "degradations", "audio_url"],
                    "properties": {
                        "id": {"type": "string"},
                        "tenant": {"type": "string"},
                        "status": {
                            "type": "string",
                            "enum": ["queued", "streaming", "completed", "failed", "cancelled", "cancelling"],
                        },
                        "format": {"type": "string", "enum": list(AUDIO_FORMATS)},
                        "chunks": {"type": "integer"},
                        "duration_ms": {"type": "number"},
                        "time_to_first_audio_ms": {"type": "number", "nullable": True},
                        "degradations": {"type": "array", "items": {"type": "object"}},
                        "error": {"type": "string", "nullable": True},
                        "audio_url": {"type": "string"},
                        "captions_url": {"type": "string", "nullable": True},
                        "spoken_ms": {"type": "number", "nullable": True},
                        "words_spoken": {"type": "array", "nullable": True, "items": {"type": "object"}},
                        "cancelled": {"type": "boolean"},
                        "expires_at": {
                            "type": "string",
                            "format": "date-time",
                            "nullable": True,
                            "description": "when retention lets storage delete the files (410 after)",
                        },
                        "storage": {
                            "type": "object",
                            "nullable": True,
                            "properties": {
                                "bucket": {"type": "string"},
                                "key": {"type": "string"},
                                "size": {"type": "integer"},
                                "content_type": {"type": "string"},
                                "url": {"type": "string", "nullable": True},
                            },
                        },
                    },
                },
                "OpenAISpeechRequest": {
                    "type": "object",
                    "required": ["input", "voice"],
                    "properties": {
                        "model": {"type": "string", "example": "tts-1"},
                        "input": text,
                        "voice": {
                            **voice_schema,
                            "enum": [*OPENAI_VOICES, "auto", *voices],
                            "description": "OpenAI names map to ours: "
                            + ", ".join(f"{k}→{v}" for k, v in OPENAI_VOICES.items()),
                        },
                        "response_format": {"type": "string", "enum": ["mp3", "opus", "wav", "flac", "pcm"]},
                        "speed": {
                            "type": "number",
                            "minimum": 0.25,
                            "maximum": 4.0,
                            "description": "clamped to 0.5–2.0",
                        },
                        "instructions": {"type": "string"},
                    },
                },
            },
        },
        "paths": {
            "/v1/speech": {
                "post": {
                    "operationId": "submitSpeech",
                    "summary": "Queue a request; poll its status or stream its audio",
                    "requestBody": {
                        "required": True,
                        "content": {
                            "application/json": {"schema": {"$ref": "#/components/schemas/SpeechRequest"}}
                        },
                    },
                    "responses": {
                        "202": {
                            "description": "Queued",
                            "content": {
                                "application/json": {"schema": {"$ref": "#/components/schemas/Accepted"}}
                            },
                        },
                        "409": _error("The request id is in use"),
                        **COMMON_ERRORS,
                    },
                }
            },
            "/v1/speech/{request_id}": {
                "get": {
                    "operationId": "getSpeechStatus",
                    "parameters": [
                        REQUEST_ID,
                        WAIT,
                    ],
                    "responses": {
                        "200": {
                            "description": "Status",
                            "content": {
                                "application/json": {"schema": {"$ref": "#/components/schemas/Status"}}
                            },
                        },
                        **AUTH_ERRORS,
                        "400": _error("Invalid wait"),
                        "404": _error("Unknown request (or another tenant's)"),
                        **LOOKUP_ERRORS,
                    },
                },
                "delete": {
                    "operationId": "cancelSpeech",
                    "summary": "Barge-in: stop a request; its result says what was spoken",
                    "parameters": [
                        REQUEST_ID,
                        {
                            "name": "played_ms",
                            "in": "query",
                            "description": "how much of the audio the client had played",
                            "schema": {"type": "number", "minimum": 0},
                        },
                        {
                            "name": "wait",
                            "in": "query",
                            "description": "seconds to wait for the request to stop",
                            "schema": {"type": "number", "minimum": 0, "maximum": 30},
                        },
                    ],
                    "responses": {
                        "200": {
                            "description": "Already finished (cancelled: false), or stopped within wait",
                            "content": {
                                "application/json": {"schema": {"$ref": "#/components/schemas/Status"}}
                            },
                        },
                        "202": {
                            "description": "Cancelling",
                            "content": {
                                "application/json": {"schema": {"$ref": "#/components/schemas/Status"}}
                            },
                        },
                        "400": _error("Invalid played_ms or wait"),
                        **AUTH_ERRORS,
                        "404": _error("Unknown request (or another tenant's)"),
                        **LOOKUP_ERRORS,
                    },
                },
            },
            "/v1/speech/{request_id}/audio": {
                "get": {
                    "operationId": "getSpeechAudio",
                    "summary": "Streams (chunked) while in flight; the whole file once complete",
                    "parameters": [
                        REQUEST_ID,
                        {
                            "name": "frame_ms",
                            "in": "query",
                            "description": "telephony frames of exactly this length (pcm, mulaw, alaw)",
                            "schema": {"type": "integer", "enum": [10, 20, 30, 40, 60, 80, 100]},
                        },
                        {
                            "name": "pace",
                            "in": "query",
                            "description": "with frame_ms: fast (as made) or realtime (one per frame_ms)",
                            "schema": {"type": "string", "enum": ["fast", "realtime"]},
                        },
                    ],
                    "responses": {
                        "200": {"description": "Audio", "content": AUDIO_CONTENT},
                        "400": _error("Invalid frame_ms or pace, or a format that cannot be framed"),
                        **AUTH_ERRORS,
                        "404": _error("Unknown request (or another tenant's)"),
                        "409": _error("The request failed"),
                        **GONE,
                        "502": _error("Object storage unavailable"),
                        "504": _error("No audio in time"),
                        **LOOKUP_ERRORS,
                    },
                }
            },
            "/v1/speech/{request_id}/captions": {
                "get": {
                    "operationId": "getSpeechCaptions",
                    "summary": "Word-timed captions of a request made with timestamps",
                    "parameters": [
                        REQUEST_ID,
                        {
                            "name": "format",
                            "in": "query",
                            "description": "vtt (WebVTT, default), srt, or json (the word list)",
                            "schema": {"type": "string", "enum": ["vtt", "srt", "json"]},
                        },
                        WAIT,
                    ],
                    "responses": {
                        "200": {
                            "description": "Captions",
                            "content": {
                                "text/vtt": {"schema": {"type": "string"}},
                                "application/x-subrip": {"schema": {"type": "string"}},
                                "application/json": {
                                    "schema": {"type": "array", "items": {"type": "object"}}
                                },
                            },
                        },
                        "400": _error("Invalid format or wait"),
                        **AUTH_ERRORS,
                        "404": _error("Unknown request, or made without timestamps"),
                        "409": _error("The request failed or is still in progress"),
                        **GONE,
                        "502": _error("Object storage unavailable"),
                        **LOOKUP_ERRORS,
                    },
                }
            },
            "/v1/audio/speech": {
                "post": {
                    "operationId": "createSpeech",
                    "summary": "OpenAI-compatible speech endpoint; streams the audio",
                    "requestBody": {
                        "required": True,
                        "content": {
                            "application/json": {
                                "schema": {"$ref": "#/components/schemas/OpenAISpeechRequest"}
                            }
                        },
                    },
                    "responses": {
                        "200": {"description": "Audio", "content": AUDIO_CONTENT},
                        "409": _error("The request failed in the pipeline"),
                        "504": _error("No audio in time"),
                        **COMMON_ERRORS,
                    },
                }
            },
            "/v1/voices": {
                "get": {
                    "operationId": "listVoices",
                    "security": [],
                    "responses": {
                        "200": {
                            "description": "Voices",
                            "content": {"application/json": {"schema": {"type": "object"}}},
                        }
                    },
                }
            },
            "/v1/pipeline": {
                "get": {
                    "operationId": "pipelineSummary",
                    "security": [],
                    "responses": {
                        "200": {
                            "description": "Gateway and worker metrics summary",
                            "content": {"application/json": {"schema": {"type": "object"}}},
                        }
                    },
                }
            },
            "/healthz": {
                "get": {
                    "operationId": "healthz",
                    "security": [],
                    "responses": {
                        "200": {
                            "description": "Alive",
                            "content": {"application/json": {"schema": {"type": "object"}}},
                        }
                    },
                }
            },
            "/readyz": {
                "get": {
                    "operationId": "readyz",
                    "security": [],
                    "responses": {
                        "200": {
                            "description": "Ready",
                            "content": {"application/json": {"schema": {"type": "object"}}},
                        },
                        "503": {
                            "description": "Not ready",
                            "content": {"application/json": {"schema": {"type": "object"}}},
                        },
                    },
                }
            },
            "/metrics": {
                "get": {
                    "operationId": "metrics",
                    "security": [],
                    "responses": {
                        "200": {
                            "description": "Prometheus text",
                            "content": {"text/plain": {"schema": {"type": "string"}}},
                        }
                    },
                }
            },
        },
    }
