import { strict as assert } from 'node:assert';
import { createHash } from 'node:crypto';
import { COORDINATOR_SCHEMA, LATEST_SCHEMA_VERSION } from '../../src/core/coordinatorStore';
import { schemaVersions, type SchemaStep } from '../../src/core/store/schema';

/**
 * The schema as shipped: every step's version, area and a digest of its statements, in order. A store file
 * written by one build must upgrade in every later one, so a shipped step is never edited or moved: a new step
 * is appended here with the next free version. (Version 1's two steps are, together, the release-1 migration.)
 */
const SHIPPED: ReadonlyArray<readonly [number, string, string]> = [
  [1, 'registry', 'd19d65d179ff20fd'],
  [1, 'log', 'b8bc7dd067d391ff'],
  [2, 'router', '4ceadfcbed337c2d'],
  [3, 'hitl', '7a12a9430496dcc7'],
  [4, 'router', '0157515ce33fcf5f'],
  [5, 'credentials', 'f3220d3741a27961'],
  [6, 'router', 'd272a67ecc58fc99'],
  [7, 'worktree', '17f178061e07d6a7'],
  [8, 'worktree', '5855c82c55d591e7'],
  [9, 'scheduler', '0efa380eb26927fe'],
  [10, 'activity', '9a3e869d7d250314'],
  [11, 'tools', '53761342de49afa8'],
  [12, 'policy', 'b6d420d66bcaceea'],
  [13, 'negotiation', '0ba8de7e0d590938'],
  [14, 'room', 'c0659f8be0c42dbb'],
  [15, 'room', '702557545a478cce'],
  [16, 'handoff', '356f633dc7ddaa35'],
  [17, 'workflow', '15860e97bd5f02fb'], // edited before it shipped (issue 19 review: workflow_data in its own table)
  [18, 'launch', '1ec880919398be4b'],
  [19, 'sessions', '9740042b1f5d376a'],
];

function digest(step: SchemaStep): string {
  return createHash('sha256').update(JSON.stringify(step.statements)).digest('hex').slice(0, 16);
}

const step = (version: number, area: string): SchemaStep => ({
  version,
  area,
  description: `${area} ${version}`,
  statements: [],
});

describe('the schema contributed by the areas', () => {
  it('keeps every shipped step as it was, in its recorded order', () => {
    const shipped = COORDINATOR_SCHEMA.slice(0, SHIPPED.length).map((s) => [s.version, s.area, digest(s)]);
    assert.deepEqual(shipped, SHIPPED);
  });

  it('runs from version 1 to the latest without a gap', () => {
    const versions = schemaVersions(COORDINATOR_SCHEMA).map((v) => v.version);
    assert.deepEqual(
      versions,
      Array.from({ length: LATEST_SCHEMA_VERSION }, (_, i) => i + 1),
    );
  });

  it('groups the steps of a version in the order they are listed', () => {
    assert.deepEqual(
      schemaVersions([step(1, 'b'), step(2, 'a'), step(1, 'a')]).map((v) => [v.version, v.steps.map((s) => s.area)]),
      [
        [1, ['b', 'a']],
        [2, ['a']],
      ],
    );
  });

  it('refuses a gap, a version below 1, and two steps of one area in one version', () => {
    assert.throws(() => schemaVersions([step(1, 'a'), step(3, 'a')]), /version 2 is missing/);
    assert.throws(() => schemaVersions([step(0, 'a')]), /versions start at 1/);
    assert.throws(() => schemaVersions([step(1, 'a'), step(1, 'a')]), /two steps of area 'a'/);
  });
});
