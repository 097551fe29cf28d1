/**
 * Payload size limits per message type (RFC §5.4, message-types.txt size table). The router enforces
 * them per envelope with OVERSIZE_PAYLOAD; the transport limit below is set on the gRPC server so that
 * the largest allowed envelope fits and anything larger is refused before it is read into memory.
 */
export const KIB = 1024;
export const MIB = 1024 * KIB;

export const PAYLOAD_LIMITS: Readonly<Record<string, number>> = {
  CONTROL: 64 * KIB,
  DATA: 16 * MIB,
  ACKNOWLEDGEMENT: 4 * KIB,
  HITL_INVOCATION: 256 * KIB,
  TOOL_CALL: 1 * MIB,
  NOTIFICATION: 32 * KIB,
};

/** Room for the envelope's own fields around the largest payload. */
export const ENVELOPE_OVERHEAD = 64 * KIB;

/** The largest gRPC message the server accepts or sends. */
export const TRANSPORT_MAX_MESSAGE_BYTES = Math.max(...Object.values(PAYLOAD_LIMITS)) + ENVELOPE_OVERHEAD;

/** LoggingService.Ingest: one event's details_json. */
export const MAX_LOG_DETAILS_BYTES = 64 * KIB;

/**
 * The deepest nesting of arrays and objects accepted in any JSON an agent sends (router payloads, HITL
 * invocations, details_json); checked by a linear scan before JSON.parse (src/core/json.ts).
 */
export const MAX_JSON_DEPTH = 64;

/**
 * The router reads a JSON payload's top level (a `"to"`, an ACK, a message to the coordinator) only when the
 * payload has at most this many bytes (the largest limit of any type but DATA); a larger DATA payload carries no
 * routing JSON and is addressed by call metadata `sw4rm-to` (its JSON is still validated, rule 5).
 */
export const ROUTING_JSON_MAX_BYTES = 1 * MIB;
