"""The OpenAPI 3.0 document. The request bodies are the schemas of the models the routes
validate with, ids and stored files those of the wire contracts, and formats the codec
registry's (Starlette has no model-driven generator, so `openapi_schemas` translates); the
deployment's limits and voices are filled in so clients and fuzzers see the real constraints.
The paths and the gateway's own answers (errors, status) are written here."""

from __future__ import annotations

from typing import Any

from streamtts.audio import formats
from streamtts.gateway.framing import frameable
from streamtts.gateway.openapi_schemas import field_schema, model_schema
from streamtts.gateway.routes_openai import SPEED_MAX, SPEED_MIN, OpenAISpeechBody
from streamtts.gateway.routes_speech import SpeechBody
from streamtts.gateway.settings import GatewaySettings
from streamtts.gateway.voices import OPENAI_VOICES
from streamtts.schemas import CompletionResult, StorageRef, TTSRequest


def _error(description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
    }


def audio_content() -> dict[str, Any]:
    """One binary media type per registered format (parameters such as codecs= dropped)."""
    types = dict.fromkeys(c.content_type.split(";")[0].strip() for c in formats.codecs())
    return {t: {"schema": {"type": "string", "format": "binary"}} for t in types}


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
    "schema": field_schema(TTSRequest, "request_id"),
}
# What GET /v1/speech/{id} shows of the result's StorageRef (`routes_speech.status_body`).
STATUS_STORAGE_FIELDS = ("bucket", "key", "size", "content_type", "url")


def _request_bodies(
    settings: GatewaySettings, voices: list[str], components: dict[str, Any]
) -> dict[str, Any]:
    """SpeechRequest and OpenAISpeechRequest: the routes' body models with the deployment's
    text limit and voices filled in."""
    # Enumerated so generated requests are valid; Kokoro blends ("jm_kumo:0.7+jf_alpha:0.3")
    # are accepted too, beyond what the enum can say.
    voice_schema = {
        "type": "string",
        "enum": ["auto", *voices],
        "example": "en_joe",
        "description": "A voice id (GET /v1/voices), 'auto', or a Kokoro blend 'a:0.7+b:0.3'",
    }
    text = {"type": "string", "minLength": 1, "maxLength": settings.max_text_chars}
    speech = model_schema(SpeechBody, components)
    speech["properties"]["text"] = text
    speech["properties"]["voice"] = {**speech["properties"]["voice"], **voice_schema}
    openai = model_schema(OpenAISpeechBody, components)
    props = openai["properties"]
    props["input"] = text
    props["voice"] = {
        **props["voice"],
        **voice_schema,
        "enum": [*OPENAI_VOICES, "auto", *voices],
        "description": "OpenAI names map to ours: " + ", ".join(f"{k}→{v}" for k, v in OPENAI_VOICES.items()),
    }
    props["response_format"] = {**props["response_format"], "enum": list(formats.openai_formats())}
    props["speed"] = {**props["speed"], "description": f"clamped to {SPEED_MIN:.1f}–{SPEED_MAX:.1f}"}
    return {"SpeechRequest": speech, "OpenAISpeechRequest": openai}


def _stored_file() -> dict[str, Any]:
    """The `storage` of a status: the result contract's StorageRef, the fields shown."""
    props = model_schema(StorageRef, {})["properties"]
    return {
        "type": "object",
        "nullable": True,
        "properties": {name: props[name] for name in STATUS_STORAGE_FIELDS},
    }


def openapi_document(settings: GatewaySettings, voices: list[str]) -> dict[str, Any]:
    components: dict[str, Any] = {}
    bodies = _request_bodies(settings, voices, components)
    audio = audio_content()
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
                "SpeechRequest": bodies["SpeechRequest"],
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
                        "format": field_schema(CompletionResult, "format"),
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
                        "storage": _stored_file(),
                    },
                },
                "OpenAISpeechRequest": bodies["OpenAISpeechRequest"],
                **components,
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
                            "description": "how much of the audio the client had played (finite ms)",
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
                            "description": "telephony frames of exactly this length ("
                            + ", ".join(frameable())
                            + ")",
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
                        "200": {"description": "Audio", "content": audio},
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
                    "summary": "OpenAI-compatible speech endpoint; streams the audio (or, with "
                    "stream_format sse, speech.audio.delta events)",
                    "requestBody": {
                        "required": True,
                        "content": {
                            "application/json": {
                                "schema": {"$ref": "#/components/schemas/OpenAISpeechRequest"}
                            }
                        },
                    },
                    "responses": {
                        "200": {
                            "description": "Audio; with stream_format sse, server-sent events",
                            "content": {
                                **audio,
                                "text/event-stream": {
                                    # One event: its data is a speech.audio.delta or .done (JSON).
                                    "schema": {
                                        "type": "object",
                                        "properties": {"data": {"type": "string"}},
                                        "required": ["data"],
                                    },
                                    "example": 'data: {"type":"speech.audio.delta","audio":"…"}\n\n'
                                    'data: {"type":"speech.audio.done","usage":{…}}\n\n',
                                },
                            },
                        },
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
