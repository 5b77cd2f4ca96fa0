// Volumes in the console (docs/volumes.md): what people type checked with core's rules and
// messages (core/volume.cc: a volume's name, a mount's path below /root and the overlap of two —
// a dataset's mounts follow the same rules, lib/datasets —, a task's mounts), the
// size field's number and unit as bytes, and how a volume's place is shown (as the CLI's
// `gpupool volume ls` shows it).
import type { Parsed } from "./parse";

export const kTaskHome = "/root";
export const kMaxVolumeNameBytes = 63;
export const kMaxVolumeMounts = 16;
/** The largest volume: 1 PiB (proto::kMaxVolumeBytes). */
export const kMaxVolumeBytes = 2 ** 50;
export const kVolumeUnits = { GiB: 2 ** 30, TiB: 2 ** 40 } as const;
export type VolumeUnit = keyof typeof kVolumeUnits;

/** A number of GiB or TiB ("200", "1.5") as bytes: more than 0, at most 1 PiB. */
export function parseVolumeSize(text: string, unit: VolumeUnit): Parsed<number> {
  const m = /^\s*(\d+)(?:\.(\d{1,3}))?\s*$/.exec(text);
  if (!m) return { error: `invalid size '${text}': use a number of ${unit}, like 200 or 1.5` };
  const per = kVolumeUnits[unit];
  const bytes = Number(m[1]) * per + Math.round((Number((m[2] ?? "").padEnd(3, "0")) * per) / 1000);
  if (bytes <= 0) return { error: "size must be larger than 0" };
  if (!Number.isSafeInteger(bytes) || bytes > kMaxVolumeBytes) return { error: `size '${text} ${unit}' is larger than a volume may be (1 PiB)` };
  return { value: bytes };
}

/** Bytes as the size field shows them: whole TiB in TiB, else GiB (up to three decimals). */
export function volumeSizeField(bytes: number): { text: string; unit: VolumeUnit } {
  if (bytes >= kVolumeUnits.TiB && bytes % kVolumeUnits.TiB === 0) return { text: String(bytes / kVolumeUnits.TiB), unit: "TiB" };
  return { text: String(Math.round((bytes / kVolumeUnits.GiB) * 1000) / 1000), unit: "GiB" };
}

/** "v-<digits>". */
export function isVolumeId(s: string): boolean {
  return /^v-\d+$/.test(s);
}

/** core's ValidateVolumeName: null when `name` may name a new volume, else why not. */
export function checkVolumeName(name: string, what = "name"): string | null {
  const bytes = new TextEncoder().encode(name).length;
  const fail = (rule: string) => `${what} '${name}' ${rule}`;
  if (bytes === 0 || bytes > kMaxVolumeNameBytes) return fail(`must be 1 to ${kMaxVolumeNameBytes} characters`);
  if (!/^[a-z0-9]/.test(name)) return fail("must start with a lower-case letter or a digit");
  if (!/^[a-z0-9_.-]+$/.test(name)) return fail("may hold only lower-case letters, digits, '_', '.' and '-'");
  if (isVolumeId(name)) return fail("is a volume id's form (v-<number>); choose another name");
  return null;
}

/** A mount's path as people write it ("/root/data", "data", "/root/data/") → "/root/data". */
export function volumeMountPath(path: string, what = "path"): Parsed<string> {
  let p = path.trim();
  if (p.startsWith("/")) {
    if (p !== kTaskHome && !p.startsWith(kTaskHome + "/")) return { error: `${what} '${path}' is outside the task's workspace ${kTaskHome}: mount a volume below it, e.g. ${kTaskHome}/data` };
    p = p.slice(kTaskHome.length);
  }
  const parts = p.split("/").filter((c) => c !== "" && c !== ".");
  if (parts.includes("..")) return { error: `${what} '${path}' has a '..' component; paths may not leave the workspace` };
  if (parts.length === 0) return { error: `${what} '${path}' is the task's whole workspace ${kTaskHome}: mount a volume below it, e.g. ${kTaskHome}/data` };
  return { value: `${kTaskHome}/${parts.join("/")}` };
}

/** core's MountPathsOverlap: two canonical mount paths are the same or one is below the other. */
export function pathsOverlap(a: string, b: string): boolean {
  return a === b || a.startsWith(b + "/") || b.startsWith(a + "/");
}

export interface MountDraft {
  volume: string;
  path: string;
  read_only: boolean;
}

/**
 * A task's mounts as the form holds them → the body's `volumes`, or the first error: a volume
 * picked, a path below /root, at most 16, no volume twice, no path inside another's.
 */
export function checkMounts(drafts: MountDraft[]): Parsed<MountDraft[]> {
  if (drafts.length > kMaxVolumeMounts) return { error: `volumes: ${drafts.length} mounts; at most ${kMaxVolumeMounts} are allowed` };
  const out: MountDraft[] = [];
  for (const [i, d] of drafts.entries()) {
    if (!d.volume) return { error: `volumes[${i}]: pick a volume` };
    const path = volumeMountPath(d.path, `volumes[${i}].path`);
    if (path.error !== undefined) return { error: path.error };
    for (const [j, o] of out.entries()) {
      if (o.volume === d.volume) return { error: `volumes[${i}].volume '${d.volume}' is mounted twice` };
      if (pathsOverlap(path.value, o.path)) return { error: `volumes[${i}].path ${path.value} overlaps volumes[${j}].path ${o.path}` };
    }
    out.push({ volume: d.volume, path: path.value, read_only: d.read_only });
  }
  return { value: out };
}

/** Where a volume lives, as `gpupool volume ls` says it. */
export function volumeWhere(v: { shared: boolean; node: string }): string {
  if (v.shared) return "shared storage";
  return v.node || "its first task's node";
}
