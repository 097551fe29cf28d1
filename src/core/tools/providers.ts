import type { Ajv, ValidateFunction } from 'ajv';
import type { Clock } from '../clock';
import type { CallContext } from '../context';
import { Emitter, type Disposable, type Event } from '../events';
import type { EventLog } from '../log/eventLog';
import type { AgentDirectory, RegistryChange } from '../registry/model';
import { KeyedQueue } from '../keyedQueue';
import {
  checkDescriptors,
  checkDescriptorsInTurns,
  compileDescriptor,
  compileSchemaText,
  compileSchemaTextAsync,
  schemaCompiler,
  schemaWorkerAvailable,
  type DescriptorsVerdict,
  type SchemaVerdict,
  type WireToolDescriptor,
} from './descriptors';
import {
  ToolCallError,
  type ProviderInfo,
  type ProviderRecord,
  type ToolDescriptor,
  type ToolProvider,
  type ToolsChange,
  type ToolsStorage,
} from './model';

export type { WireToolDescriptor } from './descriptors';

/**
 * A registration's answer. Refused: `code` is the RFC error code (VALIDATION_ERROR, ALREADY_EXISTS,
 * PERMISSION_DENIED, FAILED_PRECONDITION) and `reason` the why without it; RegisterProvider answers `<code>: <reason>`.
 */
export type RegisterResult =
  | {
      readonly ok: true;
      readonly providerId: string;
      readonly tools: readonly ToolDescriptor[];
      readonly warnings: readonly string[];
    }
  | { readonly ok: false; readonly code: string; readonly reason: string };

export interface ProviderCatalogDeps {
  readonly store: ToolsStorage;
  readonly log: EventLog;
  readonly clock: Clock;
  readonly agents: AgentDirectory;
  /** workspace, process, reasoning: never registrable by an agent. */
  readonly builtins: readonly ToolProvider[];
  /** The ToolProvider that reaches a registered agent provider (externalProvider.ts). */
  readonly external: (providerId: string, tools: readonly ToolDescriptor[]) => ToolProvider;
}

type Validators = { readonly input: ValidateFunction; readonly output: ValidateFunction | undefined };

/** A registered agent provider in memory: its record, compiled schemas, the ToolProvider made for this registration. */
interface AgentProvider {
  readonly record: ProviderRecord;
  /** Compiled when registered; after a restart compiled on the schema worker from the start (warming meanwhile). */
  readonly validators: Map<string, Validators>;
  /** The stored schemas compiling on the schema worker after a restart; undefined once done. */
  warming: Promise<void> | undefined;
  provider: ToolProvider | undefined;
  /** Availability as last announced (a change logs `tool.provider_availability`). */
  available: boolean;
}

/** A stored tool's validators from its schemas' verdicts; a refused one throws the call's INTERNAL_ERROR. */
function storedValidators(
  providerId: string,
  tool: ToolDescriptor,
  compile: (text: string, what: 'input' | 'output') => SchemaVerdict,
): Validators {
  const one = (schema: ToolDescriptor['inputSchema'], what: 'input' | 'output') => {
    const verdict = compile(JSON.stringify(schema), what);
    if (!verdict.ok)
      throw new ToolCallError(
        'internal',
        'INTERNAL_ERROR',
        `the stored ${what} schema of ${providerId}/${tool.name} is refused now: ${verdict.why} (register the provider again)`,
      );
    return verdict.validate;
  };
  return {
    input: one(tool.inputSchema, 'input'),
    output: Object.keys(tool.outputSchema).length === 0 ? undefined : one(tool.outputSchema, 'output'),
  };
}

/** The ids of the built-in providers, refused to agents even when a built-in is not constructed (process off). */
export const BUILTIN_IDS: readonly string[] = ['workspace', 'process', 'reasoning'];

/** Agent states in which an agent takes no new work (RFC §8; FAILED is FAILED_STATE by its enum name). */
const NOT_SERVING = new Set(['SHUTTING_DOWN', 'FAILED_STATE']);

