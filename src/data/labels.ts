/**
 * Class labels from data: the number of classes comes from the labels (the largest + 1), or from the
 * class names the config gives; string labels become indices in sorted order (code-unit order, the
 * same on every machine), and those names go into the checkpoint so predictions can be named.
 */

const INTEGER = /^\d+$/;

/** How a split's label values map to class indices. */
export interface LabelMap {
  /** class names in index order; undefined for integer labels without names */
  classNames?: string[];
  /** the class index of `value`, or an error naming `where` */
  index(value: string, where: string): number;
  /** the number of classes seen so far (integer labels grow it) */
  classes(): number;
}

/**
 * A label map for text labels (a CSV column). With `given` names, a label is one of them (its
 * position is its index) or an integer index into them. Without, integer labels stay as they are
 * (classes = the largest + 1 over every split) and other labels are sorted into class names taken
 * from `trainValues` alone.
 */
export function labelMapFromText(trainValues: readonly string[], given?: readonly string[]): LabelMap {
  if (given) {
    const at = new Map(given.map((name, i) => [name, i] as const));
    return {
      classNames: [...given],
      classes: () => given.length,
      index(value, where) {
        const v = value.trim();
        const i = at.get(v) ?? (INTEGER.test(v) ? Number(v) : -1);
        if (i >= 0 && i < given.length) return i;
        throw new Error(
          `${where}: label ${JSON.stringify(value)} is not one of data.classNames (${given.join(', ')}) nor an index 0..${given.length - 1}; fix the label or add the class to data.classNames`,
        );
      },
    };
  }
  if (trainValues.every((v) => INTEGER.test(v.trim()))) {
    let max = -1;
    return {
      classes: () => max + 1,
      index(value, where) {
        const v = value.trim();
        if (!INTEGER.test(v)) {
          throw new Error(
            `${where}: label ${JSON.stringify(value)} is not a class index; the training set's labels are whole numbers ≥ 0, so every label must be one (or name the classes with data.classNames)`,
          );
        }
        const i = Number(v);
        if (!Number.isSafeInteger(i) || i > 1_000_000)
          throw new Error(`${where}: label ${v} is too large for a class index (at most 1000000)`);
        if (i > max) max = i;
        return i;
      },
    };
  }
  const names = [...new Set(trainValues.map((v) => v.trim()))].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
  const at = new Map(names.map((name, i) => [name, i] as const));
  return {
    classNames: names,
    classes: () => names.length,
    index(value, where) {
      const i = at.get(value.trim());
      if (i !== undefined) return i;
      const shown = names.length > 12 ? `${names.slice(0, 12).join(', ')}, …` : names.join(', ');
      throw new Error(
        `${where}: label ${JSON.stringify(value)} is not among the training set's classes (${shown}); every class must appear in the training data`,
      );
    },
  };
}

/**
 * The class count of numeric labels over every split (largest + 1), checked against `given` names.
 * `splits` name their source for errors.
 */
export function classesOfIntegerLabels(
  splits: readonly { name: string; labels: Int32Array }[],
  given?: readonly string[],
): number {
  let max = -1;
  for (const { name, labels } of splits) {
    for (let i = 0; i < labels.length; i++) {
      const v = labels[i]!;
      if (v < 0) throw new Error(`${name}: label ${v} of sample ${i} is negative; class labels are indices 0, 1, 2, …`);
      if (given && v >= given.length) {
        throw new Error(
          `${name}: label ${v} of sample ${i} is outside 0..${given.length - 1}, the ${given.length} classes of data.classNames; fix the label or name every class`,
        );
      }
      if (v > max) max = v;
    }
  }
  return given ? given.length : max + 1;
}
