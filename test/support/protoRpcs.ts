import * as fs from 'node:fs';
import * as path from 'node:path';
import { PROTOS_DIR } from './paths';

/**
 * The RPCs the .proto files of protos/ declare, read from their text (not through the proto loader): every
 * `rpc Name(` inside a `service Name { … }` block, as the gRPC path `/<package>.<Service>/<Rpc>`, sorted. Tests
 * count the RPCs from here instead of writing the number down.
 */
export function declaredRpcPaths(dir: string = PROTOS_DIR): string[] {
  const paths: string[] = [];
  for (const file of fs
    .readdirSync(dir)
    .filter((name) => name.endsWith('.proto'))
    .sort()) {
    const text = fs
      .readFileSync(path.join(dir, file), 'utf8')
      .replace(/\/\*[\s\S]*?\*\//g, '')
      .replace(/\/\/.*$/gm, '');
    const pkg = /^\s*package\s+([\w.]+)\s*;/m.exec(text)?.[1];
    for (const service of text.matchAll(/\bservice\s+(\w+)\s*\{/g)) {
      // The service's block: up to its matching brace (an rpc may have an options block of its own).
      let depth = 1;
      let end = service.index + service[0].length;
      while (depth > 0 && end < text.length) {
        if (text[end] === '{') depth++;
        else if (text[end] === '}') depth--;
        end++;
      }
      const block = text.slice(service.index + service[0].length, end - 1);
      for (const rpc of block.matchAll(/\brpc\s+(\w+)\s*\(/g))
        paths.push(`/${pkg ? `${pkg}.` : ''}${service[1]}/${rpc[1]}`);
    }
  }
  return paths.sort();
}
