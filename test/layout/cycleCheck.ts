/**
 * Import cycles in a source tree: the strongly connected components of its module graph (every
 * reference sourceGraph.ts reads, type-only imports too, since a type-only cycle still ties two
 * files' meanings together), found with Tarjan's algorithm. Each cycle is reported as one path
 * through it, so the message names the imports to cut.
 */
import { moduleReferences, sourceFiles } from './sourceGraph.ts';

/** The import cycles among the files under `dir`: each a list of files, the first repeated at the end. */
export function importCycles(dir: string): string[][] {
  const files = sourceFiles(dir);
  const edges = new Map<string, string[]>();
  for (const f of files) {
    const targets = moduleReferences(f)
      .map((r) => r.target)
      .filter((t): t is string => t !== null && t !== f);
    edges.set(
      f,
      [...new Set(targets)].filter((t) => t.startsWith(dir)),
    );
  }
  return stronglyConnected(files, edges)
    .filter((c) => c.length > 1)
    .map((c) => pathThrough(c, edges));
}

/** Tarjan's strongly connected components, iterative so a deep graph cannot overflow the stack. */
function stronglyConnected(nodes: string[], edges: Map<string, string[]>): string[][] {
  const index = new Map<string, number>(),
    low = new Map<string, number>(),
    onStack = new Set<string>();
  const stack: string[] = [],
    out: string[][] = [];
  let next = 0;
  for (const root of nodes) {
    if (index.has(root)) continue;
    const work: { node: string; i: number }[] = [{ node: root, i: 0 }];
    index.set(root, next);
    low.set(root, next++);
    stack.push(root);
    onStack.add(root);
    while (work.length > 0) {
      const top = work[work.length - 1];
      const succ = edges.get(top.node) ?? [];
      if (top.i < succ.length) {
        const w = succ[top.i++];
        if (!index.has(w)) {
          index.set(w, next);
          low.set(w, next++);
          stack.push(w);
          onStack.add(w);
          work.push({ node: w, i: 0 });
        } else if (onStack.has(w)) low.set(top.node, Math.min(low.get(top.node)!, index.get(w)!));
        continue;
      }
      work.pop();
      if (work.length > 0) {
        const parent = work[work.length - 1].node;
        low.set(parent, Math.min(low.get(parent)!, low.get(top.node)!));
      }
      if (low.get(top.node) === index.get(top.node)) {
        const component: string[] = [];
        let w: string;
        do {
          w = stack.pop()!;
          onStack.delete(w);
          component.push(w);
        } while (w !== top.node);
        out.push(component);
      }
    }
  }
  return out;
}

/** A closed walk through a component from its first file (sorted), by breadth-first search back to it. */
function pathThrough(component: string[], edges: Map<string, string[]>): string[] {
  const inside = new Set(component);
  const start = [...component].sort()[0];
  const from = new Map<string, string>();
  const queue = [start];
  while (queue.length > 0) {
    const n = queue.shift()!;
    for (const w of edges.get(n) ?? []) {
      if (!inside.has(w)) continue;
      if (w === start) {
        const path = [start];
        for (let p: string | undefined = n; p !== undefined && p !== start; p = from.get(p)) path.splice(1, 0, p);
        return [...path, start];
      }
      if (!from.has(w)) {
        from.set(w, n);
        queue.push(w);
      }
    }
  }
  return [...component, component[0]];
}
