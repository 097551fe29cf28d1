import * as fs from 'node:fs';
import * as path from 'node:path';
import * as ts from 'typescript';
import { REPO_ROOT } from './paths';

/**
 * The sources read as TypeScript (the compiler's parser, not patterns): the rules tests (areas, layers, boundaries)
 * ask what a file imports and what it declares without a regular expression missing `import type`, `export … from`,
 * a multi-line import or a commented-out one.
 */

export const SRC = path.join(REPO_ROOT, 'src');
export const CORE = path.join(SRC, 'core');

/** Every `.ts` file under `dir`, sorted. */
export function tsFiles(dir: string): string[] {
  return fs
    .readdirSync(dir, { withFileTypes: true })
    .flatMap((entry) => {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) return tsFiles(full);
      return entry.isFile() && entry.name.endsWith('.ts') ? [full] : [];
    })
    .sort();
}

/** A path relative to the repository, with `/` (how the rules and their allow-list name files). */
export function repoPath(file: string): string {
  return path.relative(REPO_ROOT, file).split(path.sep).join('/');
}

export function parse(file: string, text = fs.readFileSync(file, 'utf8')): ts.SourceFile {
  return ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
}

/** One reference of a source to another module. */
export interface ModuleRef {
  readonly specifier: string;
  /** `import type`, `export type … from`, an import whose every name is `type`, or `import('…')` in a type. */
  readonly typeOnly: boolean;
  /** The names it takes (`*` for a namespace or `export *`, `default`, none for a bare `import '…'`). */
  readonly names: readonly string[];
  readonly line: number;
}

/**
 * Every module a source names: `import` (value, `type`, namespace, bare), `import x = require('…')`,
 * `export … from`, dynamic `import('…')`, `require('…')` and `import('…')` types.
 */
export function moduleRefs(source: ts.SourceFile): ModuleRef[] {
  const refs: ModuleRef[] = [];
  const lineOf = (node: ts.Node) => source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1;
  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node) && ts.isStringLiteral(node.moduleSpecifier)) {
      const clause = node.importClause;
      const names: string[] = [];
      let allTypes = clause?.isTypeOnly ?? false;
      if (clause) {
        if (clause.name) names.push('default');
        const bindings = clause.namedBindings;
        if (bindings && ts.isNamespaceImport(bindings)) names.push('*');
        if (bindings && ts.isNamedImports(bindings)) {
          for (const element of bindings.elements) names.push((element.propertyName ?? element.name).text);
          if (!clause.isTypeOnly && !clause.name && bindings.elements.length > 0) {
            allTypes = bindings.elements.every((element) => element.isTypeOnly);
          }
        }
      }
      refs.push({ specifier: node.moduleSpecifier.text, typeOnly: allTypes, names, line: lineOf(node) });
    } else if (ts.isExportDeclaration(node) && node.moduleSpecifier && ts.isStringLiteral(node.moduleSpecifier)) {
      const clause = node.exportClause;
      const names = !clause
        ? ['*']
        : ts.isNamespaceExport(clause)
          ? ['*']
          : clause.elements.map((element) => (element.propertyName ?? element.name).text);
      const allTypes =
        node.isTypeOnly ||
        (clause !== undefined &&
          ts.isNamedExports(clause) &&
          clause.elements.length > 0 &&
          clause.elements.every((e) => e.isTypeOnly));
      refs.push({ specifier: node.moduleSpecifier.text, typeOnly: allTypes, names, line: lineOf(node) });
    } else if (
      ts.isImportEqualsDeclaration(node) &&
      ts.isExternalModuleReference(node.moduleReference) &&
      ts.isStringLiteral(node.moduleReference.expression)
    ) {
      refs.push({
        specifier: node.moduleReference.expression.text,
        typeOnly: node.isTypeOnly,
        names: ['*'],
        line: lineOf(node),
      });
    } else if (
      ts.isCallExpression(node) &&
      (node.expression.kind === ts.SyntaxKind.ImportKeyword ||
        (ts.isIdentifier(node.expression) && node.expression.text === 'require')) &&
      node.arguments.length === 1 &&
      ts.isStringLiteral(node.arguments[0])
    ) {
      refs.push({ specifier: node.arguments[0].text, typeOnly: false, names: ['*'], line: lineOf(node) });
    } else if (
      ts.isImportTypeNode(node) &&
      ts.isLiteralTypeNode(node.argument) &&
      ts.isStringLiteral(node.argument.literal)
    ) {
      const name = node.qualifier
        ? ts.isIdentifier(node.qualifier)
          ? node.qualifier.text
          : node.qualifier.left.getText(source)
        : '*';
      refs.push({ specifier: node.argument.literal.text, typeOnly: true, names: [name], line: lineOf(node) });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return refs;
}

/** The `.ts` file a relative specifier of `fromFile` names (`./x`, `./x.js`, `./dir` → `./dir/index.ts`), if any. */
export function resolveRelative(fromFile: string, specifier: string): string | undefined {
  if (!specifier.startsWith('.')) return undefined;
  const base = path.resolve(path.dirname(fromFile), specifier);
  const stem = base.replace(/\.(js|ts)$/, '');
  for (const candidate of [`${stem}.ts`, path.join(base, 'index.ts')]) {
    if (fs.existsSync(candidate) && fs.statSync(candidate).isFile()) return candidate;
  }
  return undefined;
}
