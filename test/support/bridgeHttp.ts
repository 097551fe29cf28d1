/* eslint-disable @typescript-eslint/no-explicit-any -- the bridge answers untyped JSON the tests read field by field */
import * as http from 'node:http';

/**
 * A hook POST as sw4rm-hook.js sends it, answered with its status and JSON body; `ownConnection` sends it on a
 * connection of its own (no keep-alive agent), as a flood test needs.
 */
export function hookPost(
  port: number,
  token: string,
  body: unknown,
  ownConnection = false,
): Promise<{ status: number; json: Record<string, any> }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        method: 'POST',
        path: '/hooks/pre-tool-use?cli=claude-code',
        ...(ownConnection ? { agent: false } : {}),
        headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${token}` },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            json: JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, any>,
          }),
        );
      },
    );
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}
