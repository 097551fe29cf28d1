import type * as grpc from '@grpc/grpc-js';
import type * as http2 from 'node:http2';
import { newHttp2Servers } from './http2Servers';

/**
 * Node's HTTP/2 layer keeps only the first of several `authorization` fields (a single-value field), so a request
 * carrying two would be authenticated by the first one alone. Before grpc-js reads a request's headers, this
 * puts every value back (as an array, which grpc-js turns into several metadata values), so that the auth
 * interceptor sees both and refuses the call UNAUTHENTICATED.
 *
 * grpc-js offers no public handle on its HTTP/2 servers: this reads its `http2Servers` field after binding. If a
 * grpc-js release renames it, this throws at start-up rather than silently accepting two headers
 * (test/integration/auth.integration.test.ts sends two over raw HTTP/2).
 */
export function exposeDuplicateAuthorization(server: grpc.Server): void {
  for (const http2Server of newHttp2Servers(server, marked, 'duplicate authorization headers cannot be detected')) {
    http2Server.prependListener(
      'stream',
      (_stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders, _flags: number, rawHeaders: string[]) => {
        let values: string[] | undefined;
        let count = 0;
        for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
          if (rawHeaders[i] === 'authorization' && ++count > 1) values = [];
        }
        if (values === undefined) return;
        for (let i = 0; i + 1 < rawHeaders.length; i += 2)
          if (rawHeaders[i] === 'authorization') values.push(rawHeaders[i + 1]);
        (headers as Record<string, unknown>).authorization = values;
      },
    );
  }
}

const marked = new WeakSet<object>();
