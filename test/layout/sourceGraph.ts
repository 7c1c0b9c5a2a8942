/**
 * The module graph of a source tree, read with the TypeScript parser (not regular expressions, so
 * comments and strings that look like imports are not mistaken for them). Shared by the layout tests.
 *
 * A file references another by
 *   'import'   import … from './x.ts', import './x.ts', export … from './x.ts' (type-only ones too)
 *   'dynamic'  import('./x.ts') with a literal path
 *   'url'      a relative path passed next to import.meta.url, as worker and child entries are named:
 *              new URL('./x.ts', import.meta.url), new URL(`./x${ext}`, import.meta.url),
 *              spawnModuleWorker(import.meta.url, './x', …); the path may omit its extension
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import ts from 'typescript';

export type ReferenceKind = 'import' | 'dynamic' | 'url';

export interface ModuleReference {
  kind: ReferenceKind;
  /** the path as written in the source ('./x.ts'; for a template literal, its text before the first ${…}) */
  specifier: string;
  /** 1-based line of the reference */
  line: number;
  /** absolute path of the .ts file it names, or null when it names none (outside the tree, a data folder) */
  target: string | null;
}

const SOURCE = /\.(ts|mts)$/;

/** Every TypeScript source file under `dir` (absolute paths, sorted; declaration files excluded). */
export function sourceFiles(dir: string): string[] {
  if (!existsSync(dir)) return [];
  const out: string[] = [];
  for (const name of readdirSync(dir).sort()) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...sourceFiles(p));
    else if (SOURCE.test(name) && !name.endsWith('.d.ts')) out.push(p);
  }
  return out;
}

/** Every folder under `dir`, `dir` itself excluded (absolute paths, sorted). */
export function sourceFolders(dir: string): string[] {
  if (!existsSync(dir)) return [];
  const out: string[] = [];
  for (const name of readdirSync(dir).sort()) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(p, ...sourceFolders(p));
  }
  return out;
}

/** The .ts file a relative specifier names from `fromFile`: as written, .js → .ts, + .ts, or /index.ts. */
export function resolveSpecifier(fromFile: string, specifier: string): string | null {
  if (!specifier.startsWith('./') && !specifier.startsWith('../')) return null;
  const p = resolve(dirname(fromFile), specifier);
  const candidates = [p, p.replace(/\.js$/, '.ts'), p.replace(/\.mjs$/, '.mts'), `${p}.ts`, join(p, 'index.ts')];
  for (const c of candidates) if (SOURCE.test(c) && existsSync(c) && statSync(c).isFile()) return c;
  return null;
}

const isImportMetaUrl = (n: ts.Node): boolean =>
  ts.isPropertyAccessExpression(n) &&
  n.name.text === 'url' &&
  ts.isMetaProperty(n.expression) &&
  n.expression.keywordToken === ts.SyntaxKind.ImportKeyword;

/** The literal text of a string or template argument (a template's text before its first substitution). */
function literalText(n: ts.Node): string | null {
  if (ts.isStringLiteral(n) || ts.isNoSubstitutionTemplateLiteral(n)) return n.text;
  if (ts.isTemplateExpression(n)) return n.head.text;
  return null;
}

/** The references of one file to other modules, in source order. */
export function moduleReferences(file: string, text = readFileSync(file, 'utf8')): ModuleReference[] {
  const sf = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const refs: ModuleReference[] = [];
  const add = (kind: ReferenceKind, specifier: string, at: ts.Node) => {
    const line = sf.getLineAndCharacterOfPosition(at.getStart(sf)).line + 1;
    refs.push({ kind, specifier, line, target: resolveSpecifier(file, specifier) });
  };
  const visit = (n: ts.Node): void => {
    if (
      (ts.isImportDeclaration(n) || ts.isExportDeclaration(n)) &&
      n.moduleSpecifier &&
      ts.isStringLiteral(n.moduleSpecifier)
    ) {
      add('import', n.moduleSpecifier.text, n);
    } else if (ts.isCallExpression(n) && n.expression.kind === ts.SyntaxKind.ImportKeyword) {
      const path = n.arguments[0] && literalText(n.arguments[0]);
      if (path) add('dynamic', path, n);
    } else if ((ts.isCallExpression(n) || ts.isNewExpression(n)) && n.arguments?.some(isImportMetaUrl)) {
      for (const arg of n.arguments) {
        const path = literalText(arg);
        if (path && (path.startsWith('./') || path.startsWith('../'))) add('url', path, n);
      }
    }
    ts.forEachChild(n, visit);
  };
  visit(sf);
  return refs;
}

/** `root`-relative path with forward slashes, for messages and table entries. */
export function repoPath(root: string, file: string): string {
  return relative(root, file).split(sep).join('/');
}