/**
 * The providers (RFC §18.1): the built-ins and the agents that registered as providers (ConnectorService.
 * RegisterProvider: provider_id = the agent's id; descriptors checked, schemas compiled by ajv — an invalid schema
 * refused with the path of the problem; persisted in tool_providers; replaced by a new registration; available while
 * the agent is online). Owner: the providers part.
 */
export class ProviderCatalog implements Disposable {
  readonly onDidChange: Event<ToolsChange>;
  private readonly changed = new Emitter<ToolsChange>();
  private readonly builtins = new Map<string, ToolProvider>();
  private readonly builtinValidators = new Map<string, Validators>();
  private readonly builtinAjv: Ajv = schemaCompiler();
  private readonly agentProviders = new Map<string, AgentProvider>();
  private readonly registryListener: Disposable;
  private readonly registrations = new KeyedQueue();
  private disposed = false;

  constructor(readonly deps: ProviderCatalogDeps) {
    this.onDidChange = this.changed.event;
    for (const provider of deps.builtins) this.builtins.set(provider.id, provider);
    for (const record of deps.store.tools.listProviders()) {
      const entry: AgentProvider = {
        record,
        validators: new Map(),
        warming: undefined,
        provider: undefined,
        available: this.availability(record.providerId).available,
      };
      this.agentProviders.set(record.providerId, entry);
      this.warm(entry);
    }
    this.registryListener = deps.agents.onDidChange((change) => this.agentChanged(change));
  }

  /**
   * RegisterProvider (RFC §18.1): `agentId` (the caller) registers itself as provider `providerId` with `tools`.
   * A repeat replaces the provider's tools. Persisted with its `tool.provider_registered` event in one transaction.
   * Compiles every schema in this turn of the event loop: the server calls registerInTurns.
   */
  register(
    agentId: string,
    providerId: string,
    tools: readonly WireToolDescriptor[],
    ctx: CallContext,
  ): RegisterResult {
    const refused = this.refusal(agentId, providerId);
    if (refused) return refused;
    return this.commit(agentId, providerId, checkDescriptors(tools), ctx);
  }

  /**
   * register, with the schemas compiled on the schema worker (ajv takes 0.6–1.6 s for one 64 KiB schema), this thread
   * evaluating the generated code one tool per turn; registrations of one provider run one at a time, in order.
   */
  registerInTurns(
    agentId: string,
    providerId: string,
    tools: readonly WireToolDescriptor[],
    ctx: CallContext,
  ): Promise<RegisterResult> {
    const refused = this.refusal(agentId, providerId);
    if (refused) return Promise.resolve(refused);
    return this.registrations.run(providerId, async () => {
      const checked = await checkDescriptorsInTurns(tools);
      if (this.disposed) return { ok: false, code: 'UNAVAILABLE', reason: 'the coordinator is stopping' };
      // The agent may have left while its schemas compiled.
      return this.refusal(agentId, providerId) ?? this.commit(agentId, providerId, checked, ctx);
    });
  }

  /**
   * DescribeTools: one provider's tools (built-in or registered, available or not); for '' every provider's, each
   * named `<provider_id>/<tool_name>`. An unknown provider throws ToolCallError NOT_FOUND.
   */
  describe(providerId: string): readonly ToolDescriptor[] {
    if (providerId === '')
      return this.infos().flatMap((p) => p.tools.map((t) => ({ ...t, name: `${p.providerId}/${t.name}` })));
    const builtin = this.builtins.get(providerId);
    if (builtin) return builtin.describe();
    const entry = this.agentProviders.get(providerId);
    if (entry) return entry.record.tools;
    const known = this.infos()
      .map((p) => p.providerId)
      .join(', ')
      .slice(0, 500);
    throw new ToolCallError('not_found', 'NOT_FOUND', `no provider '${providerId.slice(0, 256)}' (known: ${known})`);
  }

