// Downloading a task's files in the browser: a file read chunk by chunk (GET
// /v1/tasks/{id}/files/content) and checked against the SHA-256 the listing gave, a folder as a
// zip of its files, and handing a Blob to the browser as a download.
import { send, urlOf } from "../api/client";
import { sha256Hex } from "../api/sign";
import { operations, type FileEntry } from "../api/types.gen";
import { zip } from "./zip";

const kChunk = 4 * 1024 * 1024;

/** The bytes of one task file, verified against `entry.sha256`. */
export async function readTaskFile(task: string, entry: FileEntry): Promise<Uint8Array<ArrayBuffer>> {
  const out = new Uint8Array(entry.size);
  let offset = 0;
  while (offset < entry.size) {
    const url = urlOf(operations.readFile.path, { id: task }, { path: entry.path, offset, length: kChunk });
    const res = await send("GET", url);
    const chunk = new Uint8Array(await res.arrayBuffer());
    if (chunk.length === 0) throw new Error(`${entry.path}: the server sent no bytes at offset ${offset} of ${entry.size}`);
    out.set(chunk.subarray(0, entry.size - offset), offset);
    offset += chunk.length;
  }
  const got = await sha256Hex(out);
  if (got !== entry.sha256) throw new Error(`${entry.path}: downloaded bytes hash to ${got}, the listing says ${entry.sha256}`);
  return out;
}

/** Offers `blob` to the user as the file `name`. */
export function saveBlob(blob: Blob, name: string): void {
  const url = URL.createObjectURL(blob);
  const a = document.createElement("a");
  a.href = url;
  a.download = name;
  document.body.appendChild(a);
  a.click();
  a.remove();
  window.setTimeout(() => URL.revokeObjectURL(url), 60_000);
}

/** The files below `dir` ("" for all) as a zip, their paths relative to `dir`. */
export async function zipTaskFiles(task: string, files: FileEntry[], dir: string, progress?: (done: number) => void): Promise<Blob> {
  const prefix = dir ? dir + "/" : "";
  const entries = [];
  for (const f of files.filter((x) => x.path.startsWith(prefix))) {
    entries.push({ path: f.path.slice(prefix.length), data: await readTaskFile(task, f) });
    progress?.(entries.length);
  }
  return zip(entries);
}
