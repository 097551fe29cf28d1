import type { Clock } from '../clock';
import type { CallContext } from '../context';
import { Emitter, type Disposable, type Event } from '../events';
import type { EventLog } from '../log/eventLog';
import type { AgentPreferences, DebateIntensity, EffectivePolicy, NegotiationPolicy, PolicyProfile, PolicySet, PolicyStorage, RoomThresholds, TieBreak } from './model';

/**
 * What the editor's settings (sw4rm.negotiation.*) and the CLI may set; every field optional. parsePolicySettings
 * (this file) reads it from unknown JSON with problems named per field.
 */
export interface PolicySettings {
  readonly base?: Partial<NegotiationPolicy>;
  readonly profiles?: readonly { readonly name: string; readonly policy: Partial<NegotiationPolicy> }[];
  readonly debateTimeoutMs?: Readonly<Record<string, number>>;
  readonly room?: Partial<RoomThresholds>;
  readonly tieBreak?: TieBreak;
  readonly proposalSchemas?: readonly { readonly topic: string; readonly schema: string }[];
}

export interface EffectiveInput {
  readonly intensity: DebateIntensity | '';
  /** A profile name hint from the opener ('' = none): it wins over the intensity when it names a profile. */
  readonly profileHint: string;
  /** Per agent, what it asked for (0 = no preference); clamped to the guardrails. */
  readonly preferences: Readonly<Record<string, Partial<AgentPreferences>>>;
  /** Open's debate_timeout, 0 = the profile's. */
  readonly debateTimeoutMs: number;
  readonly topic: string;
}

/**
 * The negotiation policy area (RFC §17.2): the versioned PolicySet (persisted, one version per change, each logged as
 * `negotiation.policy_set`), the five intensity profiles, clamping agent preferences into an EffectivePolicy, the room
 * thresholds. Skeleton on the base branch: part P builds it.
 */
export class NegotiationPolicies implements Disposable {
  private readonly changed = new Emitter<PolicySet>();
  readonly onDidChange: Event<PolicySet> = this.changed.event;

  constructor(protected readonly deps: { readonly store: PolicyStorage; readonly log: EventLog; readonly clock: Clock }, protected readonly settings: PolicySettings = {}) {}

  /** The policy set in force. */
  current(): PolicySet { throw new Error('not built yet'); }
  version(n: number): PolicySet | undefined { void n; throw new Error('not built yet'); }
  /** SetNegotiationPolicy: a new version with this base policy; NegotiationError 'invalid' naming the field. */
  setBase(policy: NegotiationPolicy, by: string, ctx: CallContext): PolicySet { void policy; void by; void ctx; throw new Error('not built yet'); }
  /** SetPolicyProfiles: replaces the named profiles (others kept); the five intensities cannot be removed. */
  setProfiles(profiles: readonly PolicyProfile[], by: string, ctx: CallContext): PolicySet { void profiles; void by; void ctx; throw new Error('not built yet'); }
  /** The editor's settings changed: a new version when anything differs. */
  applySettings(settings: PolicySettings, ctx: CallContext): PolicySet { void settings; void ctx; throw new Error('not built yet'); }
  /** On Open: the EffectivePolicy and the proposal schema ('' = none) for a negotiation. */
  effectiveFor(input: EffectiveInput): { readonly effective: EffectivePolicy; readonly schema: string } { void input; throw new Error('not built yet'); }

  dispose(): void {
    this.changed.dispose();
  }
}
