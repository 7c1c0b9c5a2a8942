/**
 * The library's public names and their doc comments, read with the TypeScript parser: every name
 * `src/index.ts` exports is followed through `export … from` (and `export *`) to its declaration,
 * which must carry a TSDoc comment (the reference in docs/api/ is generated from them).
 */
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import ts from 'typescript';

export interface PublicName {
  name: string;
  /** the file declaring it */
  file: string;
  /** the declaration has a non-empty doc comment */
  documented: boolean;
}

const parsed = new Map<string, ts.SourceFile>();
function parse(file: string): ts.SourceFile {
  let sf = parsed.get(file);
  if (!sf) {
    sf = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
    parsed.set(file, sf);
  }
  return sf;
}

const hasExport = (node: ts.Node) =>
  ts.canHaveModifiers(node) && (ts.getModifiers(node) ?? []).some((m) => m.kind === ts.SyntaxKind.ExportKeyword);

function documented(node: ts.Node): boolean {
  return ts.getJSDocCommentsAndTags(node).some((d) => {
    const text = ts.isJSDoc(d) ? ts.getTextOfJSDocComment(d.comment) : ts.getTextOfJSDocComment(d.comment);
    return (text ?? '').trim().length > 0 || (ts.isJSDoc(d) && (d.tags?.length ?? 0) > 0);
  });
}

/** The declarations a statement makes under their names (exported or not: `export { x }` may name a local). */
function declared(statement: ts.Statement): [string, ts.Node][] {
  if (ts.isVariableStatement(statement)) {
    return statement.declarationList.declarations.flatMap((d) =>
      ts.isIdentifier(d.name) ? [[d.name.text, d] as [string, ts.Node]] : [],
    );
  }
  if (
    (ts.isFunctionDeclaration(statement) ||
      ts.isClassDeclaration(statement) ||
      ts.isInterfaceDeclaration(statement) ||
      ts.isTypeAliasDeclaration(statement) ||
      ts.isEnumDeclaration(statement)) &&
    statement.name
  ) {
    return [[statement.name.text, statement]];
  }
  return [];
}

/** Where `name`, as exported by `file`, is declared; null when the file does not export it. */
function resolveExport(file: string, name: string, seen = new Set<string>()): { file: string; node: ts.Node } | null {
  const key = `${file}#${name}`;
  if (seen.has(key)) return null;
  seen.add(key);
  const sf = parse(file);
  const target = (spec: ts.Expression) => resolve(dirname(file), (spec as ts.StringLiteral).text);
  for (const st of sf.statements) {
    if (hasExport(st)) for (const [n, node] of declared(st)) if (n === name) return { file, node };
    if (!ts.isExportDeclaration(st)) continue;
    if (!st.exportClause) {
      const hit = st.moduleSpecifier && resolveExport(target(st.moduleSpecifier), name, seen);
      if (hit) return hit;
      continue;
    }
    if (!ts.isNamedExports(st.exportClause)) continue;
    for (const el of st.exportClause.elements) {
      if (el.name.text !== name) continue;
      const local = el.propertyName?.text ?? name;
      if (st.moduleSpecifier) return resolveExport(target(st.moduleSpecifier), local, seen);
      for (const s2 of sf.statements) for (const [n, node] of declared(s2)) if (n === local) return { file, node };
    }
  }
  return null;
}

/** The names `entry` exports (its own declarations and re-exports), each with where it is declared and whether it is documented. */
export function publicNames(entry: string): PublicName[] {
  const sf = parse(entry);
  const names = new Set<string>();
  for (const st of sf.statements) {
    if (hasExport(st)) for (const [n] of declared(st)) names.add(n);
    if (ts.isExportDeclaration(st) && st.exportClause && ts.isNamedExports(st.exportClause))
      for (const el of st.exportClause.elements) names.add(el.name.text);
  }
  return [...names].sort().map((name) => {
    const hit = resolveExport(entry, name);
    if (!hit) throw new Error(`${entry} exports ${name} but its declaration was not found`);
    return { name, file: hit.file, documented: documented(hit.node) };
  });
}
