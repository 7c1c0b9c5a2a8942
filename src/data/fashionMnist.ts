import { existsSync, statSync } from 'node:fs';
import { homedir, networkInterfaces, type NetworkInterfaceInfo } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { datasetFromIdx, type Dataset } from './dataset.ts';
import { downloadFile, type DownloadOptions } from './download.ts';
import { readIdxImagesAndLabels } from './idx.ts';

/**
 * Finds Fashion-MNIST (Zalando Research, MIT licence) in IDX format. Lookup order: the directory the
 * user gave; where Debian's `dataset-fashion-mnist` installs it; the download cache (filled from the
 * canonical address when online); the subset shipped in data/fashion-mnist-subset so runs and tests
 * work offline.
 */

export const FASHION_MNIST_FILES = {
  trainImages: 'train-images-idx3-ubyte',
  trainLabels: 'train-labels-idx1-ubyte',
  testImages: 't10k-images-idx3-ubyte',
  testLabels: 't10k-labels-idx1-ubyte',
} as const;
type FileKey = keyof typeof FASHION_MNIST_FILES;
const FILE_KEYS = Object.keys(FASHION_MNIST_FILES) as FileKey[];

/** Where `apt-get install dataset-fashion-mnist` puts the four files (as .gz). */
export const DEBIAN_FASHION_MNIST_DIR = '/usr/share/datasets/fashion-mnist';

export const FASHION_MNIST_URL = 'http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/';

/** MD5s of the published .gz files, from the Fashion-MNIST README. */
export const FASHION_MNIST_GZ_MD5: Record<FileKey, string> = {
  trainImages: '8d4fb7e6c68d591d4c3dfef9ec88bf0d',
  trainLabels: '25c81989df183df01b3e8a0aad5dffbe',
  testImages: 'bef4ecab320f06d8554ea6380940ec79',
  testLabels: 'bb300cfdad3c16e7a12a480ee83cd310',
};

/**
 * MD5s of the decompressed files. Debian recompresses the .gz files (different bytes, same content),
 * so these are what identifies the data whatever its compression.
 */
export const FASHION_MNIST_RAW_MD5: Record<FileKey, string> = {
  trainImages: 'f4a8712d7a061bf5bd6d2ca38dc4d50a',
  trainLabels: '9018921c3c673c538a1fc5bad174d6f9',
  testImages: '8181f5470baa50b63fa0f6fddb340f0a',
  testLabels: '15d484375f8d13e6eb1aabb0c3f46965',
};

export const FASHION_MNIST_CLASSES = [
  'T-shirt/top',
  'Trouser',
  'Pullover',
  'Dress',
  'Coat',
  'Sandal',
  'Shirt',
  'Sneaker',
  'Bag',
  'Ankle boot',
] as const;

/** The shipped subset; two levels below the repo root both as src/data/ and as dist/data/. */
export const FASHION_MNIST_SUBSET_DIR = fileURLToPath(new URL('../../data/fashion-mnist-subset', import.meta.url));

export interface LoadFashionMnistOptions {
  /** directory holding the four IDX files (raw or .gz); when given, nothing else is tried */
  dir?: string;
  /** download into the cache when nothing is found locally (default true; env PARATRAIN_OFFLINE=1 forbids it) */
  allowDownload?: boolean;
  /** download cache (default $PARATRAIN_CACHE/fashion-mnist, else ~/.cache/paratrain/fashion-mnist) */
  cacheDir?: string;
  /** system directories tried after `dir` (default: Debian's) */
  systemDirs?: string[];
  /** where progress and fall-through notes go (default: stderr) */
  log?: (msg: string) => void;
  /** where the four .gz files are downloaded from (default FASHION_MNIST_URL) */
  url?: string;
  /** the download's bounds and name lookup (downloadFile's options, but the MD5) */
  download?: Omit<DownloadOptions, 'md5'>;
  /** the machine's network interfaces (default os.networkInterfaces): with none but loopback nothing is downloaded */
  interfaces?: () => NodeJS.Dict<NetworkInterfaceInfo[]>;
}

export interface FashionMnist {
  train: Dataset;
  test: Dataset;
  /** human description of where the data came from */
  source: string;
}

/** The default download cache, following PARATRAIN_CACHE, then XDG_CACHE_HOME, then ~/.cache. */
export function defaultFashionMnistCacheDir(env: NodeJS.ProcessEnv = process.env): string {
  const root = env.PARATRAIN_CACHE || join(env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'paratrain');
  return join(root, 'fashion-mnist');
}

function offlineByEnv(env: NodeJS.ProcessEnv = process.env): boolean {
  const v = (env.PARATRAIN_OFFLINE ?? '').trim().toLowerCase();
  return v !== '' && v !== '0' && v !== 'false' && v !== 'no';
}

