import { strict as assert } from 'node:assert';
import { performance } from 'node:perf_hooks';
import {
  type AnalysedRoute,
  type CompiledRoute,
  ROUTE_LIMITS,
  compileRoute,
  routeVariables,
} from '../../src/core/workflow/cel';
import type { WorkflowDefinition, WorkflowNodeDefinition } from '../../src/core/workflow/model';

function node(
  id: string,
  deps: string[] = [],
  metadata: Record<string, string> = {},
  outputMapping: Record<string, string> = {},
): WorkflowNodeDefinition {
  return {
    nodeId: id,
    agentId: 'type:w',
    dependencies: deps,
    trigger: 'DEPENDENCY',
    inputMapping: {},
    outputMapping,
    metadata,
  };
}

/** A workflow: `a` (with the route) → b, c; d depends on b; x stands apart (a possible loop-back target). */
function workflow(
  route: string,
  outputMapping: Record<string, string> = { score: 'review.score' },
): { definition: WorkflowDefinition; a: WorkflowNodeDefinition } {
  const a = node('a', [], { route }, outputMapping);
  return {
    a,
    definition: {
      workflowId: 'wf',
      metadata: {},
      nodes: [node('x'), a, node('b', ['a']), node('c', ['a', 'a']), node('d', ['b'])],
    },
  };
}

function compile(
  route: string,
  outputMapping?: Record<string, string>,
): { route?: CompiledRoute; issues: readonly { code: string; path: string; message: string }[] } {
  const { a, definition } = workflow(route, outputMapping);
  return compileRoute(a, definition);
}

function compiled(route: string, outputMapping?: Record<string, string>): AnalysedRoute {
  const result = compile(route, outputMapping);
  assert.deepEqual(result.issues, [], route);
  assert.ok(result.route);
  return result.route as AnalysedRoute;
}

function refusal(route: string, outputMapping?: Record<string, string>): string {
  const result = compile(route, outputMapping);
  assert.equal(result.route, undefined, route);
  assert.equal(result.issues.length, 1, JSON.stringify(result.issues));
  assert.equal(result.issues[0].code, 'invalid_route');
  assert.equal(result.issues[0].path, 'nodes.a.metadata.route');
  return result.issues[0].message;
}

