import { strict as assert } from 'node:assert';
import * as grpc from '@grpc/grpc-js';
import { CoreError, SwarmError, type ErrorKind } from '../../src/core/kernel/errors';
import { ActivityBufferFullError } from '../../src/core/activity/model';
import { ActivityEntryInvalidError } from '../../src/core/activity/activityBuffer';
import { CoordinatorApiError } from '../../src/core/api/coordinatorApi';
import { CredentialError } from '../../src/core/credentials/credentials';
import { HitlStateError } from '../../src/core/hitl/hitlService';
import { HitlRequestError } from '../../src/core/hitl/request';
import { LaunchError } from '../../src/core/launch/launches';
import { WiringError } from '../../src/core/launch/wiring';
import { NegotiationError } from '../../src/core/policy/speaker';
import { HookInputError } from '../../src/core/toolApproval/cliHooks';
import { ToolCallError } from '../../src/core/tools/model';
import { PathError } from '../../src/core/workflow/paths';
import { BindingRequestError, BindingStateError } from '../../src/core/worktree/bindings';
import { ConfinedGitLimitError } from '../../src/core/worktree/confinedGit';
import { UntrustedGitDirError } from '../../src/core/worktree/gitDirs';
import { MergeRefusedError } from '../../src/core/worktree/mergeBack';
import { WorktreeOperationError } from '../../src/core/worktree/operations';
import { SetupConfigError } from '../../src/core/worktree/setup';
import { InvalidWorktreeIdError } from '../../src/core/worktree/snapshots';
import { WorktreeRefusedError } from '../../src/core/worktree/worktrees';
import { statusOf } from '../../src/server/errorStatus';
import { asBridgeError, mcpErrorOf } from '../../src/server/bridge/tools/errors';
import { BridgeToolError } from '../../src/server/bridge/model';
import { toolErrorStatus } from '../../src/server/services/toolService';

/** Every kind and its status, written out here (the Record makes a new kind without a row a compile error). */
const EXPECTED: Readonly<Record<ErrorKind, grpc.status>> = {
  invalid: grpc.status.INVALID_ARGUMENT,
  not_found: grpc.status.NOT_FOUND,
  permission: grpc.status.PERMISSION_DENIED,
  precondition: grpc.status.FAILED_PRECONDITION,
  exists: grpc.status.ALREADY_EXISTS,
  exhausted: grpc.status.RESOURCE_EXHAUSTED,
  deadline: grpc.status.DEADLINE_EXCEEDED,
  unavailable: grpc.status.UNAVAILABLE,
  unimplemented: grpc.status.UNIMPLEMENTED,
  cancelled: grpc.status.CANCELLED,
  internal: grpc.status.INTERNAL,
};

