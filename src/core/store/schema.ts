/**
 * Versioned schema, contributed by the areas. The store's `PRAGMA user_version` is the highest version applied.
 * A version is applied in one transaction: every step of that version, in the order the composition root lists
 * them. Areas add steps with the next free version; a step that has shipped is never edited (a unit test holds
 * each shipped step's text to its recorded digest).
 */
export interface SchemaStep {
  readonly version: number;
  /** The area whose tables the step creates or changes (its folder under src/core/). */
  readonly area: string;
  readonly description: string;
  readonly statements: readonly string[];
}

/** The steps of one version, applied together. */
export interface SchemaVersion {
  readonly version: number;
  readonly steps: readonly SchemaStep[];
}

/**
 * Groups `steps` by version, keeping their order within a version. Refuses a schema whose versions do not run
 * 1, 2, 3… without a gap, or that names one area twice in one version: the order must be fixed, or store files
 * written by one build would not upgrade in another.
 */
export function schemaVersions(steps: readonly SchemaStep[]): SchemaVersion[] {
  const byVersion = new Map<number, SchemaStep[]>();
  for (const step of steps) {
    if (!Number.isInteger(step.version) || step.version < 1)
      throw new Error(
        `schema step '${step.description}' (${step.area}) has version ${step.version}; versions start at 1`,
      );
    const list = byVersion.get(step.version) ?? [];
    if (list.some((s) => s.area === step.area))
      throw new Error(`schema version ${step.version} has two steps of area '${step.area}'; make them one`);
    list.push(step);
    byVersion.set(step.version, list);
  }
  const versions = [...byVersion.keys()].sort((a, b) => a - b);
  versions.forEach((version, index) => {
    if (version !== index + 1)
      throw new Error(`schema versions must run 1, 2, 3… without a gap; version ${index + 1} is missing`);
  });
  return versions.map((version) => ({ version, steps: byVersion.get(version)! }));
}