  private refusal(agentId: string, providerId: string): RegisterResult | undefined {
    const refuse = (code: string, reason: string): RegisterResult => ({ ok: false, code, reason });
    if (providerId === '')
      return refuse('VALIDATION_ERROR', "provider_id must not be empty: it is the registering agent's id");
    if (this.builtins.has(providerId) || BUILTIN_IDS.includes(providerId)) {
      return refuse(
        'ALREADY_EXISTS',
        `provider_id '${providerId}' is a built-in provider (${BUILTIN_IDS.join(', ')}): an agent registers under its own id`,
      );
    }
    if (providerId !== agentId) {
      return refuse(
        'PERMISSION_DENIED',
        `an agent registers tools only as itself: the caller is '${agentId}', provider_id is '${providerId.slice(0, 256)}'`,
      );
    }
    if (!this.deps.agents.get(agentId))
      return refuse(
        'FAILED_PRECONDITION',
        `register the agent first: '${agentId}' is not registered (RegistryService.RegisterAgent)`,
      );
    return undefined;
  }

  private commit(agentId: string, providerId: string, checked: DescriptorsVerdict, ctx: CallContext): RegisterResult {
    if (!checked.ok) return { ok: false, code: 'VALIDATION_ERROR', reason: checked.reason };
    const record: ProviderRecord = {
      providerId,
      tools: checked.tools.map((t) => t.descriptor),
      registeredAt: this.deps.clock.now(),
    };
    const previous = this.agentProviders.get(providerId);
    this.deps.store.transaction(() => {
      this.deps.store.tools.upsertProvider(record);
      this.deps.log.record({
        correlationId: ctx.correlationId,
        actor: agentId,
        eventType: 'tool.provider_registered',
        details: {
          provider_id: providerId,
          tools: record.tools.map((t) => t.name),
          replaced: previous !== undefined,
          previous_tools: previous?.record.tools.length ?? 0,
        },
      });
    });
    const entry: AgentProvider = {
      record,
      provider: undefined,
      available: this.availability(providerId).available,
      warming: undefined,
      validators: new Map(checked.tools.map((t) => [t.descriptor.name, { input: t.input, output: t.output }])),
    };
    this.agentProviders.set(providerId, entry);
    this.deps.store.afterCommit(() => this.changed.fire({ kind: 'provider', id: providerId }));
    return { ok: true, providerId, tools: record.tools, warnings: [] };
  }

  /** A built-in or registered provider, or undefined. A registered one's ToolProvider is made once per registration. */
  get(providerId: string): ToolProvider | undefined {
    const builtin = this.builtins.get(providerId);
    if (builtin) return builtin;
    const entry = this.agentProviders.get(providerId);
    if (!entry) return undefined;
    entry.provider ??= this.deps.external(providerId, entry.record.tools);
    return entry.provider;
  }

  /** The compiled input and output schema of a tool (output undefined when none was declared). */
  validators(providerId: string, toolName: string): Validators | undefined {
    const entry = this.agentProviders.get(providerId);
    if (entry) {
      let compiled = entry.validators.get(toolName);
      const tool = compiled ? undefined : entry.record.tools.find((t) => t.name === toolName);
      if (tool) {
        if (entry.warming) {
          throw new ToolCallError(
            'unavailable',
            'AGENT_UNAVAILABLE',
            `the schemas of '${providerId}' are being compiled again since the coordinator started: retry in a moment`,
          );
        }
        // A stored schema was checked when it was registered; one refused now (a newer bound) is refused for the call.
        compiled = storedValidators(providerId, tool, (text, what) => compileSchemaText(text, what));
        entry.validators.set(toolName, compiled);
      }
      return compiled;
    }
    const builtin = this.builtins.get(providerId);
    if (!builtin) return undefined;
    const key = `${providerId}/${toolName}`;
    let compiled = this.builtinValidators.get(key);
    if (!compiled) {
      const tool = builtin.describe().find((t) => t.name === toolName);
      if (!tool) return undefined;
      compiled = compileDescriptor(this.builtinAjv, tool);
      this.builtinValidators.set(key, compiled);
    }
    return compiled;
  }

  /** Resolves once a restored provider's stored schemas are compiled (at once when they are). */
  async whenCompiled(providerId: string): Promise<void> {
    await this.agentProviders.get(providerId)?.warming;
  }

