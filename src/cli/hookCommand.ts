// The approval hooks' command (esbuild.mjs bundles it as dist/sw4rm-hook.js; README, "Approvals for CLI agents"):
// `sw4rm-hook --cli <claude-code|gemini|copilot|codex|custom>` reads the CLI's hook input on stdin (bounded), POSTs it
// to $SW4RM_HOOK_URL?cli=<cli> with `Authorization: Bearer $SW4RM_TOKEN`, prints the coordinator's answer (the JSON the
// CLI reads) on stdout and exits 0. When the coordinator cannot be reached, refuses (401, 400…) or takes longer than
// the wait allows, it answers the CLI's "ask" itself — the CLI then asks its own user; never a silent allow — and says
// why on stderr. It exits 0 even then: for Claude Code and Copilot CLI a failing hook (other than exit 2) lets the tool run.
import * as http from 'node:http';
import * as https from 'node:https';
import { formatAnswer, MAX_HOOK_INPUT_BYTES } from '../core/toolApproval/cliHooks';
import { HOOK_CLIS, isHookCli, type HookCli } from '../core/toolApproval/model';
import { EXIT_USAGE, readBridgeEnv } from './bridgeEnv';

/** How long the command waits for the coordinator (which answers within 600 s); under the hooks' 660 s timeout. */
export const DEFAULT_HOOK_WAIT_MS = 630_000;

export interface HookConfig {
  readonly cli: HookCli;
  readonly url: URL;
  readonly token: string;
}

/** What the command line and environment say, or why they cannot be used (with the CLI, when it is known). */
export function hookConfig(
  argv: readonly string[],
  env: NodeJS.ProcessEnv,
): HookConfig | { readonly cli?: HookCli; readonly problem: string } {
  const at = argv.indexOf('--cli');
  const given = at >= 0 ? argv[at + 1] : argv.find((a) => a.startsWith('--cli='))?.slice('--cli='.length);
  if (!isHookCli(given)) {
    return {
      problem: `sw4rm-hook: --cli must be one of ${HOOK_CLIS.join(', ')}${given === undefined ? '' : `, not ${JSON.stringify(given)}`}`,
    };
  }
  const cli = given;
  const read = readBridgeEnv(env, {
    command: 'sw4rm-hook',
    urlVariable: 'SW4RM_HOOK_URL',
    missingHint: ' (an agent launched by SW4RM: Launch Agent… has both)',
  });
  if (typeof read === 'string') return { cli, problem: read };
  read.url.searchParams.set('cli', cli);
  return { cli, ...read };
}

export interface HookResult {
  readonly stdout: string;
  readonly stderr: string;
  readonly exitCode: number;
}

/** The CLI's "ask" (for a CLI without one, its deny saying nobody decided), with the reason on stderr. */
export function askAnswer(cli: HookCli, reason: string): HookResult {
  const answer = formatAnswer(cli, { decision: 'ask', reason: `SW4RM could not decide: ${reason}` }, 'hook_fallback');
  return {
    stdout: `${JSON.stringify(answer.stdout)}\n`,
    stderr: `sw4rm-hook: ${reason}; answering "ask"\n`,
    exitCode: answer.exitCode,
  };
}

/** POSTs the hook input and turns the coordinator's answer (or its absence) into what the CLI reads. */
export async function runHook(config: HookConfig, input: string, waitMs = DEFAULT_HOOK_WAIT_MS): Promise<HookResult> {
  let response: { status: number; body: string };
  try {
    response = await post(config.url, config.token, input, waitMs);
  } catch (err) {
    return askAnswer(
      config.cli,
      `the coordinator could not be reached at ${config.url.origin} (${err instanceof Error ? err.message : String(err)})`,
    );
  }
  let body: unknown;
  try {
    body = JSON.parse(response.body);
  } catch {
    body = undefined;
  }
  if (response.status !== 200) {
    const error = (body as { error?: { code?: unknown; message?: unknown } } | undefined)?.error;
    const detail =
      error && typeof error.message === 'string'
        ? `${String(error.code)}: ${error.message}`
        : response.body.slice(0, 300);
    return askAnswer(
      config.cli,
      `the coordinator refused the hook (HTTP ${response.status}${detail ? `, ${detail}` : ''})`,
    );
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    return askAnswer(config.cli, "the coordinator's answer is not a JSON object");
  }
  return { stdout: `${JSON.stringify(body)}\n`, stderr: '', exitCode: 0 };
}

/** node:http, not fetch: fetch gives up on a response's headers after 300 s, and a person may take 600. */
function post(url: URL, token: string, body: string, waitMs: number): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const request = (url.protocol === 'https:' ? https : http).request(
      url,
      {
        method: 'POST',
        headers: {
          'Content-Type': 'application/json',
          'Content-Length': Buffer.byteLength(body),
          Authorization: `Bearer ${token}`,
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size > 1024 * 1024) {
            request.destroy(new Error('the answer is larger than 1 MiB'));
            return;
          }
          chunks.push(chunk);
        });
        res.on('end', () => {
          clearTimeout(timer);
          resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') });
        });
        res.on('error', (err) => {
          clearTimeout(timer);
          reject(err);
        });
      },
    );
    const timer = setTimeout(
      () => request.destroy(new Error(`no answer within ${Math.round(waitMs / 1000)} s`)),
      waitMs,
    );
    request.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    request.end(body);
  });
}

/** stdin, at most MAX_HOOK_INPUT_BYTES (more: undefined). */
export function readStdin(stream: NodeJS.ReadableStream = process.stdin): Promise<string | undefined> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let over = false;
    stream.on('data', (chunk: Buffer | string) => {
      const buffer = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
      size += buffer.length;
      if (size > MAX_HOOK_INPUT_BYTES) over = true;
      else chunks.push(buffer);
    });
    stream.on('end', () => resolve(over ? undefined : Buffer.concat(chunks).toString('utf8')));
    stream.on('error', reject);
  });
}

async function main(): Promise<void> {
  const config = hookConfig(process.argv.slice(2), process.env);
  let result: HookResult;
  if ('problem' in config) {
    result = config.cli
      ? askAnswer(config.cli, config.problem.replace(/^sw4rm-hook: /, ''))
      : { stdout: '', stderr: `${config.problem}\n`, exitCode: EXIT_USAGE };
  } else {
    const input = await readStdin();
    result =
      input === undefined
        ? askAnswer(config.cli, `the hook input is larger than ${MAX_HOOK_INPUT_BYTES} bytes`)
        : await runHook(config, input);
  }
  if (result.stderr) process.stderr.write(result.stderr);
  process.stdout.write(result.stdout, () => {
    process.exitCode = result.exitCode;
  });
}

if (require.main === module) {
  main().catch((err: unknown) => {
    process.stderr.write(`sw4rm-hook: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exitCode = EXIT_USAGE;
  });
}
