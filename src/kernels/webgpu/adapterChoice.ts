/**
 * Which GPU adapter a device thread opens, from PARATRAIN_WEBGPU_ADAPTER and the device's slot on
 * its host, resolved against the adapters Dawn lists (adapterList.ts). Pure, so that the rules and
 * their errors are tested without a GPU.
 *
 * Dawn's Node bindings open an adapter by name only: the first, in Dawn's order, whose name contains
 * the one asked for (`create(['adapter=…'])`). So a process reaches just the first of identical
 * GPUs; one that must use another is shown only its own GPU (docs/backends.md, "Several GPUs").
 */
import { BackendSettingError } from '../registry.ts';

export const ADAPTER_VARIABLE = 'PARATRAIN_WEBGPU_ADAPTER';

/** unset: by the device's slot; `#k`: the k-th adapter listed; otherwise a part of an adapter's name */
export type AdapterChoice = { by: 'slot' } | { by: 'index'; index: number } | { by: 'name'; name: string };

/** One adapter as Dawn lists it: its backend and the name `adapter=` matches. */
export interface ListedAdapter {
  backend: string;
  name: string;
}

export interface ChosenAdapter {
  /** its place in the list (`#index`) */
  index: number;
  name: string;
}

/** Software adapters (SwiftShader, lavapipe): correct but slow, so a slot reaches them only without a GPU. */
export const SOFTWARE_ADAPTER = /swiftshader|llvmpipe|lavapipe|software/i;

const DOCS = 'docs/backends.md, "Several GPUs"';

/** The setting's form; a malformed `#index` is an error naming the fix. */
export function parseAdapterChoice(setting: string | undefined): AdapterChoice {
  const value = setting?.trim() ?? '';
  if (value === '') return { by: 'slot' };
  if (!value.startsWith('#')) return { by: 'name', name: value };
  if (!/^#\d+$/.test(value))
    throw new BackendSettingError(
      `${ADAPTER_VARIABLE}=${value}: an adapter index is # and a whole number, #0 for the first adapter \`paratrain info\` lists (${DOCS})`,
    );
  return { by: 'index', index: Number(value.slice(1)) };
}

/** The adapters by index, identical neighbours together: `#0 'A', #1–#3 'B'`. */
export function listText(adapters: readonly ListedAdapter[]): string {
  const parts: string[] = [];
  for (let i = 0; i < adapters.length; ) {
    let j = i;
    while (j + 1 < adapters.length && adapters[j + 1]!.name === adapters[i]!.name) j++;
    parts.push(`${j > i ? `#${i}–#${j}` : `#${i}`} '${adapters[i]!.name}'`);
    i = j + 1;
  }
  return parts.join(', ');
}

/** The first adapter Dawn's `adapter=name` opens. */
const firstNamed = (adapters: readonly ListedAdapter[], name: string) =>
  adapters.findIndex((a) => a.name.includes(name));

/**
 * The adapter to open for `choice`, a device in `slot` of its host (LOCAL_RANK × devices per
 * process + thread index): by slot, the GPU `slot mod GPUs`, counting software adapters only where
 * there is no other. Throws a BackendSettingError naming the fix where that adapter cannot be
 * reached: an index past the list, a name no adapter has, or an adapter behind an identical name.
 */
export function chooseAdapter(choice: AdapterChoice, adapters: readonly ListedAdapter[], slot: number): ChosenAdapter {
  const seen = `this process sees ${adapters.length} adapter${adapters.length === 1 ? '' : 's'}: ${listText(adapters)}`;
  if (choice.by === 'name') {
    const index = firstNamed(adapters, choice.name);
    if (index < 0)
      throw new BackendSettingError(
        `${ADAPTER_VARIABLE}=${choice.name} matches no adapter's name; ${seen}. Set it to a part of one of those names or to an #index, or unset it (${DOCS})`,
      );
    return { index, name: adapters[index]!.name };
  }
  let index: number;
  if (choice.by === 'index') {
    index = choice.index;
    if (index >= adapters.length)
      throw new BackendSettingError(
        `${ADAPTER_VARIABLE}=#${index} is past the list: ${seen}. Use ${adapters.length === 1 ? '#0' : `#0 to #${adapters.length - 1}`} or a name, or unset it to spread the devices over the GPUs (${DOCS})`,
      );
  } else {
    const gpus = adapters.map((_, i) => i).filter((i) => !SOFTWARE_ADAPTER.test(adapters[i]!.name));
    const candidates = gpus.length > 0 ? gpus : adapters.map((_, i) => i);
    index = candidates[slot % candidates.length]!;
  }
  const name = adapters[index]!.name;
  const reached = firstNamed(adapters, name);
  if (reached !== index) {
    const asked =
      choice.by === 'index'
        ? `${ADAPTER_VARIABLE}=#${index} names`
        : `the device in slot ${slot} of this host (LOCAL_RANK × devices per process + thread) maps to`;
    throw new BackendSettingError(
      `${asked} adapter #${index} '${name}', which this process cannot open: Dawn's Node bindings open the first adapter whose name contains the one asked for, #${reached} here (${seen}). ` +
        `Give each process one GPU and show it only that one (${DOCS}), or set ${ADAPTER_VARIABLE}=#${reached} to put this process's devices on #${reached}`,
    );
  }
  return { index, name };
}
