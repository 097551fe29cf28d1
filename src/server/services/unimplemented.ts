import * as grpc from '@grpc/grpc-js';

/**
 * A handler for an RPC this coordinator does not implement yet: it answers UNIMPLEMENTED with a message
 * that says so, never a fake success.
 */
export function unimplementedHandler(
  path: string,
  definition: grpc.MethodDefinition<unknown, unknown>,
): grpc.UntypedHandleCall {
  const details = `${path} is not implemented yet by this SW4RM coordinator`;
  const error: grpc.ServiceError = Object.assign(new Error(details), {
    code: grpc.status.UNIMPLEMENTED,
    details,
    metadata: new grpc.Metadata(),
  });
  if (definition.responseStream) {
    return (call: grpc.ServerWritableStream<unknown, unknown> | grpc.ServerDuplexStream<unknown, unknown>) => {
      call.emit('error', error);
    };
  }
  return (_call: unknown, callback: grpc.sendUnaryData<unknown>) => callback(error);
}
