/**
 * Workflow definition files (Create Workflow from File) and proto-shaped JSON (CreateWorkflowRequest.definition).
 *
 * The definition file — workflow.proto's WorkflowDefinition with proto field names, as JSON (`*.json`) or YAML (any
 * other name; YAML 1.2, so JSON text is YAML too):
 *
 * ```yaml
 * workflow_id: review            # optional: empty or absent, the coordinator assigns one
 * metadata: { owner: docs-team } # optional: map of strings
 * nodes:                         # required: a map keyed by node id, in the author's order
 *   draft:
 *     agent_id: type:writer      # required: an agent id, or type:<agent type>
 *     input_mapping: { request: task }     # workflow data key (dotted path) → node input
 *     output_mapping: { patch: draft.patch } # node output key → workflow data key (dotted path)
 *   review:
 *     node_id: review            # optional: when given, equal to the key
 *     agent_id: type:reviewer
 *     dependencies: [draft]      # node ids that must be COMPLETED first
 *     trigger_type: DEPENDENCY   # DEPENDENCY (default), MANUAL, SCHEDULE, EVENT, or the enum number;
 *                                # TRIGGER_TYPE_UNSPECIFIED / 0 is DEPENDENCY
 *     output_mapping: { score: review.score }
 *     metadata:                  # map of strings; numbers and booleans are taken as their text
 *       route: "score > 0.5 ? 'ship' : 'revise'"   # conditional edges (cel.ts)
 *       # schedule (SCHEDULE, cron.ts), event (EVENT), priority, scope, on_failure, max_iterations: model.ts
 * ```
 *
 * Shape rules (definitionFromJson; each refusal an issue with its path, `invalid_field` unless said): the fields are
 * exactly the proto's (lowerCamelCase spellings such as `agentId` are accepted too, as proto3 JSON allows; both spellings
 * of one field are refused, `duplicate_field`); an unknown field is refused (`unknown_field`: a misspelt `dependecies`
 * would otherwise drop the dependencies silently);
 * `created_at` is accepted and ignored (the coordinator records its own creation time); `nodes` must be a map, not a
 * list; `node_id` may be omitted (the key is the id) and must equal the key when given; strings must be strings
 * (`null` counts as absent, as in proto3 JSON); trigger_type is a name or a number 0–4. Then validate.ts checks the
 * workflow itself.
 *
 * Files (parseDefinitionText): JSON by jsonc-parser in strict mode (no comments, no trailing commas), YAML by `yaml`'s
 * parseDocument (core schema; anchors and aliases allowed, bounded; keys must be scalars; a repeated key is an error in
 * both). Every issue is placed in the file: 1-based line and column of the offending key or value — the value for a
 * scalar, the key for a map or a list, and for a missing field the key of the map that lacks it — with an exclusive end;
 * 0 when no place is known. Syntax errors carry the parser's position (`invalid_syntax`).
 */
import { shape } from './definitionShape';
import { DEFINITION_FILE_LIMITS, KEY_CODES, LineIndex, parseJsonFile, parseYamlFile, placed } from './definitionText';
import { bounded, moreMessage, parseIssuePath } from './issues';
import type { ValidationIssue, WorkflowDefinition, WorkflowFileIssue } from './model';
import { type ValidatedWorkflow, validateWithAllIssues } from './validate';

export { DEFINITION_FILE_LIMITS } from './definitionText';

export function definitionFromJson(value: unknown): {
  readonly definition?: WorkflowDefinition;
  readonly issues: readonly ValidationIssue[];
} {
  const shaped = shape(value);
  return { definition: shaped.issues.hasErrors ? undefined : shaped.definition, issues: shaped.issues.list() };
}

function byPlace(a: WorkflowFileIssue, b: WorkflowFileIssue): number {
  return (a.severity === b.severity ? 0 : a.severity === 'error' ? -1 : 1) || a.line - b.line || a.column - b.column;
}

function boundedFileIssues(issues: WorkflowFileIssue[]): WorkflowFileIssue[] {
  const sorted = issues.filter((i) => i.code !== 'more_issues').sort(byPlace);
  return bounded(sorted, (rest) => ({
    severity: rest.errors ? 'error' : 'warning',
    code: 'more_issues',
    path: '',
    message: moreMessage(rest.errors, rest.warnings),
    line: 0,
    column: 0,
    endLine: 0,
    endColumn: 0,
  }));
}

/**
 * A definition file's text → the definition, its validation, and every issue placed in the file. `fileName` decides
 * the syntax: `*.json` is JSON, anything else YAML. `definition` and `validated` are given when the text could be read
 * into a definition without a shape error; the workflow may be created when `validated.ok`.
 */
export function parseDefinitionText(
  text: string,
  fileName: string,
): {
  readonly definition?: WorkflowDefinition;
  readonly validated?: ValidatedWorkflow;
  readonly issues: readonly WorkflowFileIssue[];
} {
  if (typeof text !== 'string' || text.length > DEFINITION_FILE_LIMITS.maxChars) {
    const size = typeof text === 'string' ? text.length : 0;
    return {
      issues: [
        {
          severity: 'error',
          code: 'limit_exceeded',
          path: '',
          message: `a definition file has at most ${DEFINITION_FILE_LIMITS.maxChars} characters (this one has ${size})`,
          line: 0,
          column: 0,
          endLine: 0,
          endColumn: 0,
        },
      ],
    };
  }
  const lines = new LineIndex(text);
  const file = /\.json$/i.test(fileName) ? parseJsonFile(text, lines) : parseYamlFile(text, lines);
  if (file.issues.some((i) => i.severity === 'error') || file.value === undefined)
    return { issues: boundedFileIssues(file.issues) };

  const locate = (issue: ValidationIssue): WorkflowFileIssue => {
    const segments = parseIssuePath(issue.path);
    return placed(issue, segments ? file.locate(segments, KEY_CODES.has(issue.code)) : undefined, lines);
  };
  const shaped = shape(file.value);
  const shapeIssues = shaped.issues.all();
  const out: WorkflowFileIssue[] = [...file.issues, ...shapeIssues.map(locate)];
  if (!shaped.definition) return { issues: boundedFileIssues(out) };
  // A field the shape refused reads as empty in the definition: validation's word on the same path adds nothing.
  const refused = new Set(shapeIssues.map((i) => i.path));
  const { validated, all } = validateWithAllIssues(shaped.definition);
  for (const issue of all) if (!refused.has(issue.path)) out.push(locate(issue));
  if (shaped.issues.hasErrors) return { issues: boundedFileIssues(out) };
  return { definition: shaped.definition, validated, issues: boundedFileIssues(out) };
}
