import type { Coordinator } from '../../coordinator';
import type { Disposable } from '../../events';
import type { AuditEntry, AuditQuery, HitlInvocation } from '../../hitl/model';
import type { HitlPolicy } from '../../hitl/policy';
import type { ToolRule } from '../../toolApproval/model';
import type {
  ApprovalDecision,
  ApprovalPolicyChange,
  ApprovalsChange,
  ApprovalsQuery,
  HitlApi,
  OperatorAttachment,
} from '../sections/hitl';
import type { InProcessHost } from './host';

/** CoordinatorApi's approvals section (HITL, tool-use rules, operators) over a coordinator in this thread. */
export function hitlSection(host: InProcessHost): HitlApi {
  const approvalsChanged = host.emitter<ApprovalsChange>();
  const policyChanged = host.emitter<ApprovalPolicyChange>();
  host.subscribe(
    host.coordinator.hitl.onDidChange(({ kind, invocation }) => approvalsChanged.fire({ kind, invocation })),
  );
  /** The operators attached through this API, detached when it is disposed. */
  const operators = new Map<string, Disposable>();
  let nextOperator = 1;
  host.onDispose(() => {
    const attached = [...operators.values()];
    operators.clear();
    for (const operator of attached) {
      try {
        operator.dispose();
      } catch {
        // The coordinator is stopping (its store may have failed); its operators go with it.
      }
    }
  });
  const replacePolicy = (c: Coordinator, policy: HitlPolicy, by: string): void => {
    c.hitl.setPolicy(policy, by);
    policyChanged.fire({ policy, by });
  };
  /** A decision is logged under the invocation's own correlation id (a new one when it has none). */
  const correlationOf = (id: string): string =>
    host.coordinator.hitl.get(id)?.correlationId || host.coordinator.ids.uuid();
  return {
    onDidChangeApprovals: approvalsChanged.event,
    onDidChangeApprovalPolicy: policyChanged.event,

    approvals(query: ApprovalsQuery = {}): Promise<HitlInvocation[]> {
      return host.run((c) => c.hitl.list(query));
    },

    approval(id: string): Promise<HitlInvocation | undefined> {
      return host.run((c) => c.hitl.get(id));
    },

    pendingApprovalCount(): Promise<number> {
      return host.run((c) => c.hitl.pendingCount());
    },

    approvalAudit(query?: AuditQuery): Promise<AuditEntry[]> {
      return host.run((c) => c.hitl.auditTrail(query));
    },

    exportApprovalAudit(query?: AuditQuery): Promise<Record<string, unknown>> {
      return host.run((c) => c.hitl.exportAudit(query));
    },

    decideApproval(id: string, decision: ApprovalDecision, operator: string): Promise<HitlInvocation> {
      return host.run((c) =>
        c.hitl.decide(
          id,
          { action: decision.action, rationale: decision.rationale, payload: decision.payload },
          operator,
          { correlationId: correlationOf(id) },
        ),
      );
    },

    cancelApproval(id: string, operator: string, reason: string): Promise<HitlInvocation> {
      return host.run((c) => c.hitl.cancel(id, operator, reason, { correlationId: correlationOf(id) }));
    },

    approvalPolicy(): Promise<HitlPolicy> {
      return host.run((c) => c.hitl.policy);
    },

    setApprovalPolicy(policy: HitlPolicy, by: string): Promise<void> {
      return host.run((c) => replacePolicy(c, policy, by));
    },

    toolApprovalRules(): Promise<readonly ToolRule[]> {
      return host.run((c) => c.toolApprovals.rules);
    },

    setToolApprovalRules(rules: readonly ToolRule[], by: string): Promise<void> {
      return host.run((c) => c.toolApprovals.setRules(rules, by));
    },

    approvalsPaused(): Promise<boolean> {
      return host.run((c) => c.hitl.policy.paused);
    },

    setApprovalsPaused(paused: boolean, by: string): Promise<void> {
      return host.run((c) => replacePolicy(c, { ...c.hitl.policy, paused }, by));
    },

    attachOperator(name: string): Promise<OperatorAttachment> {
      return host.run((c) => {
        const id = `operator-${nextOperator++}`;
        operators.set(id, c.hitl.attachOperator(name));
        return { id, name };
      });
    },

    detachOperator(attachmentId: string): Promise<void> {
      return host.run(() => {
        const operator = operators.get(attachmentId);
        operators.delete(attachmentId);
        operator?.dispose();
      });
    },
  };
}
