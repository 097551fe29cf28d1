/* eslint-disable @typescript-eslint/no-explicit-any -- the canonical protos are loaded at run time (proto-loader): their clients are untyped */
/**
 * An agent's worktree binding through sw4rm.worktree.WorktreeService (RFC §16), one command per call:
 *
 *   npm run example:worktree -- bind <agent-id> <repo-id> [worktree-id]   # creates the home worktree on first use
 *   npm run example:worktree -- status <agent-id>
 *   npm run example:worktree -- switch <agent-id> <worktree-id>           # waits for the operator's decision
 *   npm run example:worktree -- unbind <agent-id>                          # the worktree stays
 *
 * Environment: SW4RM_WORKTREE_ADDR and SW4RM_TOKEN as SW4RM: Copy Agent Environment (or `npm start`) prints them; a
 * token of `sw4rm-coordinator credentials --agent <agent-id>` acts only as that agent. It prints each answer as JSON
 * and exits 0, or 1 with the gRPC status (its details start with the RFC error code).
 */
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import * as path from 'node:path';

const [command, agentId, ...rest] = process.argv.slice(2);
const usage =
  'usage: npm run example:worktree -- bind <agent-id> <repo-id> [worktree-id] | status <agent-id> | switch <agent-id> <worktree-id> | unbind <agent-id>';
if (!command || !agentId) {
  console.error(usage);
  process.exit(2);
}
const address = process.env.SW4RM_WORKTREE_ADDR || process.env.SW4RM_REGISTRY_ADDR;
if (!address) {
  console.error(
    'SW4RM_WORKTREE_ADDR is not set. Copy the agent environment from the editor (SW4RM: Copy Agent Environment) or from `npm start`.',
  );
  process.exit(2);
}

const packages = grpc.loadPackageDefinition(
  protoLoader.loadSync(['worktree.proto'], {
    includeDirs: [process.env.SW4RM_PROTOS_DIR || path.join(__dirname, '..', 'protos')],
    keepCase: true,
    longs: String,
    enums: String,
    defaults: true,
    oneofs: true,
  }),
) as any;
const client: grpc.Client = new packages.sw4rm.worktree.WorktreeService(address, grpc.credentials.createInsecure());

function rpc<T>(method: string, request: unknown): Promise<T> {
  const md = new grpc.Metadata();
  if (process.env.SW4RM_TOKEN) md.set('authorization', `Bearer ${process.env.SW4RM_TOKEN}`);
  return new Promise((resolve, reject) => {
    (client as any)[method](request, md, { deadline: Date.now() + 10_000 }, (err: Error | null, res: T) =>
      err ? reject(err) : resolve(res),
    );
  });
}

interface Status {
  repo_id: string;
  worktree_id: string;
  state: string;
}

async function main(): Promise<void> {
  switch (command) {
    case 'bind': {
      const [repoId, worktreeId = ''] = rest;
      if (!repoId) throw new Error(usage);
      console.log(JSON.stringify(await rpc('Bind', { agent_id: agentId, repo_id: repoId, worktree_id: worktreeId })));
      console.log(JSON.stringify(await rpc<Status>('Status', { agent_id: agentId })));
      return;
    }
    case 'status':
      console.log(JSON.stringify(await rpc<Status>('Status', { agent_id: agentId })));
      return;
    case 'switch': {
      const [target] = rest;
      if (!target) throw new Error(usage);
      let status = await rpc<Status>('RequestSwitch', {
        agent_id: agentId,
        target_worktree_id: target,
        requires_hitl: true,
      });
      console.log(JSON.stringify(status));
      console.error('Waiting for the operator: approve or deny the WORKTREE_OVERRIDE request in the Approvals view.');
      while (status.state === 'SWITCH_PENDING') {
        await new Promise((resolve) => setTimeout(resolve, 1_000));
        status = await rpc<Status>('Status', { agent_id: agentId });
      }
      console.log(JSON.stringify(status));
      return;
    }
    case 'unbind':
      console.log(JSON.stringify(await rpc('Unbind', { agent_id: agentId })));
      return;
    default:
      throw new Error(usage);
  }
}

main().then(
  () => {
    client.close();
  },
  (err: grpc.ServiceError | Error) => {
    console.error('code' in err ? `${grpc.status[err.code]}: ${err.details}` : err.message);
    client.close();
    process.exitCode = 1;
  },
);
