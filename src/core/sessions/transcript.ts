import type {
  ContentBlock,
  SessionUpdate,
  ToolCall,
  ToolCallContent,
  ToolCallUpdate,
} from '@agentclientprotocol/sdk' with {
  'resolution-mode': 'import',
};
import {
  TRANSCRIPT_MAX_ENTRIES,
  TRANSCRIPT_TEXT_MAX_CHARS,
  type ToolDiff,
  type TranscriptEntry,
  type TurnEnd,
  type TurnOrigin,
} from './model';

type ToolEntry = Extract<TranscriptEntry, { kind: 'tool' }>;
type Mutable<T> = { -readonly [K in keyof T]: T[K] };

const CUT = '\n… (cut: the transcript keeps 64 KiB of each text)';

function bounded(text: string): string {
  return text.length <= TRANSCRIPT_TEXT_MAX_CHARS ? text : text.slice(0, TRANSCRIPT_TEXT_MAX_CHARS) + CUT;
}

function textOf(content: ContentBlock): string {
  if (content.type === 'text') return content.text;
  if (content.type === 'resource_link') return `[${content.name}](${content.uri})`;
  return `[${content.type}]`;
}

function diffsOf(content: readonly ToolCallContent[] | null | undefined): { diffs: ToolDiff[]; output: string } {
  const diffs: ToolDiff[] = [];
  let output = '';
  for (const item of content ?? []) {
    if (item.type === 'diff')
      diffs.push({
        path: item.path,
        oldText: item.oldText == null ? null : bounded(item.oldText),
        newText: bounded(item.newText),
      });
    else if (item.type === 'content') output += textOf(item.content);
    else if (item.type === 'terminal') output += `[terminal ${item.terminalId}]`;
  }
  return { diffs, output: bounded(output) };
}

/** The entry of a tool call, from its first `tool_call` or `tool_call_update`. */
function newTool(update: ToolCall | ToolCallUpdate, turn: number, at: number): ToolEntry {
  const { diffs, output } = diffsOf(update.content);
  return {
    kind: 'tool',
    at,
    turn,
    toolCallId: update.toolCallId,
    title: bounded(update.title ?? ''),
    toolKind: update.kind ?? 'other',
    status: update.status ?? 'pending',
    paths: (update.locations ?? []).map((l) => l.path),
    diffs,
    output,
  };
}

/**
 * A session's transcript as it streams (pure; the clock's time is passed in): message and thought chunks joined
 * into one entry while they follow each other, a tool call and its updates one entry, the latest plan, the
 * permission answers, each turn's start and end. At most TRANSCRIPT_MAX_ENTRIES entries (the oldest leave).
 */
export class Transcript {
  private readonly items: TranscriptEntry[] = [];
  private readonly tools = new Map<string, ToolEntry>();
  private turnNumber = 0;
  dropped = 0;

  constructor(restored: readonly TranscriptEntry[] = [], dropped = 0) {
    for (const entry of restored) this.push(entry);
    this.dropped += dropped;
    const last = restored[restored.length - 1];
    this.turnNumber = last === undefined ? 0 : last.turn;
  }

  get entries(): readonly TranscriptEntry[] {
    return this.items;
  }

  get turn(): number {
    return this.turnNumber;
  }

  startTurn(origin: TurnOrigin, prompt: string, at: number): TranscriptEntry {
    this.turnNumber += 1;
    return this.push({ kind: 'turn', at, turn: this.turnNumber, origin, prompt: bounded(prompt) });
  }

  endTurn(end: TurnEnd, at: number, error?: string): TranscriptEntry {
    return this.push({
      kind: 'end',
      at,
      turn: this.turnNumber,
      end,
      ...(error === undefined ? {} : { error: bounded(error) }),
    });
  }

  permission(entry: Omit<Extract<TranscriptEntry, { kind: 'permission' }>, 'kind' | 'turn'>): TranscriptEntry {
    return this.push({ kind: 'permission', turn: this.turnNumber, ...entry });
  }

  /** Applies one `session/update`; answers the entry it made or changed, or undefined when it keeps nothing of it. */
  apply(update: SessionUpdate, at: number): TranscriptEntry | undefined {
    switch (update.sessionUpdate) {
      case 'agent_message_chunk':
      case 'agent_thought_chunk':
      case 'user_message_chunk': {
        const kind =
          update.sessionUpdate === 'agent_message_chunk'
            ? 'agent'
            : update.sessionUpdate === 'agent_thought_chunk'
              ? 'thought'
              : 'user';
        const text = textOf(update.content);
        const last = this.items[this.items.length - 1];
        if (last !== undefined && last.kind === kind && last.turn === this.turnNumber) {
          const joined: TranscriptEntry = { ...last, text: bounded(last.text + text) };
          this.items[this.items.length - 1] = joined;
          return joined;
        }
        return this.push({ kind, at, turn: this.turnNumber, text: bounded(text) });
      }
      case 'tool_call':
        return this.push(newTool(update, this.turnNumber, at));
      case 'tool_call_update': {
        const known = this.tools.get(update.toolCallId);
        // An update of a call it never announced (or one that has left the transcript) starts its entry.
        if (known === undefined) return this.push(newTool(update, this.turnNumber, at));
        const { diffs, output } = diffsOf(update.content);
        const changed: Mutable<ToolEntry> = { ...known };
        if (update.title != null) changed.title = bounded(update.title);
        if (update.kind != null) changed.toolKind = update.kind;
        if (update.status != null) changed.status = update.status;
        if (update.locations != null) changed.paths = update.locations.map((l) => l.path);
        if (update.content != null) {
          changed.diffs = diffs;
          changed.output = output;
        }
        return this.replace(known, changed);
      }
      case 'plan':
        return this.push({
          kind: 'plan',
          at,
          turn: this.turnNumber,
          entries: update.entries
            .slice(0, 200)
            .map((e) => ({ content: bounded(e.content), status: e.status, priority: e.priority })),
        });
      default:
        return undefined;
    }
  }

  private replace(known: ToolEntry, changed: ToolEntry): TranscriptEntry {
    const index = this.items.lastIndexOf(known);
    if (index >= 0) this.items[index] = changed;
    this.tools.set(changed.toolCallId, changed);
    return changed;
  }

  private push(entry: TranscriptEntry): TranscriptEntry {
    this.items.push(entry);
    if (entry.kind === 'tool') this.tools.set(entry.toolCallId, entry);
    while (this.items.length > TRANSCRIPT_MAX_ENTRIES) {
      const gone = this.items.shift() as TranscriptEntry;
      if (gone.kind === 'tool' && this.tools.get(gone.toolCallId) === gone) this.tools.delete(gone.toolCallId);
      this.dropped += 1;
    }
    return entry;
  }
}
