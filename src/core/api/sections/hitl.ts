import type { Event } from '../../events';
import type { AuditEntry, AuditQuery, HitlInvocation } from '../../hitl/model';
import type { HitlPolicy } from '../../hitl/policy';
import type { ToolRule } from '../../toolApproval/model';

/**
 * Approvals (human in the loop, RFC §15): invocations, their audit, the policy, the tool-use rules of CLI agents,
 * operators. Part of CoordinatorApi (coordinatorApi.ts).
 */
export interface HitlApi {
  /** Pending invocations first (highest priority, then nearest deadline), then settled ones, newest first. */
  approvals(query?: ApprovalsQuery): Promise<HitlInvocation[]>;
  approval(id: string): Promise<HitlInvocation | undefined>;
  pendingApprovalCount(): Promise<number>;
  approvalAudit(query?: AuditQuery): Promise<AuditEntry[]>;
  /** The audit as one JSON document: every invocation with its decision and every audit record. */
  exportApprovalAudit(query?: AuditQuery): Promise<Record<string, unknown>>;
  /**
   * An operator's decision; answers the settled invocation. Rejects with a CoordinatorApiError: `not_found`,
   * `settled` (someone or something decided first) or `invalid` (an unknown action, a bad payload, or a missing or
   * blank rationale: every human decision says why, RFC §15.1).
   */
  decideApproval(id: string, decision: ApprovalDecision, operator: string): Promise<HitlInvocation>;
  /** Withdraws a pending invocation; the requester is answered `deny`. Rejects like `decideApproval`. */
  cancelApproval(id: string, operator: string, reason: string): Promise<HitlInvocation>;
  approvalPolicy(): Promise<HitlPolicy>;
  /** Replaces the HITL policy; rules and pause apply to invocations opened from then on. */
  setApprovalPolicy(policy: HitlPolicy, by: string): Promise<void>;
  /** The tool-use rules of CLI agents' approval hooks (sw4rm.approvals.toolRules; README, "Approvals for CLI agents"). */
  toolApprovalRules(): Promise<readonly ToolRule[]>;
  /** Replaces them (already checked by parseToolRules); they apply to the next tool use. */
  setToolApprovalRules(rules: readonly ToolRule[], by: string): Promise<void>;
  approvalsPaused(): Promise<boolean>;
  /** Pauses (no rule decides; every new invocation waits for a human) or resumes approvals. */
  setApprovalsPaused(paused: boolean, by: string): Promise<void>;
  /** Declares a human operator present (RFC §15.3) until `detachOperator`; while none is, fallbacks apply. */
  attachOperator(name: string): Promise<OperatorAttachment>;
  /** Ends an attachment; an unknown or already detached one is ignored. */
  detachOperator(attachmentId: string): Promise<void>;
  readonly onDidChangeApprovals: Event<ApprovalsChange>;
  /** The policy was replaced through this API (settings, pause). */
  readonly onDidChangeApprovalPolicy: Event<ApprovalPolicyChange>;
}

export interface ApprovalsQuery {
  readonly pendingOnly?: boolean;
  readonly limit?: number;
}

/**
 * RFC §15.1: approve / deny / modify / defer, with a rationale (required, not blank); `modify` carries the edited
 * payload (JSON).
 */
export interface ApprovalDecision {
  readonly action: string;
  readonly rationale?: string;
  readonly payload?: unknown;
}

export interface ApprovalsChange {
  readonly kind: 'opened' | 'settled' | 'extended';
  readonly invocation: HitlInvocation;
}

export interface ApprovalPolicyChange {
  readonly policy: HitlPolicy;
  readonly by: string;
}

export interface OperatorAttachment {
  readonly id: string;
  readonly name: string;
}