describe('one error type, one mapping to a gRPC status (statusOf) and to an MCP error (mcpErrorOf)', () => {
  for (const [kind, status] of Object.entries(EXPECTED) as Array<[ErrorKind, grpc.status]>) {
    it(`${kind} → ${grpc.status[status]}, details "<SW4RM code>: <message>"`, () => {
      const answer = statusOf(new CoreError(kind, 'SOME_CODE', `a ${kind} refusal`));
      assert.equal(answer.code, status);
      assert.equal(answer.details, `SOME_CODE: a ${kind} refusal`);
      assert.ok(answer.metadata instanceof grpc.Metadata);
    });
  }

  it('anything that is not a SwarmError is INTERNAL "INTERNAL_ERROR: <message>"', () => {
    assert.deepEqual(
      { code: statusOf(new Error('disk on fire')).code, details: statusOf(new Error('disk on fire')).details },
      { code: grpc.status.INTERNAL, details: 'INTERNAL_ERROR: disk on fire' },
    );
    assert.equal(statusOf('a string').details, 'INTERNAL_ERROR: a string');
    assert.equal(statusOf(undefined).code, grpc.status.INTERNAL);
  });

  it("each core area's refusal answers the status and details its service answered before the one mapping", () => {
    const cases: Array<[SwarmError, grpc.status, string]> = [
      [new NegotiationError('exists', 'VALIDATION_ERROR', 'dup'), grpc.status.ALREADY_EXISTS, 'VALIDATION_ERROR: dup'],
      [
        new NegotiationError('permission', 'PERMISSION_DENIED', 'no'),
        grpc.status.PERMISSION_DENIED,
        'PERMISSION_DENIED: no',
      ],
      [new HitlRequestError('PERMISSION_DENIED', 'no'), grpc.status.PERMISSION_DENIED, 'PERMISSION_DENIED: no'],
      [new HitlRequestError('OVERSIZE_PAYLOAD', 'big'), grpc.status.RESOURCE_EXHAUSTED, 'OVERSIZE_PAYLOAD: big'],
      [new HitlRequestError('BUFFER_FULL', 'full'), grpc.status.RESOURCE_EXHAUSTED, 'BUFFER_FULL: full'],
      [new HitlRequestError('VALIDATION_ERROR', 'bad'), grpc.status.INVALID_ARGUMENT, 'VALIDATION_ERROR: bad'],
      [new HitlStateError('not_found', 'gone'), grpc.status.FAILED_PRECONDITION, 'VALIDATION_ERROR: gone'],
      [new HitlStateError('settled', 'done'), grpc.status.FAILED_PRECONDITION, 'VALIDATION_ERROR: done'],
      [
        new BindingRequestError('invalid_argument', 'VALIDATION_ERROR', 'bad'),
        grpc.status.INVALID_ARGUMENT,
        'VALIDATION_ERROR: bad',
      ],
      [new BindingRequestError('not_found', 'NO_ROUTE', 'none'), grpc.status.NOT_FOUND, 'NO_ROUTE: none'],
      [
        new BindingRequestError('permission_denied', 'PERMISSION_DENIED', 'no'),
        grpc.status.PERMISSION_DENIED,
        'PERMISSION_DENIED: no',
      ],
      [
        new BindingRequestError('failed_precondition', 'WORKTREE_BUSY', 'busy'),
        grpc.status.FAILED_PRECONDITION,
        'WORKTREE_BUSY: busy',
      ],
      [
        new BindingStateError('UNBOUND', 'UNBIND', 'a1'),
        grpc.status.FAILED_PRECONDITION,
        "VALIDATION_ERROR: UNBIND is not allowed in state UNBOUND (agent 'a1'); it is allowed from BIND_FAILED or BOUND_HOME or BOUND_NON_HOME",
      ],
      [
        new ToolCallError('permission_denied', 'permission_denied', 'no'),
        grpc.status.PERMISSION_DENIED,
        'permission_denied: no',
      ],
      [new ToolCallError('cancelled', 'CANCELLED', 'gone'), grpc.status.CANCELLED, 'CANCELLED: gone'],
      [new ToolCallError('already_exists', 'ALREADY_EXISTS', 'dup'), grpc.status.ALREADY_EXISTS, 'ALREADY_EXISTS: dup'],
      [
        new ToolCallError('deadline_exceeded', 'TOOL_TIMEOUT', 'late'),
        grpc.status.DEADLINE_EXCEEDED,
        'TOOL_TIMEOUT: late',
      ],
      [new ActivityBufferFullError('agent', 100, 'full'), grpc.status.RESOURCE_EXHAUSTED, 'BUFFER_FULL: full'],
      [new CredentialError('invalid', 'bad'), grpc.status.INVALID_ARGUMENT, 'VALIDATION_ERROR: bad'],
      [new CredentialError('not_found', 'none'), grpc.status.NOT_FOUND, 'NOT_FOUND: none'],
      [new LaunchError('refused', 'busy'), grpc.status.FAILED_PRECONDITION, 'FAILED_PRECONDITION: busy'],
      [new LaunchError('not_found', 'none'), grpc.status.NOT_FOUND, 'NOT_FOUND: none'],
      [new WiringError('tracked'), grpc.status.FAILED_PRECONDITION, 'FAILED_PRECONDITION: tracked'],
      [
        new WorktreeOperationError('refused', 'bound', 'bound'),
        grpc.status.FAILED_PRECONDITION,
        'FAILED_PRECONDITION: bound',
      ],
      [new WorktreeRefusedError('bad_base', 'no base'), grpc.status.INVALID_ARGUMENT, 'VALIDATION_ERROR: no base'],
      [new WorktreeRefusedError('not_found', 'none'), grpc.status.NOT_FOUND, 'NOT_FOUND: none'],
      [new MergeRefusedError('target_dirty', 'dirty'), grpc.status.FAILED_PRECONDITION, 'FAILED_PRECONDITION: dirty'],
      [
        new InvalidWorktreeIdError('..'),
        grpc.status.INVALID_ARGUMENT,
        "VALIDATION_ERROR: '..' is not a worktree id (letters, digits, '.', '_', '-'; at most 64; no '..', not ending '.lock')",
      ],
      [new SetupConfigError('x'), grpc.status.INVALID_ARGUMENT, 'VALIDATION_ERROR: worktree setup configuration: x'],
      [
        new UntrustedGitDirError('a link'),
        grpc.status.PERMISSION_DENIED,
        "PERMISSION_DENIED: the worktree's .git is not believed: a link",
      ],
      [new ConfinedGitLimitError('too much'), grpc.status.RESOURCE_EXHAUSTED, 'too_large: too much'],
      [new PathError('bad path'), grpc.status.INVALID_ARGUMENT, 'VALIDATION_ERROR: bad path'],
      [new HookInputError('bad input'), grpc.status.INVALID_ARGUMENT, 'VALIDATION_ERROR: bad input'],
      [new CoordinatorApiError('settled', 'done'), grpc.status.FAILED_PRECONDITION, 'VALIDATION_ERROR: done'],
      [new CoordinatorApiError('stopped', 'stopped'), grpc.status.UNAVAILABLE, 'AGENT_UNAVAILABLE: stopped'],
      [new CoordinatorApiError('refused', 'bound', 'bound'), grpc.status.FAILED_PRECONDITION, 'bound: bound'],
    ];
    for (const [err, status, details] of cases) {
      assert.ok(err instanceof SwarmError, err.name);
      const answer = statusOf(err);
      assert.deepEqual([answer.code, answer.details], [status, details], `${err.name}: ${err.message}`);
    }
  });

  it("the tool service's own case: UNIMPLEMENTED answers the message alone", () => {
    const answer = toolErrorStatus(
      new ToolCallError('unimplemented', 'UNSUPPORTED_MESSAGE_TYPE', 'not implemented yet'),
    );
    assert.deepEqual([answer.code, answer.details], [grpc.status.UNIMPLEMENTED, 'not implemented yet']);
    const refused = toolErrorStatus(new ToolCallError('not_found', 'not_found', 'no tool'));
    assert.deepEqual([refused.code, refused.details], [grpc.status.NOT_FOUND, 'not_found: no tool']);
  });

  it('mcpErrorOf: the SW4RM code and message; an area code is answered by its kind with the code in the message', () => {
    const plain = mcpErrorOf(new NegotiationError('invalid', 'VALIDATION_ERROR', 'bad'));
    assert.deepEqual([plain.code, plain.message, plain.retryable], ['VALIDATION_ERROR', 'bad', false]);
    const full = mcpErrorOf(new ActivityBufferFullError('coordinator', 10, 'full'));
    assert.deepEqual([full.code, full.message, full.retryable], ['BUFFER_FULL', 'full', true]);
    const own = mcpErrorOf(new ToolCallError('failed_precondition', 'worktree_not_bound', 'bind first'));
    assert.deepEqual([own.code, own.message], ['FAILED_PRECONDITION', 'worktree_not_bound: bind first']);
    const big = mcpErrorOf(new ConfinedGitLimitError('too much'));
    assert.deepEqual([big.code, big.message, big.retryable], ['BUFFER_FULL', 'too_large: too much', true]);
  });

  it("asBridgeError: every SwarmError through mcpErrorOf, the bridge's own cases beside it, anything else as it is", () => {
    const notFound = asBridgeError(new HitlStateError('not_found', 'gone')) as BridgeToolError;
    assert.deepEqual([notFound.code, notFound.message], ['NOT_FOUND', 'gone']);
    const settled = asBridgeError(new HitlStateError('settled', 'done')) as BridgeToolError;
    assert.deepEqual([settled.code, settled.message], ['FAILED_PRECONDITION', 'done']);
    const invalid = asBridgeError(new ActivityEntryInvalidError('task_id too long')) as BridgeToolError;
    assert.deepEqual([invalid.code, invalid.message], ['VALIDATION_ERROR', 'task_id too long']);
    const hitl = asBridgeError(new HitlRequestError('OVERSIZE_PAYLOAD', 'big')) as BridgeToolError;
    assert.deepEqual([hitl.code, hitl.message], ['OVERSIZE_PAYLOAD', 'big']);
    const fault = new Error('disk on fire');
    assert.equal(asBridgeError(fault), fault);
  });
});
