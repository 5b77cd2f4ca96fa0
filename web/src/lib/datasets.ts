// Datasets in the console (docs/datasets.md): a task's dataset mounts as the create-task form
// holds them, checked with core's rules and messages (core/dataset.cc ValidateDatasetMounts: a
// path below /root as a volume's, at most 8, no dataset twice, no path inside another dataset's
// or one of the task's volumes'), and how a dataset's version and a task's mount are named.
import type { Dataset, DatasetVersion } from "../api/types.gen";
import type { Parsed } from "./parse";
import { pathsOverlap, volumeMountPath } from "./volumes";

export const kMaxDatasetMounts = 8;

export interface DatasetDraft {
  dataset: string;
  /** 0: the latest when the task is submitted. */
  version: number;
  path: string;
}

/** Its latest version (what a mount without a version gets); undefined before its first push. */
export function latestVersion(d: Pick<Dataset, "versions">): DatasetVersion | undefined {
  return d.versions[d.versions.length - 1];
}

/** "imagenet@2" (a mount's or a version's name, as the CLI's --dataset writes it); "imagenet" for the latest. */
export function datasetAt(name: string, version: number): string {
  return version > 0 ? `${name}@${version}` : name;
}

/**
 * A task's dataset mounts as the form holds them → the body's `datasets`, or the first error: a
 * dataset picked, a path below /root, at most 8, no dataset twice, no path inside another's or
 * inside one of `volumes` (the body's, already checked).
 */
export function checkDatasetMounts(drafts: DatasetDraft[], volumes: ReadonlyArray<{ path: string }>): Parsed<DatasetDraft[]> {
  if (drafts.length > kMaxDatasetMounts) return { error: `datasets: ${drafts.length} mounts; at most ${kMaxDatasetMounts} are allowed` };
  const out: DatasetDraft[] = [];
  for (const [i, d] of drafts.entries()) {
    if (!d.dataset) return { error: `datasets[${i}]: pick a dataset` };
    const path = volumeMountPath(d.path, `datasets[${i}].path`);
    if (path.error !== undefined) return { error: path.error };
    for (const [j, o] of out.entries()) {
      if (o.dataset === d.dataset) return { error: `datasets[${i}].dataset '${d.dataset}' is mounted twice` };
      if (pathsOverlap(path.value, o.path)) return { error: `datasets[${i}].path ${path.value} overlaps datasets[${j}].path ${o.path}` };
    }
    for (const [j, v] of volumes.entries()) {
      if (pathsOverlap(path.value, v.path)) return { error: `datasets[${i}].path ${path.value} overlaps volumes[${j}].path ${v.path}` };
    }
    out.push({ dataset: d.dataset, version: d.version, path: path.value });
  }
  return { value: out };
}
