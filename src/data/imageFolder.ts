/**
 * `dataset: imageFolder`: `DIR/<class>/*.png|jpg`. Class names are the sub-folders' names in sorted
 * order (code-unit order, the same everywhere), each sample is decoded and brought to the model's
 * [H, W, C] (imageDecode.ts). Other files are skipped; a class folder without images is an error.
 */
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Dataset } from './dataset.ts';
import { decodeImage, imageToSample } from './imageDecode.ts';
import { isDirectory, readDataFile } from './files.ts';

const IMAGE = /\.(png|jpe?g)$/i;
const byCodeUnits = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/** The class folders of `dir`, sorted. */
export function classFolders(dir: string, field: string): string[] {
  if (!isDirectory(dir))
    throw new Error(
      `${field}: image folder ${dir} does not exist or is not a folder; it should hold one sub-folder of images per class`,
    );
  const classes = readdirSync(dir, { withFileTypes: true })
    .filter((e) => e.isDirectory() && !e.name.startsWith('.'))
    .map((e) => e.name)
    .sort(byCodeUnits);
  if (classes.length === 0)
    throw new Error(
      `${field}: ${dir} has no class folders; put each class's images in a sub-folder named after it (${dir}/cat/1.png, ${dir}/dog/2.png)`,
    );
  return classes;
}

/** The image files of one class folder, sorted. */
function imageFiles(folder: string): string[] {
  const files = readdirSync(folder, { withFileTypes: true })
    .filter((e) => e.isFile() && IMAGE.test(e.name) && !e.name.startsWith('.'))
    .map((e) => e.name)
    .sort(byCodeUnits);
  if (files.length === 0)
    throw new Error(`${folder}: this class folder holds no .png or .jpg images; add images or remove the folder`);
  return files.map((f) => join(folder, f));
}

export interface ImageFolderOptions {
  /** [H, W, C] every sample is brought to (model.input) */
  shape: readonly [number, number, number];
  /** resize images of another size (bilinear) instead of refusing them */
  resize: boolean;
  /** the training set's class names: another split must have the same folders (a subset is allowed) */
  classNames?: readonly string[];
}

/** Every image of a class folder tree as one Dataset. */
export function loadImageFolder(dir: string, field: string, o: ImageFolderOptions): Dataset {
  const folders = classFolders(dir, field);
  const classNames = o.classNames ? [...o.classNames] : folders;
  const files: { path: string; label: number }[] = [];
  for (const name of folders) {
    const label = classNames.indexOf(name);
    if (label < 0) {
      throw new Error(
        `${field}: ${join(dir, name)} is a class the training folder does not have (its classes: ${classNames.join(', ')}); every class needs training images`,
      );
    }
    for (const path of imageFiles(join(dir, name))) files.push({ path, label });
  }
  const [H, W, C] = o.shape;
  const size = H * W * C;
  const images = new Float32Array(files.length * size);
  const labels = new Int32Array(files.length);
  files.forEach((f, i) => {
    imageToSample(decodeImage(readDataFile(f.path), f.path), o.shape, o.resize, f.path, images, i * size);
    labels[i] = f.label;
  });
  return {
    name: dir,
    images,
    labels,
    count: files.length,
    sampleShape: [H, W, C],
    classes: classNames.length,
    classNames,
    task: 'classification',
  };
}
