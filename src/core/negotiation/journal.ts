import type { Artifact } from '../activity/model';
import type { Clock } from '../clock';
import type { CallContext } from '../context';
import type { EventRecorder } from '../log/model';
import type { NegotiationRecord } from './model';

/** The log's actor of the negotiation area. */
export const ACTOR = 'negotiation';

/** ActivityBuffer.appendArtifact: contract_vN / diff / reports. */
export interface ArtifactSink {
  appendArtifact(artifact: Artifact, ctx: CallContext): { readonly ok: boolean; readonly reason: string };
}

/**
 * What a debate writes beside its record, inside the transition of its change: its log events (each stamping the
 * record's updatedAt) and its artifacts (a refused artifact is logged, never a refusal of the call).
 */
export class Journal {
  constructor(
    private readonly deps: { readonly log: EventRecorder; readonly clock: Clock; readonly artifacts: ArtifactSink },
  ) {}

  record(
    rec: NegotiationRecord,
    eventType: string,
    details: Record<string, unknown>,
    ctx: CallContext,
    level: 'INFO' | 'WARN' = 'INFO',
  ): void {
    rec.updatedAt = this.deps.clock.now();
    this.deps.log.record({
      correlationId: rec.id,
      actor: ACTOR,
      eventType,
      level,
      details: { negotiation_id: rec.id, state: rec.state, call: ctx.correlationId, ...details },
    });
  }

  artifact(
    rec: NegotiationRecord,
    kind: string,
    version: string,
    contentType: string,
    content: Buffer,
    ctx: CallContext,
  ): void {
    const result = this.deps.artifacts.appendArtifact(
      { negotiationId: rec.id, kind, version, contentType, content, createdAt: '' },
      { correlationId: rec.id, principal: ctx.principal },
    );
    if (!result.ok) {
      this.deps.log.record({
        correlationId: rec.id,
        actor: ACTOR,
        eventType: 'negotiation.artifact_refused',
        level: 'WARN',
        details: { negotiation_id: rec.id, kind, version, reason: result.reason.slice(0, 500) },
      });
    }
  }
}
