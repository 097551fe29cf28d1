import { HookInputError } from '../../core/toolApproval/cliHooks';
import { HOOK_CLIS, isHookCli } from '../../core/toolApproval/model';
import { HOOK_PATH } from './bridgeServer';
import { BridgeToolError, type BridgeHttpRoute } from './model';
import { mcpErrorOf } from './tools/errors';

/**
 * POST `/hooks/pre-tool-use?cli=claude-code|gemini|copilot|codex|custom`: the body is the CLI's hook input as the CLI
 * wrote it on the hook command's stdin; the answer (200) is the JSON the CLI reads on stdout, decided by
 * `coordinator.toolApprovals` for the authenticated agent (the bridge server refused anything without an agent
 * credential with 401). It may wait for a person up to 600 s; the request closing withdraws the question. An unknown
 * `cli` or an unreadable hook input is 400 VALIDATION_ERROR (the hook command then answers the CLI "ask").
 */
export const preToolUseRoute: BridgeHttpRoute = {
  method: 'POST',
  path: HOOK_PATH,
  // parseHookInput parses the text once, within its own bounds: a parsed body would be stringified again to check them.
  bodyAsText: true,
  async handle(request, { coordinator, caller, ctx, signal }) {
    const cli = request.query.get('cli');
    if (!isHookCli(cli)) {
      throw new BridgeToolError(
        'VALIDATION_ERROR',
        `cli must be one of ${HOOK_CLIS.join(', ')}${cli === null ? ' (the query has no cli)' : `, not ${JSON.stringify(cli.slice(0, 64))}`}`,
      );
    }
    try {
      const answer = await coordinator.toolApprovals.decide(cli, request.body, caller.agentId, ctx, signal);
      return { status: 200, body: answer.stdout };
    } catch (err) {
      if (err instanceof HookInputError) throw mcpErrorOf(err);
      throw err;
    }
  },
};

export const HOOK_ROUTES: readonly BridgeHttpRoute[] = [preToolUseRoute];
