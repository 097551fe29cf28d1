import type * as grpc from '@grpc/grpc-js';
import type * as http2 from 'node:http2';

/**
 * The HTTP/2 servers behind a bound grpc-js server that `hook` has not seen yet. grpc-js offers no public handle on
 * them, so this reads its `http2Servers` field; if a grpc-js release renames it, this throws at start-up (naming
 * `what` could not be done) rather than silently leaving a protection off. grpc-js is pinned in package.json.
 */
export function newHttp2Servers(server: grpc.Server, seen: WeakSet<object>, what: string): http2.Http2Server[] {
  const servers = (server as unknown as { http2Servers?: Map<http2.Http2Server, unknown> }).http2Servers;
  if (!(servers instanceof Map)) throw new Error(`grpc-js no longer has Server.http2Servers: ${what}`);
  const fresh = [...servers.keys()].filter((s) => !seen.has(s));
  for (const s of fresh) seen.add(s);
  return fresh;
}