  /** A restored provider's stored schemas, compiled on the schema worker; its tools wait meanwhile (AGENT_UNAVAILABLE). */
  private warm(entry: AgentProvider): void {
    if (!schemaWorkerAvailable() || entry.record.tools.length === 0) return;
    const warming = (async () => {
      for (const tool of entry.record.tools) {
        const input = await compileSchemaTextAsync(JSON.stringify(tool.inputSchema), 'input');
        const output =
          Object.keys(tool.outputSchema).length === 0
            ? undefined
            : await compileSchemaTextAsync(JSON.stringify(tool.outputSchema), 'output');
        if (this.disposed || this.agentProviders.get(entry.record.providerId) !== entry) return;
        if (entry.validators.has(tool.name)) continue;
        try {
          entry.validators.set(
            tool.name,
            storedValidators(entry.record.providerId, tool, (_text, what) => (what === 'input' ? input : output!)),
          );
        } catch {
          // A refused stored schema is refused again for each call (validators, from the cache).
        }
      }
    })();
    entry.warming = warming;
    void warming.finally(() => {
      if (entry.warming === warming) entry.warming = undefined;
    });
  }

  /** Every provider: the built-ins in the order given, then the agent providers by id. */
  infos(): ProviderInfo[] {
    const infos: ProviderInfo[] = [];
    for (const provider of this.builtins.values()) {
      const available = provider.available?.() ?? true;
      infos.push({
        providerId: provider.id,
        kind: 'builtin',
        available,
        registeredAt: 0,
        tools: provider.describe(),
        unavailableReason: available ? '' : (provider.unavailableReason?.() ?? 'unavailable'),
      });
    }
    for (const id of [...this.agentProviders.keys()].sort()) {
      const entry = this.agentProviders.get(id)!;
      const { available, reason } = this.availability(id);
      infos.push({
        providerId: id,
        kind: 'agent',
        available,
        unavailableReason: reason,
        tools: entry.record.tools,
        registeredAt: entry.record.registeredAt,
      });
    }
    return infos;
  }

  /** One provider's info, or undefined. */
  info(providerId: string): ProviderInfo | undefined {
    return this.infos().find((p) => p.providerId === providerId);
  }

  /**
   * Stops the catalog; a built-in provider with a dispose() (the process provider: it SIGKILLs every process group it
   * still runs) is disposed too. The coordinator disposes the catalog after the engine, so nothing calls them after.
   */
  dispose(): void {
    this.disposed = true;
    this.registryListener.dispose();
    this.changed.dispose();
    for (const provider of this.builtins.values()) {
      const disposable = provider as ToolProvider & { dispose?: () => void };
      if (typeof disposable.dispose === 'function') disposable.dispose();
    }
  }

  /** An agent provider is available while its agent is registered, online and neither shutting down nor failed. */
  private availability(agentId: string): { readonly available: boolean; readonly reason: string } {
    const agent = this.deps.agents.get(agentId);
    if (!agent)
      return {
        available: false,
        reason: `agent '${agentId}' is not registered (its tools stay listed until it registers them again)`,
      };
    if (agent.presence !== 'online') {
      return {
        available: false,
        reason: `agent '${agentId}' is ${agent.presence} (last change ${new Date(agent.updatedAt).toISOString()})`,
      };
    }
    if (NOT_SERVING.has(agent.state)) return { available: false, reason: `agent '${agentId}' is ${agent.state}` };
    return { available: true, reason: '' };
  }

  private agentChanged(change: RegistryChange): void {
    const agentId = change.kind === 'left' ? change.agentId : change.agent.descriptor.agentId;
    const entry = this.agentProviders.get(agentId);
    if (!entry) return;
    const { available, reason } = this.availability(agentId);
    if (available === entry.available) return;
    entry.available = available;
    try {
      this.deps.log.record({
        correlationId: `provider:${agentId}`,
        actor: 'tools',
        eventType: 'tool.provider_availability',
        level: available ? 'INFO' : 'WARN',
        details: { provider_id: agentId, available, reason },
      });
    } catch (err) {
      this.deps.log.internalError('tools', `provider:${agentId}`, err);
    }
    this.deps.store.afterCommit(() => this.changed.fire({ kind: 'provider', id: agentId }));
  }
}
