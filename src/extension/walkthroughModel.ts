import type { CoordinatorApi, Disposable } from '../core/api';

/**
 * The steps of the Get Started walkthrough whose completion the coordinator's state decides (package.json
 * `contributes.walkthroughs`, `onContext:` completion events).
 */
export interface WalkthroughSteps {
  /** The coordinator of this window serves. */
  readonly coordinatorRunning: boolean;
  /** An agent has its environment: an agent credential was minted (Copy Agent Environment), or an agent registered. */
  readonly environmentReady: boolean;
  /** Some agent is registered. */
  readonly agentRegistered: boolean;
  /** A message (from an agent, or sent from the editor) was delivered to an agent's inbox stream. */
  readonly messageDelivered: boolean;
  /** An approval request was decided (by a person or a rule; not cancelled, not timed out). */
  readonly approvalDecided: boolean;
}

/** What the coordinator says; the steps follow from it (`walkthroughSteps`). */
export interface WalkthroughFacts {
  readonly running: boolean;
  readonly agentsRegistered: number;
  /** Agent credentials minted and not revoked (the terminals' enrolment credential is not one). */
  readonly agentCredentials: number;
  readonly messagesDelivered: number;
  readonly approvalsDecided: boolean;
}

export const NO_FACTS: WalkthroughFacts = {
  running: false,
  agentsRegistered: 0,
  agentCredentials: 0,
  messagesDelivered: 0,
  approvalsDecided: false,
};

export const NO_STEPS: WalkthroughSteps = {
  coordinatorRunning: false,
  environmentReady: false,
  agentRegistered: false,
  messageDelivered: false,
  approvalDecided: false,
};

export function walkthroughSteps(facts: WalkthroughFacts): WalkthroughSteps {
  return {
    coordinatorRunning: facts.running,
    environmentReady: facts.agentCredentials > 0 || facts.agentsRegistered > 0,
    agentRegistered: facts.agentsRegistered > 0,
    messageDelivered: facts.messagesDelivered > 0,
    approvalDecided: facts.approvalsDecided,
  };
}

export function sameSteps(a: WalkthroughSteps, b: WalkthroughSteps): boolean {
  return (
    a.coordinatorRunning === b.coordinatorRunning &&
    a.environmentReady === b.environmentReady &&
    a.agentRegistered === b.agentRegistered &&
    a.messageDelivered === b.messageDelivered &&
    a.approvalDecided === b.approvalDecided
  );
}

type FactName = 'agents' | 'credentials' | 'messages' | 'approvals';

/**
 * Follows the running coordinator's state through the CoordinatorApi and reports the walkthrough's steps whenever
 * one changes. Each fact is read again only when its event fires, one read at a time per fact (events that arrive
 * during a read cause one more read); once a message was delivered, inbox events (the busiest) are not followed.
 */
export class WalkthroughProgress implements Disposable {
  private api: CoordinatorApi | undefined;
  private subscriptions: Disposable[] = [];
  private facts: WalkthroughFacts = NO_FACTS;
  private published: WalkthroughSteps = NO_STEPS;
  /** Reads under way, and facts whose event fired during one. */
  private readonly reading = new Set<FactName>();
  private readonly again = new Set<FactName>();

  /** `publish` gets the steps at every change (and once after `bind`). */
  constructor(private readonly publish: (steps: WalkthroughSteps) => void) {}

  get steps(): WalkthroughSteps {
    return this.published;
  }

  /** Follows `api` (the coordinator started) or nothing (it stopped: no step is done by its state). */
  async bind(api: CoordinatorApi | undefined): Promise<void> {
    this.unsubscribe();
    this.api = api;
    this.facts = { ...NO_FACTS, running: api !== undefined };
    this.reading.clear();
    this.again.clear();
    if (!api) {
      this.published = NO_STEPS;
      this.publish(NO_STEPS);
      return;
    }
    this.subscriptions = [
      api.onDidChangeAgents(() => void this.read('agents')),
      api.onDidChangeCredentials(() => void this.read('credentials')),
      api.onDidChangeInbox(() => {
        if (this.facts.messagesDelivered === 0) void this.read('messages');
      }),
      api.onDidChangeApprovals((change) => {
        if (change.invocation.state === 'decided') this.update({ approvalsDecided: true }, api);
      }),
    ];
    this.update({}, api);
    await Promise.all((['agents', 'credentials', 'messages', 'approvals'] as const).map((fact) => this.read(fact)));
  }

  dispose(): void {
    this.unsubscribe();
    this.api = undefined;
  }

  private unsubscribe(): void {
    for (const subscription of this.subscriptions) subscription.dispose();
    this.subscriptions = [];
  }

  private async read(fact: FactName): Promise<void> {
    const api = this.api;
    if (!api) return;
    if (this.reading.has(fact)) {
      this.again.add(fact);
      return;
    }
    this.reading.add(fact);
    try {
      do {
        this.again.delete(fact);
        const change = await readFact(api, fact);
        if (this.api !== api) return;
        this.update(change, api);
      } while (this.again.has(fact));
    } catch {
      // The coordinator stopped meanwhile; `bind` follows the next one.
    } finally {
      if (this.api === api) this.reading.delete(fact);
    }
  }

  private update(change: Partial<WalkthroughFacts>, api: CoordinatorApi): void {
    if (this.api !== api) return;
    const facts = this.facts;
    // Deliveries only grow and a decision stays made: a read that started before an event must not undo it.
    this.facts = {
      ...facts,
      ...change,
      messagesDelivered: Math.max(facts.messagesDelivered, change.messagesDelivered ?? 0),
      approvalsDecided: facts.approvalsDecided || change.approvalsDecided === true,
    };
    const steps = walkthroughSteps(this.facts);
    if (sameSteps(steps, this.published)) return;
    this.published = steps;
    this.publish(steps);
  }
}

async function readFact(api: CoordinatorApi, fact: FactName): Promise<Partial<WalkthroughFacts>> {
  switch (fact) {
    case 'agents':
      return { agentsRegistered: (await api.agentCounts()).registered };
    case 'credentials':
      return { agentCredentials: (await api.credentials()).filter((c) => c.kind === 'agent' && !c.revokedAt).length };
    case 'messages':
      return { messagesDelivered: await api.deliveredMessageCount() };
    case 'approvals':
      return { approvalsDecided: (await api.approvals()).some((invocation) => invocation.state === 'decided') };
  }
}