describe('workflow routes: conditional edges in CEL (@marcbachmann/cel-js)', () => {
  it("branches on a number: score > 0.5 ? 'b' : 'c' (JSON numbers are doubles; 1 compares like 1.0)", () => {
    const route = compiled("score > 0.5 ? 'b' : 'c'");
    assert.deepEqual(route.targets, ['b', 'c']);
    assert.deepEqual(route.choose({}, { score: 0.7 }), { ok: true, chosen: ['b'] });
    assert.deepEqual(route.choose({}, { score: 1 }), { ok: true, chosen: ['b'] });
    assert.deepEqual(route.choose({}, { score: 0.5 }), { ok: true, chosen: ['c'] });
    assert.deepEqual(route.choose({}, { score: 0 }), { ok: true, chosen: ['c'] });
    assert.equal(route.guarded, false, 'a linear expression is evaluated directly');
    // The same through `output` and `data`.
    assert.deepEqual(compiled("output.score > 0.5 ? 'b' : 'c'").choose({}, { score: 1 }), { ok: true, chosen: ['b'] });
    assert.deepEqual(compiled("data.review.score >= 1 ? 'b' : 'c'").choose({ review: { score: 1 } }, {}), {
      ok: true,
      chosen: ['b'],
    });
  });

  it("output keys named like CEL types (type, int, map…) do not break the route: they are reached as output['type']", () => {
    const route = compiled("score > 0.5 && output['type'] == 'fix' ? 'b' : 'c'", {
      type: 'kind',
      int: 'n',
      map: 'm',
      score: 's',
    });
    assert.deepEqual(route.choose({}, { type: 'fix', score: 0.9 }), { ok: true, chosen: ['b'] });
    assert.deepEqual(route.choose({}, { type: 'doc', score: 0.9 }), { ok: true, chosen: ['c'] });
    assert.deepEqual(routeVariables(node('n', [], {}, { type: 'k', score: 's' })), ['score']);
  });

  it('ints and doubles: comparisons mix, arithmetic does not (documented)', () => {
    const eq = compiled("data.count == 3 ? 'b' : 'c'");
    assert.deepEqual(eq.choose({ count: 3 }, {}), { ok: true, chosen: ['b'] });
    const plus = compiled("data.count + 1 == 4 ? 'b' : 'c'");
    const failed = plus.choose({ count: 3 }, {});
    assert.equal(failed.ok, false);
    assert.match((failed as { error: string }).error, /no such overload/);
    assert.deepEqual(compiled("int(data.count) + 1 == 4 ? 'b' : 'c'").choose({ count: 3 }, {}), {
      ok: true,
      chosen: ['b'],
    });
    assert.deepEqual(compiled("data.count + 1.0 == 4.0 ? 'b' : 'c'").choose({ count: 3 }, {}), {
      ok: true,
      chosen: ['b'],
    });
  });

  it('lists choose several, bools choose every dependent or none', () => {
    const list = compiled("score > 0.5 ? ['b', 'c', 'b'] : []");
    assert.deepEqual(list.targets, ['b', 'c']);
    assert.deepEqual(list.choose({}, { score: 0.9 }), { ok: true, chosen: ['b', 'c'] }, 'repeats dropped');
    assert.deepEqual(list.choose({}, { score: 0.1 }), { ok: true, chosen: [] });

    const bool = compiled('output.approved');
    assert.deepEqual(bool.targets, []);
    assert.equal(bool.computed, true, 'a dyn result may be anything');
    assert.deepEqual(
      bool.choose({}, { approved: true }),
      { ok: true, chosen: ['b', 'c'] },
      'every dependent, once, in author order',
    );
    assert.deepEqual(bool.choose({}, { approved: false }), { ok: true, chosen: [] });

    const typed = compiled('score > 0.5');
    assert.equal(typed.mayChooseDependents, true);
    assert.equal(typed.computed, false);
    assert.ok(typed.mayChoose('b', true));
    assert.ok(!typed.mayChoose('x', false), 'a bool never loops back');
  });

  it('a target that is not a dependent is a loop back; a computed answer is checked when evaluated', () => {
    const loop = compiled("score > 0.5 ? 'b' : 'x'");
    assert.deepEqual(loop.choose({}, { score: 0 }), { ok: true, chosen: ['x'] });
    assert.ok(loop.mayChoose('x', false));
    assert.ok(!loop.mayChoose('d', false));

    const computed = compiled('output.next');
    assert.deepEqual(computed.choose({}, { next: 'd' }), { ok: true, chosen: ['d'] });
    assert.deepEqual(computed.choose({}, { next: ['b', 'x'] }), { ok: true, chosen: ['b', 'x'] });
    assert.deepEqual(computed.choose({}, { next: 'zz' }), {
      ok: false,
      error: 'route of "a" chose "zz", which is not a node of this workflow',
    });
    assert.deepEqual(computed.choose({}, { next: 3 }), {
      ok: false,
      error: 'route of "a" answered the number 3, not a node id, a list of node ids or a bool',
    });
    assert.deepEqual(computed.choose({}, { next: ['b', 1] }), {
      ok: false,
      error:
        'route of "a" answered a list holding something other than node ids, not a node id, a list of node ids or a bool',
    });
    assert.deepEqual(computed.choose({}, { next: null }), {
      ok: false,
      error: 'route of "a" answered null, not a node id, a list of node ids or a bool',
    });
    assert.deepEqual(computed.choose({}, { next: { b: 1 } }), {
      ok: false,
      error: 'route of "a" answered a map, not a node id, a list of node ids or a bool',
    });
  });

  it('targets are the string literals in result position only, through ?:, lists, cel.bind and dyn()', () => {
    assert.deepEqual(compiled("data.verdict == 'approve' ? 'b' : (data.verdict == 'hold' ? 'x' : 'c')").targets, [
      'b',
      'x',
      'c',
    ]);
    assert.deepEqual(compiled("data['key'].startsWith('pre') ? ['b', 'd'] : ['c']").targets, ['b', 'd', 'c']);
    assert.deepEqual(compiled("cel.bind(s, data.score, s > 0.5 ? 'b' : 'c')").targets, ['b', 'c']);
    assert.deepEqual(compiled("data.flag ? dyn('b') : dyn(true)").targets, ['b']);
    assert.deepEqual(compiled(`"b"`).targets, ['b'], 'double quotes');
    assert.deepEqual(compiled(`'''c'''`).targets, ['c'], 'triple quotes');
    assert.deepEqual(compiled(`r'd'`).targets, ['d'], 'raw string');
    assert.deepEqual(
      compiled(`data.x == 'it\\'s' ? "\\x62" : 'c'`).targets,
      ['b', 'c'],
      'escapes are decoded: \\x62 is b',
    );
    const mixed = compiled("data.ok ? [dyn('b'), data.other] : [dyn(data.flag ? 'c' : 'x')]");
    assert.deepEqual(mixed.targets, ['b', 'c', 'x']);
    assert.equal(mixed.computed, true);
    assert.deepEqual(compiled("'b'").choose({}, {}), { ok: true, chosen: ['b'] });
  });

  it('refuses literals that are not nodes, and literal answers that are not node ids', () => {
    assert.match(
      refusal("score > 0.5 ? 'b' : 'nowhere'"),
      /route names "nowhere", which is not a node of this workflow/,
    );
    assert.match(refusal("score > 0.5 ? dyn('b') : dyn(1)"), /route answers 1, which is not a node id/);
    assert.match(refusal("score > 0.5 ? dyn('b') : dyn(null)"), /route answers null/);
  });

  it("refuses what does not parse or type-check, with the library's message and where it points", () => {
    assert.equal(
      refusal("score > 0.5 ? 'b' :"),
      'route does not parse: Unexpected token: EOF (at character 20 of the expression)',
    );
    assert.match(
      refusal("1 + 'x' == 2 ? 'b' : 'c'"),
      /^route does not type-check: no such overload: int \+ string \(at character 1 of the expression\)$/,
    );
    assert.match(refusal("unknown > 1 ? 'b' : 'c'"), /^route does not type-check: Unknown variable: unknown/);
    assert.match(refusal("score > 0.5 ? 'b' : ['c']"), /Ternary branches must have the same type/);
    assert.match(
      refusal('1 + 2'),
      /route answers int; it must answer a node id \(string\), a list of node ids \(list<string>\) or a bool/,
    );
    assert.match(refusal('data'), /route answers map/);
    assert.match(refusal('[1, 2]'), /route answers list<int>/);
    assert.match(refusal('   '), /route is empty/);
    assert.match(refusal(`'b' + ''${' '.repeat(ROUTE_LIMITS.maxExpressionChars)}`), /longer than 4096 characters/);
    assert.match(
      refusal(Array.from({ length: 1100 }, () => '1').join('+')),
      /^route does not parse: Exceeded maxAstNodes \(2048\)/,
    );
  });

  it('declares data, output and the output_mapping keys that are identifiers; nothing else', () => {
    const a = node('a', [], {}, { score: 's', 'not-ident': 'n', data: 'd', in: 'i', _ok2: 'o' });
    assert.deepEqual(routeVariables(a), ['score', '_ok2']);
    const route = compiled("output['not-ident'] == 1 && _ok2 == null ? 'b' : 'c'", { 'not-ident': 'n', _ok2: 'o' });
    assert.deepEqual(
      route.choose({}, { 'not-ident': 1 }),
      { ok: true, chosen: ['b'] },
      'a key the output lacks is null',
    );
    // `data` stays workflow_data even when an output is called data.
    assert.deepEqual(compiled("data.k == 1 ? 'b' : 'c'", { data: 'x' }).choose({ k: 1 }, { data: { k: 2 } }), {
      ok: true,
      chosen: ['b'],
    });
  });

  it('evaluation errors are answers, not exceptions', () => {
    const route = compiled("data.missing > 0.5 ? 'b' : 'c'");
    assert.deepEqual(route.choose({}, {}), {
      ok: false,
      error: 'route of "a" failed: No such key: missing (at character 6 of the expression)',
    });
    assert.deepEqual(compiled("has(data.missing) && data.missing > 0.5 ? 'b' : 'c'").choose({}, {}), {
      ok: true,
      chosen: ['c'],
    });
    assert.match(
      (compiled("score ? 'b' : 'c'", { score: 's' }).choose({}, { score: 1 }) as { error: string }).error,
      /Ternary condition must be bool/,
    );
    assert.match(
      (compiled("1 / int(data.z) == 1 ? 'b' : 'c'").choose({ z: 0 }, {}) as { error: string }).error,
      /division by zero/,
    );
    assert.deepEqual(route.choose([] as unknown as Record<string, unknown>, {}), {
      ok: false,
      error: 'route of "a": workflow_data is not a JSON object',
    });
    assert.deepEqual(route.choose({}, null as unknown as Record<string, unknown>), {
      ok: false,
      error: 'route of "a": the node\'s output is not a JSON object',
    });
    // Prototype members are not keys.
    assert.equal(compiled("has(data.constructor) ? 'b' : 'c'").choose({}, {}).ok, true);
    assert.deepEqual(compiled("has(data.constructor) ? 'b' : 'c'").choose({}, {}), { ok: true, chosen: ['c'] });
  });

  it('bounds evaluation: macros, matches and searches run under a wall-clock limit; a runaway one is stopped', () => {
    assert.equal(compiled("data.l.exists(x, x > 1) ? 'b' : 'c'").guarded, true);
    assert.equal(compiled("data.s.contains('x') ? 'b' : 'c'").guarded, true);
    assert.equal(compiled("'x' in data.l ? 'b' : 'c'").guarded, true);
    assert.equal(compiled("size(data.s) > 2 && data.s.startsWith('a') ? 'b' : 'c'").guarded, false);
    // A long expression is guarded too: a chain of list concatenations copies the lists again at every step.
    const chain = compiled(`size(${Array.from({ length: 20 }, () => 'data.l').join(' + ')}) > 0 ? 'b' : 'c'`);
    assert.equal(chain.guarded, true);
    assert.deepEqual(chain.choose({ l: [1] }, {}), { ok: true, chosen: ['b'] });
    assert.equal(
      compiled(`size(${Array.from({ length: 4 }, () => 'data.l').join(' + ')}) > 0 ? 'b' : 'c'`).guarded,
      false,
    );

    const redos = compiled("data.s.matches('^(a+)+$') ? 'b' : 'c'");
    assert.deepEqual(redos.choose({ s: 'aaaa' }, {}), { ok: true, chosen: ['b'] });
    const started = performance.now();
    const stopped = redos.choose({ s: `${'a'.repeat(40)}!` }, {});
    const took = performance.now() - started;
    assert.deepEqual(stopped, {
      ok: false,
      error: `route of "a" took longer than ${ROUTE_LIMITS.evaluationTimeoutMs} ms and was stopped`,
    });
    assert.ok(took < ROUTE_LIMITS.evaluationTimeoutMs + 2000, `stopped after ${took} ms`);
    // The route still works afterwards.
    assert.deepEqual(redos.choose({ s: 'a' }, {}), { ok: true, chosen: ['b'] });

    const nested = compiled("data.l.map(x, data.l.map(y, data.l.map(z, [x, y, z]))).size() > 0 ? 'b' : 'c'");
    assert.deepEqual(nested.choose({ l: [1, 2] }, {}), { ok: true, chosen: ['b'] });
    assert.equal(nested.choose({ l: Array.from({ length: 2000 }, (_, i) => i) }, {}).ok, false);

    const exists = compiled("data.items.exists(i, i.severity == 'high') ? 'b' : 'c'");
    assert.deepEqual(exists.choose({ items: [{ severity: 'low' }, { severity: 'high' }] }, {}), {
      ok: true,
      chosen: ['b'],
    });
  });

  it('compiles once: the compiled route is evaluated many times', () => {
    const route = compiled("score > 0.5 ? 'b' : 'c'");
    const started = performance.now();
    for (let i = 0; i < 20_000; i++) assert.equal(route.choose({}, { score: i % 2 }).ok, true);
    const perCall = (performance.now() - started) / 20_000;
    assert.ok(perCall < 0.1, `${(perCall * 1000).toFixed(1)} µs per evaluation`);
  });

  it('no route, no compile: a node without metadata route answers nothing', () => {
    const { definition } = workflow("'b'");
    assert.deepEqual(compileRoute(definition.nodes[0], definition), { issues: [] });
  });
});
