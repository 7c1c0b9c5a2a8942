/**
 * The test set `paratrain eval` measures. For a CSV run whose checkpoint records its columns by name:
 * the config's test file alone, read by those names with the checkpoint's classes and normalisation,
 * so neither the training file nor the columns' order in the test file matter. Otherwise: the
 * config's data as training loads it.
 */
import type { RunConfig } from '../../config/runConfig.ts';
import { loadCsvTestFile } from '../../data/csvDataset.ts';
import { limitDataset, type Dataset } from '../../data/dataset.ts';
import { resolveDataPath } from '../../data/files.ts';
import { applyNormalization } from '../../data/normalize.ts';
import type { DataInfo } from '../checkpoint/checkpointInfo.ts';
import { loadData } from '../run/loadData.ts';

/** The test set (undefined when the config has none) and where the data came from, for messages. */
export async function evalTestSet(
  config: RunConfig,
  info: DataInfo | undefined,
  classes: number,
  log?: (message: string) => void,
): Promise<{ test?: Dataset; source: string }> {
  const spec = config.data;
  if (spec.dataset !== 'csv' || !info?.columns) {
    const data = await loadData(config, log);
    return { test: data.test, source: data.source };
  }
  if (spec.test === undefined) return { source: 'the CSV config, which names no data.test,' };
  const file = resolveDataPath(spec.test, spec.dir);
  const read = loadCsvTestFile(file, spec, info.columns, info.classNames);
  const test = spec.testLimit ? { ...limitDataset(read, spec.testLimit) } : read;
  if (info.task === 'classification') {
    for (let i = 0; i < test.count; i++) {
      if (test.labels[i]! >= classes)
        throw new Error(
          `${file}: row ${i + 1} has class ${test.labels[i]}, but the model scores ${classes} classes (0..${classes - 1}); fix the label`,
        );
    }
    test.classes = classes;
  }
  if (info.normalization) {
    test.images = test.images.slice(0, test.count * read.sampleShape[0]!);
    applyNormalization(test, info.normalization);
  }
  return { test, source: `CSV ${file}` };
}
