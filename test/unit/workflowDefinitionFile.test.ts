import { strict as assert } from 'node:assert';
import * as fs from 'node:fs';
import * as path from 'node:path';
import {
  DEFINITION_FILE_LIMITS,
  definitionFromJson,
  parseDefinitionText,
} from '../../src/core/workflow/definitionFile';
import type { WorkflowFileIssue } from '../../src/core/workflow/model';
import { REPO_ROOT } from '../support/paths';

/** [code, path, line, column, endLine, endColumn] of each issue. */
function places(issues: readonly WorkflowFileIssue[]): Array<[string, string, number, number, number, number]> {
  return issues.map((i) => [i.code, i.path, i.line, i.column, i.endLine, i.endColumn]);
}

describe('workflow definition files (JSON and YAML) and proto-shaped JSON', () => {
  it('accepts the example examples/workflows/review.yaml', () => {
    const text = fs.readFileSync(path.join(REPO_ROOT, 'examples', 'workflows', 'review.yaml'), 'utf8');
    const result = parseDefinitionText(text, 'review.yaml');
    assert.deepEqual(result.issues, []);
    assert.ok(result.validated?.ok);
    const definition = result.definition!;
    assert.equal(definition.workflowId, 'review-example');
    assert.deepEqual(
      definition.nodes.map((n) => [n.nodeId, n.trigger, n.dependencies]),
      [
        ['draft', 'DEPENDENCY', []],
        ['review', 'DEPENDENCY', ['draft']],
        ['ship', 'MANUAL', ['review']],
        ['revise', 'DEPENDENCY', ['review']],
      ],
    );
    const review = definition.nodes[1];
    assert.equal(review.metadata.route, "score > 0.5 ? 'ship' : 'revise'");
    assert.equal(review.metadata.max_iterations, '3', 'a YAML number in metadata is taken as its text');
    assert.deepEqual(review.outputMapping, { score: 'review.score', comments: 'review.comments' });
    assert.deepEqual(definition.nodes[0].inputMapping, { request: 'task' });
    assert.deepEqual(result.validated!.roots, ['draft']);
    const route = result.validated!.routes.get('review')!;
    assert.deepEqual(route.targets, ['ship', 'revise']);
    assert.deepEqual(route.choose({ review: { score: 0.9 } }, { score: 0.9 }), { ok: true, chosen: ['ship'] });
    assert.deepEqual(result.validated!.routes.get('revise')!.choose({}, {}), { ok: true, chosen: ['review'] });
  });

  it('places JSON issues at the exact line and column of the value, the key, or the node lacking a field', () => {
    const text = [
      '{', // 1
      '  "workflow_id": "wf",', // 2
      '  "nodes": {', // 3
      '    "a": { "agent_id": "x" },', // 4
      '    "b": {', // 5
      '      "agent_id": "",', // 6
      '      "dependencies": ["a", "zz"],', // 7
      '      "metadata": { "route": "1 +" }', // 8
      '    },', // 9
      '    "c": { "node_id": "d", "agent_id": "y", "dependencies": ["a"] },', // 10
      '    "e": { "dependencies": ["a"] },', // 11
      '    "f": { "agent_id": "z", "dependencies": ["a"], "extra": [1] }', // 12
      '  }',
      '}',
    ].join('\n');
    const result = parseDefinitionText(text, 'wf.json');
    assert.equal(result.definition, undefined);
    assert.equal(result.validated, undefined);
    assert.deepEqual(places(result.issues), [
      ['invalid_field', 'nodes.b.agent_id', 6, 19, 6, 21],
      ['unknown_dependency', 'nodes.b.dependencies[1]', 7, 29, 7, 33],
      ['invalid_route', 'nodes.b.metadata.route', 8, 30, 8, 35],
      ['invalid_field', 'nodes.c.node_id', 10, 23, 10, 26],
      ['invalid_field', 'nodes.e.agent_id', 11, 5, 11, 8],
      ['unknown_field', 'nodes.f.extra', 12, 52, 12, 59],
    ]);
    assert.match(result.issues[3].message, /node_id "d" differs from its key "c"/);
    assert.match(result.issues[5].message, /unknown field "extra" in node "f"/);
  });

  it('places YAML issues the same way (values, keys, missing fields, unknown fields)', () => {
    const text = [
      'workflow_id: wf', // 1
      'nodes:', // 2
      '  a:', // 3
      '    agent_id: x', // 4
      '  b:', // 5
      '    agent_id: y', // 6
      '    dependencies: [a, zz]', // 7
      '    trigger_type: SOMETIMES', // 8
      '    metadata:', // 9
      '      route: "score >"', // 10
      '  c:', // 11
      '    dependencies:', // 12
      '      - a', // 13
      '    unknown: 1', // 14
      '',
    ].join('\n');
    const result = parseDefinitionText(text, 'wf.yaml');
    assert.deepEqual(places(result.issues), [
      ['unknown_dependency', 'nodes.b.dependencies[1]', 7, 23, 7, 25],
      ['invalid_field', 'nodes.b.trigger_type', 8, 19, 8, 28],
      ['invalid_route', 'nodes.b.metadata.route', 10, 14, 10, 23],
      ['invalid_field', 'nodes.c.agent_id', 11, 3, 11, 4],
      ['unknown_field', 'nodes.c.unknown', 14, 5, 14, 12],
    ]);
    assert.match(result.issues[1].message, /trigger_type "SOMETIMES" is not DEPENDENCY, MANUAL, SCHEDULE, EVENT/);
  });

  it('a cycle is placed at the dependency that closes it, warnings after errors', () => {
    const text = [
      'nodes:',
      '  root: { agent_id: x }',
      '  a: { agent_id: x, dependencies: [root, b] }',
      '  b: { agent_id: x, dependencies: [a] }',
      '  c: { agent_id: x, trigger_type: MANUAL, metadata: { event: e } }',
      '',
    ].join('\n');
    const result = parseDefinitionText(text, 'cycle.yml');
    assert.deepEqual(places(result.issues), [
      ['workflow_cycle_detected', 'nodes.a.dependencies[1]', 3, 42, 3, 43],
      ['unused_metadata', 'nodes.c.metadata.event', 5, 62, 5, 63],
    ]);
    assert.deepEqual(result.issues[0].cycle, ['a', 'b']);
    assert.ok(result.validated && !result.validated.ok, 'read, validated, refused');
  });

  it("syntax errors carry the parser's position; repeated keys are errors in both syntaxes", () => {
    const json = parseDefinitionText('{"nodes": {"a": {"agent_id": "x",}}}', 'a.json');
    assert.deepEqual(places(json.issues), [['invalid_syntax', '', 1, 34, 1, 35]]);
    assert.match(json.issues[0].message, /^JSON: a property name in double quotes was expected/);

    const comment = parseDefinitionText('{"nodes": {} // no\n}', 'a.json');
    assert.deepEqual(places(comment.issues), [['invalid_syntax', '', 1, 14, 1, 19]]);

    const unclosed = parseDefinitionText('nodes:\n  a:\n    agent_id: "unclosed\n', 'a.yaml');
    assert.deepEqual(
      places(unclosed.issues),
      [['invalid_syntax', '', 4, 1, 4, 2]],
      'where the parser noticed: the end of the text',
    );
    assert.equal(unclosed.issues[0].message, 'YAML: Missing closing "quote (MISSING_CHAR)');
    const indent = parseDefinitionText('nodes:\n  a:\n    agent_id: [x\n  b: 1\n', 'a.yaml');
    assert.deepEqual(places(indent.issues), [['invalid_syntax', '', 4, 3, 4, 4]]);
    assert.match(
      indent.issues[0].message,
      /^YAML: Flow sequence in block collection must be sufficiently indented and end with a \] \(BAD_INDENT\)$/,
    );

    const dupYaml = parseDefinitionText('nodes:\n  a:\n    agent_id: x\n  a:\n    agent_id: y\n', 'a.yaml');
    assert.deepEqual(places(dupYaml.issues), [['invalid_syntax', '', 4, 3, 4, 4]]);
    assert.match(dupYaml.issues[0].message, /the key "a" appears twice in this map/);

    const dupJson = parseDefinitionText('{"nodes": {"a": {"agent_id": "x", "agent_id": "y"}}}', 'a.json');
    assert.deepEqual(places(dupJson.issues), [['invalid_syntax', '', 1, 35, 1, 45]]);

    const twoDocs = parseDefinitionText('nodes: {}\n---\nnodes: {}\n', 'a.yaml');
    assert.match(twoDocs.issues[0].message, /MULTIPLE_DOCS/);
    const empty = parseDefinitionText('', 'a.json');
    assert.deepEqual(
      empty.issues.map((i) => [i.code, i.line, i.column, i.message]),
      [['invalid_syntax', 1, 1, 'JSON: a value was expected']],
    );
  });

  it('reads JSON text as YAML too when the file is not *.json', () => {
    const result = parseDefinitionText('{"nodes": {"a": {"agent_id": "x"}}}', 'workflow.txt');
    assert.deepEqual(result.issues, []);
    assert.equal(result.definition?.nodes[0].nodeId, 'a');
  });

  it('shapes proto-shaped JSON: names or numbers for triggers, camelCase spellings, created_at ignored, defaults', () => {
    const triggers = definitionFromJson({
      nodes: {
        a: { agent_id: 'x' },
        b: { agent_id: 'x', trigger_type: 0 },
        c: { agent_id: 'x', trigger_type: 1 },
        d: { agent_id: 'x', trigger_type: 2 },
        e: { agent_id: 'x', trigger_type: 3 },
        f: { agent_id: 'x', trigger_type: 4 },
        g: { agent_id: 'x', trigger_type: 'TRIGGER_TYPE_UNSPECIFIED' },
        h: { agent_id: 'x', trigger_type: 'MANUAL' },
        i: { agent_id: 'x', trigger_type: 'EVENT' },
      },
    });
    assert.deepEqual(triggers.issues, []);
    assert.deepEqual(
      triggers.definition!.nodes.map((n) => n.trigger),
      ['DEPENDENCY', 'DEPENDENCY', 'EVENT', 'SCHEDULE', 'MANUAL', 'DEPENDENCY', 'DEPENDENCY', 'MANUAL', 'EVENT'],
    );
    assert.equal(triggers.definition!.workflowId, '', 'absent workflow_id: the engine assigns one');

    const bad = definitionFromJson({
      nodes: { a: { agent_id: 'x', trigger_type: 5 }, b: { agent_id: 'x', trigger_type: 'manual' } },
    });
    assert.deepEqual(
      bad.issues.map((i) => [i.code, i.path]),
      [
        ['invalid_field', 'nodes.a.trigger_type'],
        ['invalid_field', 'nodes.b.trigger_type'],
      ],
    );
    assert.equal(bad.definition, undefined);

    const camel = definitionFromJson({
      workflowId: 'w',
      createdAt: '2026-01-01T00:00:00Z',
      nodes: {
        a: { nodeId: 'a', agentId: 'x', triggerType: 'MANUAL', inputMapping: { k: 'v' }, outputMapping: { o: 'd' } },
      },
    });
    assert.deepEqual(camel.issues, []);
    assert.deepEqual(camel.definition, {
      workflowId: 'w',
      metadata: {},
      nodes: [
        {
          nodeId: 'a',
          agentId: 'x',
          dependencies: [],
          trigger: 'MANUAL',
          inputMapping: { k: 'v' },
          outputMapping: { o: 'd' },
          metadata: {},
        },
      ],
    });

    const both = definitionFromJson({ nodes: { a: { agent_id: 'x', agentId: 'y' } } });
    assert.deepEqual(
      both.issues.map((i) => [i.code, i.path, i.message]),
      [['duplicate_field', 'nodes.a.agentId', 'node "a" gives agent_id twice (as agent_id and agentId)']],
    );

    // What @grpc/proto-loader hands over with defaults: empty strings, lists and maps, null messages.
    const loader = definitionFromJson({
      workflow_id: '',
      created_at: null,
      metadata: {},
      nodes: {
        a: {
          node_id: '',
          agent_id: 'x',
          dependencies: [],
          trigger_type: 'TRIGGER_TYPE_UNSPECIFIED',
          input_mapping: {},
          output_mapping: {},
          metadata: {},
        },
      },
    });
    assert.deepEqual(loader.issues, []);
    assert.equal(loader.definition!.nodes[0].nodeId, 'a', 'an empty node_id takes the key');
  });

  it('refuses shapes that are not a definition, naming the field', () => {
    const cases: Array<[unknown, string[][]]> = [
      [[], [['invalid_field', '']]],
      [{ nodes: [{ node_id: 'a' }] }, [['invalid_field', 'nodes']]],
      [{}, [['invalid_field', 'nodes']]],
      [{ nodes: { a: 'x' } }, [['invalid_field', 'nodes.a']]],
      [{ workflow_id: 7, nodes: { a: { agent_id: 'x' } } }, [['invalid_field', 'workflow_id']]],
      [{ nodes: { a: { agent_id: 'x', dependencies: 'b' } } }, [['invalid_field', 'nodes.a.dependencies']]],
      [{ nodes: { a: { agent_id: 'x', dependencies: ['b', 3] } } }, [['invalid_field', 'nodes.a.dependencies[1]']]],
      [{ nodes: { a: { agent_id: 'x', input_mapping: { k: 1 } } } }, [['invalid_field', 'nodes.a.input_mapping.k']]],
      [{ nodes: { a: { agent_id: 'x', metadata: { k: { deep: 1 } } } } }, [['invalid_field', 'nodes.a.metadata.k']]],
      [{ nodes: { a: { agent_id: 'x' } }, owner: 'me' }, [['unknown_field', 'owner']]],
    ];
    for (const [value, expected] of cases) {
      const result = definitionFromJson(value);
      assert.deepEqual(
        result.issues.map((i) => [i.code, i.path]),
        expected,
        JSON.stringify(value),
      );
      assert.equal(result.definition, undefined);
    }
    // Metadata numbers and booleans are text; mappings must be strings.
    const meta = definitionFromJson({ nodes: { a: { agent_id: 'x', metadata: { priority: 5, flag: true } } } });
    assert.deepEqual(meta.definition!.nodes[0].metadata, { priority: '5', flag: 'true' });
  });

  it("keeps the author's node order (integer-like keys too) and treats __proto__ as a plain key", () => {
    const result = parseDefinitionText(
      'nodes:\n  "2": { agent_id: x }\n  "1": { agent_id: x, dependencies: ["2"] }\n  b: { agent_id: x, dependencies: ["1"] }\n',
      'o.yaml',
    );
    assert.deepEqual(result.issues, []);
    assert.deepEqual(
      result.definition!.nodes.map((n) => n.nodeId),
      ['2', '1', 'b'],
    );
    const json = parseDefinitionText('{"nodes": {"2": {"agent_id": "x"}, "1": {"agent_id": "x"}}}', 'o.json');
    assert.deepEqual(
      json.definition!.nodes.map((n) => n.nodeId),
      ['2', '1'],
    );

    const proto = parseDefinitionText(
      '{"nodes": {"__proto__": {"agent_id": "x", "metadata": {"__proto__": "v"}}}}',
      'p.json',
    );
    assert.deepEqual(proto.issues, []);
    assert.equal(proto.definition!.nodes[0].nodeId, '__proto__');
    assert.equal(Object.getOwnPropertyDescriptor(proto.definition!.nodes[0].metadata, '__proto__')?.value, 'v');
    assert.equal(({} as Record<string, unknown>).agent_id, undefined, 'nothing polluted');
  });

  it('YAML anchors and aliases work; an alias bomb, deep nesting and non-scalar keys are refused', () => {
    const aliases = parseDefinitionText(
      [
        'nodes:',
        '  a:',
        '    agent_id: x',
        '    metadata: &common { priority: 5, on_failure: hitl }',
        '  b:',
        '    agent_id: y',
        '    dependencies: [a]',
        '    metadata: *common',
        '',
      ].join('\n'),
      'a.yaml',
    );
    assert.deepEqual(aliases.issues, []);
    assert.deepEqual(aliases.definition!.nodes[1].metadata, { priority: '5', on_failure: 'hitl' });

    const lines = ['nodes:', '  l0: &l0 [x, x, x, x, x, x, x, x, x, x]'];
    for (let i = 1; i <= 8; i++)
      lines.push(`  l${i}: &l${i} [${Array.from({ length: 10 }, () => `*l${i - 1}`).join(', ')}]`);
    const bomb = parseDefinitionText(lines.join('\n'), 'bomb.yaml');
    assert.deepEqual(
      bomb.issues.map((i) => i.code),
      ['limit_exceeded'],
    );
    assert.match(bomb.issues[0].message, /more than 4000000 values/);

    const deep = parseDefinitionText(
      `nodes:\n  a:\n    metadata:\n      k: ${'['.repeat(40)}${']'.repeat(40)}\n`,
      'deep.yaml',
    );
    assert.deepEqual(
      deep.issues.map((i) => [i.code, i.line]),
      [['limit_exceeded', 4]],
    );
    const deepJson = parseDefinitionText(
      `{"nodes": ${'['.repeat(DEFINITION_FILE_LIMITS.maxDepth + 5)}${']'.repeat(DEFINITION_FILE_LIMITS.maxDepth + 5)}}`,
      'deep.json',
    );
    assert.deepEqual(places(deepJson.issues), [['limit_exceeded', '', 0, 0, 0, 0]]);

    const key = parseDefinitionText('nodes:\n  ? [a, b]\n  : { agent_id: x }\n', 'k.yaml');
    assert.deepEqual(places(key.issues), [['invalid_field', '', 2, 5, 2, 11]]);
  });

  it('places issues of nodes whose ids need quoting in paths', () => {
    const result = parseDefinitionText('nodes:\n  a.b: { agent_id: x, dependencies: [zz] }\n', 'q.yaml');
    assert.deepEqual(places(result.issues), [
      ['no_root', 'nodes', 1, 1, 1, 6],
      ['unknown_dependency', 'nodes["a.b"].dependencies[0]', 2, 38, 2, 40],
    ]);
  });

  it('bounds the issues of a file at 100, sorted by place, the rest counted', () => {
    const lines = ['nodes:', '  root: { agent_id: x }'];
    for (let i = 0; i < 130; i++) lines.push(`  n${i}: { agent_id: x, dependencies: [root, missing${i}] }`);
    const result = parseDefinitionText(lines.join('\n'), 'many.yaml');
    assert.equal(result.issues.length, 101);
    assert.deepEqual(
      result.issues.slice(0, 100).map((i) => i.line),
      Array.from({ length: 100 }, (_, i) => i + 3),
    );
    assert.deepEqual(places([result.issues[100]]), [['more_issues', '', 0, 0, 0, 0]]);
    assert.equal(result.issues[100].message, 'and 30 more errors (only the first 100 issues are listed)');
  });
});
