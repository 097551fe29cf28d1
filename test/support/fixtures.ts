import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import type { DescriptorInput } from '../../src/core/registry/descriptor';

/** A descriptor every rule accepts, with the given id. */
export function validDescriptor(agentId: string, overrides: Partial<DescriptorInput> = {}): DescriptorInput {
  return {
    agentId,
    name: `Agent ${agentId}`,
    description: 'Writes and reviews code in one worktree.',
    capabilities: ['code.write', 'code.review'],
    communicationClass: 'STANDARD',
    modalitiesSupported: ['application/json', 'text/plain; charset=utf-8'],
    reasoningConnectors: ['http://127.0.0.1:8080/infer'],
    ...overrides,
  };
}

/** The same descriptor as registry.proto's AgentDescriptor message (keepCase field names, enums as strings). */
export function descriptorMessage(agentId: string, overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    agent_id: agentId,
    name: `Agent ${agentId}`,
    description: 'Writes and reviews code in one worktree.',
    capabilities: ['code.write', 'code.review'],
    communication_class: 'STANDARD',
    modalities_supported: ['application/json'],
    reasoning_connectors: ['http://127.0.0.1:8080/infer'],
    ...overrides,
  };
}

/** Writes 64 KiB of random bytes (not an SQLite file) and answers them, to compare later. */
export function writeGarbage(file: string): Buffer {
  const bytes = randomBytes(64 * 1024);
  fs.writeFileSync(file, bytes);
  return bytes;
}

/** Content and modification time of a file, to show it was left untouched. */
export function fingerprint(file: string): { bytes: Buffer; mtimeMs: number; size: number } {
  const stat = fs.statSync(file);
  return { bytes: fs.readFileSync(file), mtimeMs: stat.mtimeMs, size: stat.size };
}
