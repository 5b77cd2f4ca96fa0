// Uploading a file from the browser into a task's files with the resumable upload API
// (docs/api.md "Task files"), as api/file_transfer.h's UploadTaskFile does: ask what an earlier
// upload of the path received, send the rest in 4 MiB chunks at that offset, commit with the
// file's SHA-256, and start over from 0 once if the server's bytes turn out to be another file's.
import { ApiError, call } from "../api/client";
import { sha256Hex } from "../api/sign";

export const kChunkBytes = 4 * 1024 * 1024;

export type Progress = (sent: number, total: number) => void;

export async function uploadFile(task: string, path: string, file: Blob, progress?: Progress): Promise<void> {
  const sha256 = await sha256Hex(await file.arrayBuffer());
  for (let attempt = 0; attempt < 2; attempt++) {
    let offset = 0;
    if (attempt === 0 && file.size > 0) {
      const status = await call("getUpload", { path: { id: task }, query: { path } });
      if (status.received <= file.size) offset = status.received;
    }
    progress?.(offset, file.size);
    while (offset < file.size) {
      const chunk = file.slice(offset, offset + kChunkBytes);
      const r = await call("putUploadChunk", { path: { id: task }, query: { path, offset, size: file.size }, body: chunk });
      offset = r.received;
      progress?.(offset, file.size);
    }
    try {
      await call("commitUpload", { path: { id: task }, body: { path, size: file.size, sha256 } });
      return;
    } catch (e) {
      // A hash mismatch discards what the server had: send the whole file again, once.
      if (attempt === 0 && e instanceof ApiError && e.code === "invalid_argument" && offset > 0) continue;
      throw e;
    }
  }
}

/** A local file to upload and the task path it becomes. */
export interface PlannedUpload {
  file: File;
  path: string;
}

/**
 * The task paths of picked files: a single file becomes `base` (default its name); files picked
 * as a folder keep their path below the folder, under `base` (default the folder's name).
 */
export function planUploads(files: File[], base: string): PlannedUpload[] {
  const clean = base.replace(/^\/+|\/+$/g, "");
  return files.map((f) => {
    const rel = (f as File & { webkitRelativePath?: string }).webkitRelativePath || "";
    if (rel) {
      const parts = rel.split("/");
      const below = parts.slice(1).join("/");
      return { file: f, path: `${clean || parts[0]}/${below}` };
    }
    return { file: f, path: files.length === 1 && clean ? clean : clean ? `${clean}/${f.name}` : f.name };
  });
}