function isDir(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

/** Paths of the four files in `dir` (raw name preferred over .gz) and the names of those missing. */
export function findFashionMnistFiles(dir: string): { paths: Partial<Record<FileKey, string>>; missing: string[] } {
  const paths: Partial<Record<FileKey, string>> = {};
  const missing: string[] = [];
  for (const key of FILE_KEYS) {
    const name = FASHION_MNIST_FILES[key];
    const found = [name, `${name}.gz`].map((n) => join(dir, n)).find((p) => existsSync(p));
    if (found) paths[key] = found;
    else missing.push(`${name}[.gz]`);
  }
  return { paths, missing };
}

/** Loads the four files of a directory known to hold them all. */
function loadDir(paths: Record<FileKey, string>): { train: Dataset; test: Dataset } {
  const classes = FASHION_MNIST_CLASSES.length;
  const train = datasetFromIdx(
    'fashion-mnist-train',
    readIdxImagesAndLabels(paths.trainImages, paths.trainLabels),
    classes,
    paths.trainLabels,
  );
  const test = datasetFromIdx(
    'fashion-mnist-test',
    readIdxImagesAndLabels(paths.testImages, paths.testLabels),
    classes,
    paths.testLabels,
  );
  return { train, test };
}

function complete(found: ReturnType<typeof findFashionMnistFiles>): Record<FileKey, string> | undefined {
  return found.missing.length === 0 ? (found.paths as Record<FileKey, string>) : undefined;
}

/** Some interface other than loopback is up: a download may reach something. */
function networkUp(interfaces: () => NodeJS.Dict<NetworkInterfaceInfo[]>): boolean {
  return Object.values(interfaces()).some((list) => list?.some((i) => !i.internal));
}

/** Downloads the missing .gz files into `cacheDir`, each checked against its published MD5. */
async function fillCache(
  cacheDir: string,
  missing: FileKey[],
  log: (msg: string) => void,
  options: LoadFashionMnistOptions,
): Promise<void> {
  const base = options.url ?? FASHION_MNIST_URL;
  for (const key of missing) {
    const file = `${FASHION_MNIST_FILES[key]}.gz`;
    await downloadFile(new URL(file, base).href, join(cacheDir, file), {
      ...options.download,
      md5: FASHION_MNIST_GZ_MD5[key],
    });
    // logged after success so that an offline machine prints only the one failure line
    log(`fashion-mnist: downloaded ${file} into ${cacheDir} (MD5 verified)`);
  }
}

function counts(train: Dataset, test: Dataset): string {
  return `${train.count.toLocaleString('en-US')} train / ${test.count.toLocaleString('en-US')} test`;
}

export async function loadFashionMnist(options: LoadFashionMnistOptions = {}): Promise<FashionMnist> {
  const log = options.log ?? ((msg: string) => process.stderr.write(`${msg}\n`));

  // (a) an explicit directory: it must be right, never silently replaced by another source
  if (options.dir !== undefined) {
    const dir = options.dir;
    if (!isDir(dir)) {
      throw new Error(
        `Fashion-MNIST directory ${dir} does not exist; fix --data (or data.dir in the config), or leave it out to use the installed, cached or shipped copy`,
      );
    }
    const found = findFashionMnistFiles(dir);
    const paths = complete(found);
    if (!paths) {
      throw new Error(
        `Fashion-MNIST directory ${dir} lacks ${found.missing.join(', ')}; put the four IDX files of the release there (raw or .gz)`,
      );
    }
    const { train, test } = loadDir(paths);
    return { train, test, source: `${dir} (${counts(train, test)})` };
  }

  // (b) system-wide installs (Debian's package)
  for (const dir of options.systemDirs ?? [DEBIAN_FASHION_MNIST_DIR]) {
    const paths = complete(findFashionMnistFiles(dir));
    if (!paths) continue;
    const { train, test } = loadDir(paths);
    const what = dir === DEBIAN_FASHION_MNIST_DIR ? `Debian package dataset-fashion-mnist, ${dir}` : dir;
    return { train, test, source: `${what} (${counts(train, test)})` };
  }

  // (c) the download cache, filled from the canonical address when allowed
  const cacheDir = options.cacheDir ?? defaultFashionMnistCacheDir();
  let found = findFashionMnistFiles(cacheDir);
  const mayDownload = options.allowDownload !== false && !offlineByEnv();
  if (!complete(found) && mayDownload && !networkUp(options.interfaces ?? networkInterfaces)) {
    log('fashion-mnist: no network interface is up, so nothing is downloaded; using the shipped subset');
  } else if (!complete(found) && mayDownload) {
    const missing = FILE_KEYS.filter((k) => found.paths[k] === undefined);
    try {
      await fillCache(cacheDir, missing, log, options);
      found = findFashionMnistFiles(cacheDir);
    } catch (err) {
      // offline or blocked: one line, then the shipped subset (the first failure ends the download)
      log(
        `fashion-mnist: ${err instanceof Error ? err.message : String(err)}; using the shipped subset instead (PARATRAIN_OFFLINE=1 skips the download)`,
      );
    }
  }
  const cached = complete(found);
  if (cached) {
    const { train, test } = loadDir(cached);
    return { train, test, source: `download cache ${cacheDir} (${counts(train, test)})` };
  }

  // (d) the shipped subset
  const subset = FASHION_MNIST_SUBSET_DIR;
  const paths = complete(findFashionMnistFiles(subset));
  if (!paths) {
    throw new Error(
      `Fashion-MNIST not found: no data.dir given, ${DEBIAN_FASHION_MNIST_DIR} and ${cacheDir} do not hold the four files, and the shipped subset ${subset} is incomplete; install the Debian package dataset-fashion-mnist or set data.dir`,
    );
  }
  const { train, test } = loadDir(paths);
  return {
    train,
    test,
    source: `shipped subset ${subset} (${counts(train, test)}; for the full 60,000 / 10,000 install dataset-fashion-mnist or set data.dir)`,
  };
}
