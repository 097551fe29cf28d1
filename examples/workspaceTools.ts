/* eslint-disable @typescript-eslint/no-explicit-any -- the canonical protos are loaded at run time (proto-loader): their clients are untyped */
/**
 * The built-in `workspace` tools through sw4rm.tool.ToolService (RFC §18), as an agent calls them, one command per run:
 *
 *   npm run example:tools -- describe                                   # ConnectorService.DescribeTools {provider_id: "workspace"}
 *   npm run example:tools -- demo <agent-id> <repo-id>                  # Bind, then write_file, read_file, list_dir, search,
 *                                                                       # git_status, git_diff and git_commit in its worktree
 *   npm run example:tools -- call <agent-id> <tool> '<json args>'       # any one tool, e.g. read_file '{"path":"README.md"}'
 *
 * Environment: SW4RM_TOOL_ADDR (SW4RM_CONNECTOR_ADDR, SW4RM_WORKTREE_ADDR) and SW4RM_TOKEN as SW4RM: Copy Agent
 * Environment (or `npm start`) prints them. The caller is the agent its token names; with the operator or an
 * enrolment token (or auth none) it is the agent named in metadata `sw4rm-agent-id`, which this example always sends.
 * It prints each answer as JSON and exits 0, or 1 with the gRPC status (its details start with the error code).
 */
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import * as path from 'node:path';

const [command, agentId = '', ...rest] = process.argv.slice(2);
const usage =
  "usage: npm run example:tools -- describe | demo <agent-id> <repo-id> | call <agent-id> <tool> '<json args>'";
const toolAddress = process.env.SW4RM_TOOL_ADDR || process.env.SW4RM_REGISTRY_ADDR;
if (!command || !toolAddress) {
  console.error(
    toolAddress
      ? usage
      : 'SW4RM_TOOL_ADDR is not set. Copy the agent environment from the editor (SW4RM: Copy Agent Environment) or from `npm start`.',
  );
  process.exit(2);
}

const packages = grpc.loadPackageDefinition(
  protoLoader.loadSync(['tool.proto', 'connector.proto', 'worktree.proto'], {
    includeDirs: [process.env.SW4RM_PROTOS_DIR || path.join(__dirname, '..', 'protos')],
    keepCase: true,
    longs: String,
    enums: String,
    defaults: true,
    oneofs: true,
  }),
) as any;
const insecure = grpc.credentials.createInsecure();
const tools: grpc.Client = new packages.sw4rm.tool.ToolService(toolAddress, insecure);
const connector: grpc.Client = new packages.sw4rm.connector.ConnectorService(
  process.env.SW4RM_CONNECTOR_ADDR || toolAddress,
  insecure,
);
const worktrees: grpc.Client = new packages.sw4rm.worktree.WorktreeService(
  process.env.SW4RM_WORKTREE_ADDR || toolAddress,
  insecure,
);

function rpc<T>(client: grpc.Client, method: string, request: unknown): Promise<T> {
  const md = new grpc.Metadata();
  if (process.env.SW4RM_TOKEN) md.set('authorization', `Bearer ${process.env.SW4RM_TOKEN}`);
  if (agentId) md.set('sw4rm-agent-id', agentId);
  return new Promise((resolve, reject) => {
    (client as any)[method](request, md, { deadline: Date.now() + 30_000 }, (err: Error | null, res: T) =>
      err ? reject(err) : resolve(res),
    );
  });
}

interface ToolFrame {
  call_id: string;
  final: boolean;
  content_type: string;
  data: Buffer;
}

/** One workspace tool call: args as JSON bytes, the result is the final frame's JSON data. */
async function callTool(tool: string, args: unknown): Promise<unknown> {
  const frame = await rpc<ToolFrame>(tools, 'Call', {
    call_id: `example-${Date.now()}`,
    provider_id: 'workspace',
    tool_name: tool,
    content_type: 'application/json',
    args: Buffer.from(JSON.stringify(args), 'utf8'),
  });
  const result: unknown = JSON.parse(frame.data.toString('utf8'));
  console.log(`${tool} → ${JSON.stringify(result)}`);
  return result;
}

async function main(): Promise<void> {
  switch (command) {
    case 'describe': {
      const { tools: described } = await rpc<{ tools: Array<Record<string, unknown>> }>(connector, 'DescribeTools', {
        provider_id: 'workspace',
      });
      for (const tool of described) {
        console.log(
          JSON.stringify({
            ...tool,
            input_schema: JSON.parse(tool.input_schema as string),
            output_schema: JSON.parse(tool.output_schema as string),
          }),
        );
      }
      return;
    }
    case 'demo': {
      const [repoId] = rest;
      if (!agentId || !repoId) throw new Error(usage);
      console.log(`Bind → ${JSON.stringify(await rpc(worktrees, 'Bind', { agent_id: agentId, repo_id: repoId }))}`);
      await callTool('write_file', {
        path: 'notes/hello.md',
        content: `# Hello from ${agentId}\n`,
        create_parents: true,
      });
      await callTool('read_file', { path: 'notes/hello.md' });
      await callTool('list_dir', { path: '' });
      await callTool('search', { query: 'Hello', max_results: 10 });
      await callTool('git_status', {});
      await callTool('git_diff', {});
      await callTool('git_commit', { message: `Notes from ${agentId}`, paths: ['notes/hello.md'] });
      try {
        await callTool('read_file', { path: '../../etc/passwd' });
      } catch (err) {
        console.log(
          `read_file ../../etc/passwd → ${grpc.status[(err as grpc.ServiceError).code]}: ${(err as grpc.ServiceError).details}`,
        );
      }
      return;
    }
    case 'call': {
      const [tool, json = '{}'] = rest;
      if (!agentId || !tool) throw new Error(usage);
      await callTool(tool, JSON.parse(json));
      return;
    }
    default:
      throw new Error(usage);
  }
}

main().then(
  () => {
    for (const client of [tools, connector, worktrees]) client.close();
  },
  (err: grpc.ServiceError | Error) => {
    console.error('code' in err ? `${grpc.status[err.code]}: ${err.details}` : err.message);
    for (const client of [tools, connector, worktrees]) client.close();
    process.exitCode = 1;
  },
);
