/**
 * The baseline for the router benchmark: a grpc-js server serving sw4rm.router.RouterService from the
 * canonical protos with no coordination at all. No validation, no storage, no acknowledgement tracking beyond
 * the one map that ACK routing needs.
 *
 * Usage: node out/bench/bareServer.js [--port <port>]. It prints `listening on 127.0.0.1:<port>` when ready.
 */
import * as grpc from '@grpc/grpc-js';
import { serviceDefinition } from '../src/server/protos';
import { SERVER_CHANNEL_OPTIONS } from '../src/server/server';
import { canonicalProtos, Envelope, parseAck, SendMessageResponse, StreamItem } from './protocol';

interface Inbox {
  readonly call: grpc.ServerWritableStream<{ agent_id: string }, StreamItem>;
  seq: number;
}

export function createBareRouter(): grpc.Server {
  const inboxes = new Map<string, Inbox>();
  const producerOf = new Map<string, string>();
  // The coordinator's own channel options, so that both servers run with the same limits.
  const server = new grpc.Server(SERVER_CHANNEL_OPTIONS);

  server.addService(serviceDefinition(canonicalProtos().packageDefinition, 'sw4rm.router.RouterService'), {
    StreamIncoming(call: grpc.ServerWritableStream<{ agent_id: string }, StreamItem>): void {
      const agentId = call.request.agent_id;
      const previous = inboxes.get(agentId);
      const inbox: Inbox = { call, seq: previous?.seq ?? 0 };
      inboxes.set(agentId, inbox);
      previous?.call.end();
      call.sendMetadata(new grpc.Metadata());
      call.on('cancelled', () => {
        if (inboxes.get(agentId) === inbox) inboxes.delete(agentId);
      });
    },

    SendMessage(
      call: grpc.ServerUnaryCall<{ msg: Envelope | null }, SendMessageResponse>,
      callback: grpc.sendUnaryData<SendMessageResponse>,
    ): void {
      const msg = call.request.msg;
      if (msg === null) {
        callback(null, { accepted: false, reason: 'VALIDATION_ERROR: no envelope' });
        return;
      }
      let to: string | undefined = call.metadata.get('sw4rm-to')[0]?.toString();
      if (!to && msg.message_type === 'ACKNOWLEDGEMENT') {
        const ackFor = parseAck(msg.payload)?.ack_for_message_id;
        if (ackFor !== undefined) {
          to = producerOf.get(ackFor);
          producerOf.delete(ackFor);
        }
      }
      const inbox = to === undefined ? undefined : inboxes.get(to);
      if (inbox === undefined) {
        callback(null, { accepted: false, reason: `NO_ROUTE: no stream for '${to ?? ''}'` });
        return;
      }
      if (msg.message_type !== 'ACKNOWLEDGEMENT') producerOf.set(msg.message_id, msg.producer_id);
      inbox.seq += 1;
      inbox.call.write({ msg, seq: String(inbox.seq) });
      callback(null, { accepted: true, reason: '' });
    },

    AckDelivery(
      _call: grpc.ServerUnaryCall<unknown, { recorded: boolean }>,
      callback: grpc.sendUnaryData<{ recorded: boolean }>,
    ): void {
      callback(null, { recorded: true });
    },
  });
  return server;
}

function main(): void {
  const portFlag = process.argv.indexOf('--port');
  const port = portFlag >= 0 ? Number(process.argv[portFlag + 1]) : 0;
  const server = createBareRouter();
  server.bindAsync(`127.0.0.1:${port}`, grpc.ServerCredentials.createInsecure(), (err, bound) => {
    if (err) {
      process.stderr.write(`bare router: ${err.message}\n`);
      process.exit(1);
    }
    process.stdout.write(`listening on 127.0.0.1:${bound}\n`);
  });
  const stop = (): void => {
    server.forceShutdown();
    process.exit(0);
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

if (require.main === module) main();
