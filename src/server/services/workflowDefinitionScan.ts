import { WORKFLOW_LIMITS } from '../../core/workflow/validate';

/** The most bytes of a CreateWorkflowRequest (its definition, encoded): refused before it is decoded. */
export const MAX_DEFINITION_BYTES = 1024 * 1024;

/** What a CreateWorkflowRequest refused before decoding carries instead of its fields. */
export const REFUSED_BEFORE_DECODE = Symbol('refusedBeforeDecode');
export interface RefusedRequest {
  readonly [REFUSED_BEFORE_DECODE]: string;
}

export function refusedBeforeDecode(request: unknown): string | undefined {
  return request !== null && typeof request === 'object' && REFUSED_BEFORE_DECODE in request
    ? (request as RefusedRequest)[REFUSED_BEFORE_DECODE]
    : undefined;
}

/**
 * Why an encoded CreateWorkflowRequest is refused before protobuf decodes it, or undefined: more than
 * MAX_DEFINITION_BYTES (`OVERSIZE_PAYLOAD: …`), or (one pass over the wire format, reading only tags and lengths, O(bytes),
 * nothing allocated) more nodes, dependencies of a node, dependencies in all or map entries in all than WORKFLOW_LIMITS
 * (`VALIDATION_ERROR: limit_exceeded: …`). A message the scan cannot read is left to the decoder.
 *
 * workflow.proto: CreateWorkflowRequest { WorkflowDefinition definition = 1 }; WorkflowDefinition { nodes = 2 (map entry:
 * key 1, value 2 = WorkflowNode), metadata = 4 (map) }; WorkflowNode { dependencies = 3, input_mapping = 5,
 * output_mapping = 6, metadata = 7 }.
 */
export function definitionRefusal(bytes: Uint8Array): string | undefined {
  if (bytes.length > MAX_DEFINITION_BYTES) {
    return `OVERSIZE_PAYLOAD: a workflow definition is at most ${MAX_DEFINITION_BYTES} bytes encoded (this one is ${bytes.length})`;
  }
  const counts = { nodes: 0, dependencies: 0, mapEntries: 0, mostDependencies: 0 };
  const ok = fields(bytes, 0, bytes.length, (field, start, end) => {
    if (field !== 1) return true;
    return fields(bytes, start, end, (f, s, e) => {
      if (f === 4) counts.mapEntries++;
      if (f !== 2) return true;
      counts.nodes++;
      return fields(bytes, s, e, (entryField, ns, ne) => {
        if (entryField !== 2) return true;
        let deps = 0;
        const read = fields(bytes, ns, ne, (nodeField) => {
          if (nodeField === 3) deps++;
          else if (nodeField === 5 || nodeField === 6 || nodeField === 7) counts.mapEntries++;
          return true;
        });
        counts.dependencies += deps;
        counts.mostDependencies = Math.max(counts.mostDependencies, deps);
        return read;
      });
    });
  });
  if (!ok) return undefined;
  const L = WORKFLOW_LIMITS;
  if (counts.nodes > L.maxNodes)
    return `VALIDATION_ERROR: limit_exceeded: a workflow has at most ${L.maxNodes} nodes (this one has ${counts.nodes})`;
  if (counts.mostDependencies > L.maxDependencies)
    return `VALIDATION_ERROR: limit_exceeded: a node has at most ${L.maxDependencies} dependencies (one has ${counts.mostDependencies})`;
  if (counts.dependencies > L.maxTotalDependencies)
    return `VALIDATION_ERROR: limit_exceeded: a workflow has at most ${L.maxTotalDependencies} dependencies in all (this one has ${counts.dependencies})`;
  if (counts.mapEntries > L.maxMapEntries)
    return `VALIDATION_ERROR: limit_exceeded: a workflow has at most ${L.maxMapEntries} map entries in all (metadata, input_mapping, output_mapping; this one has ${counts.mapEntries})`;
  return undefined;
}

/**
 * Calls `each(field, start, end)` for each length-delimited field of bytes[from, to) (other wire types are skipped);
 * false when the bytes are not a message or `each` says so. Each level reads only tags and lengths.
 */
function fields(
  bytes: Uint8Array,
  from: number,
  to: number,
  each: (field: number, start: number, end: number) => boolean,
): boolean {
  let p = from;
  const varint = (): number => {
    let value = 0;
    let scale = 1;
    for (let k = 0; k < 10; k++) {
      if (p >= to) return -1;
      const b = bytes[p++];
      value += (b & 0x7f) * scale;
      if (b < 0x80) return value;
      scale *= 128;
    }
    return -1;
  };
  while (p < to) {
    const tag = varint();
    if (tag < 0) return false;
    const field = Math.floor(tag / 8);
    const wire = tag % 8;
    if (wire === 0) {
      if (varint() < 0) return false;
    } else if (wire === 1) p += 8;
    else if (wire === 5) p += 4;
    else if (wire === 2) {
      const length = varint();
      if (length < 0 || p + length > to) return false;
      if (!each(field, p, p + length)) return false;
      p += length;
    } else return false;
    if (p > to) return false;
  }
  return true;
}
