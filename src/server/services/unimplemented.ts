import * as grpc from '@grpc/grpc-js';

/** Which later piece of work brings each not-yet-built service, so the error tells the caller. */
const ARRIVES_WITH: Readonly<Record<string, string>> = {
  'sw4rm.hitl.HitlService': 'human-in-the-loop approvals',
};

/**
 * A handler for an RPC this coordinator does not implement yet: it answers UNIMPLEMENTED with a message
 * that says so, never a fake success.
 */
export function unimplementedHandler(path: string, definition: grpc.MethodDefinition<unknown, unknown>): grpc.UntypedHandleCall {
  const service = path.split('/')[1] ?? path;
  const arrives = ARRIVES_WITH[service];
  const details = `${path} is not implemented yet by this SW4RM coordinator${arrives ? ` (it arrives with ${arrives})` : ''}`;
  const error: grpc.ServiceError = Object.assign(new Error(details), { code: grpc.status.UNIMPLEMENTED, details, metadata: new grpc.Metadata() });
  if (definition.responseStream) {
    return (call: grpc.ServerWritableStream<unknown, unknown> | grpc.ServerDuplexStream<unknown, unknown>) => {
      call.emit('error', error);
    };
  }
  return (_call: unknown, callback: grpc.sendUnaryData<unknown>) => callback(error);
}
