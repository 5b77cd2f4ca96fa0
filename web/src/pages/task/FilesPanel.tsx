// The task page's files: the listing (its inputs while pending, its workspace on its node while it
// runs, its outputs once it ended), a download per file (checked against its SHA-256), each
// folder — or everything — as a zip built in the browser, and uploads from the browser while the
// task is pending (its inputs) or running (into its workspace); resumable.
import { useState } from "preact/hooks";
import { call, messageOf, urlOf } from "../../api/client";
import { operations, type FileEntry } from "../../api/types.gen";
import { Empty, ErrorBox, Loading, useAsync } from "../../components/ui";
import { formatBytes } from "../../lib/format";
import { readTaskFile, saveBlob, zipTaskFiles } from "../../lib/files";
import { planUploads, uploadFile } from "../../lib/upload";

/** The folders that hold files ("a", "a/b", …), for zipping one. */
function folders(files: FileEntry[]): string[] {
  const out = new Set<string>();
  for (const f of files) {
    const parts = f.path.split("/");
    for (let i = 1; i < parts.length; i++) out.add(parts.slice(0, i).join("/"));
  }
  return [...out].sort();
}

export function FilesPanel({ task, canUpload }: { task: string; canUpload: boolean }) {
  const listing = useAsync((signal) => call("listFiles", { path: { id: task }, signal }), [task]);
  const [busy, setBusy] = useState<string | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [uploadPath, setUploadPath] = useState("");

  const run = async (what: string, f: () => Promise<void>) => {
    setBusy(what);
    setError(null);
    try {
      await f();
    } catch (e) {
      setError(new Error(`${what}: ${messageOf(e)}`));
    } finally {
      setBusy(null);
    }
  };
  const download = (f: FileEntry) =>
    run(`Downloading ${f.path}`, async () => saveBlob(new Blob([await readTaskFile(task, f)]), f.path.split("/").pop()!));
  const downloadZip = (dir: string) =>
    run(`Zipping ${dir || "all files"}`, async () => {
      const blob = await zipTaskFiles(task, listing.data!.files, dir, (n) => setBusy(`Zipping ${dir || "all files"}: ${n} files read`));
      saveBlob(blob, `${task}${dir ? "-" + dir.replace(/\//g, "-") : ""}.zip`);
    });
  const upload = (list: FileList | null) => {
    const planned = planUploads(list ? Array.from(list) : [], uploadPath);
    if (!planned.length) return;
    run("Uploading", async () => {
      for (const [i, p] of planned.entries()) {
        await uploadFile(task, p.path, p.file, (sent, total) => setBusy(`Uploading ${p.path} (${i + 1}/${planned.length}): ${formatBytes(sent)} of ${formatBytes(total)}`));
      }
      listing.reload();
    });
  };

  const files = listing.data?.files ?? [];
  return (
    <section class="panel" aria-labelledby="files-title" data-testid="task-files">
      <div class="panel-head">
        <h2 id="files-title">Files</h2>
        <div class="toolbar">
          <button type="button" class="btn btn-plain" onClick={listing.reload} data-testid="files-refresh">
            Refresh
          </button>
          {files.length > 0 && (
            <button type="button" class="btn btn-plain" onClick={() => downloadZip("")} disabled={!!busy} data-testid="files-zip-all">
              Download all (.zip)
            </button>
          )}
        </div>
      </div>
      <ErrorBox error={listing.error} testid="files-error" />
      <ErrorBox error={error} testid="files-action-error" />
      {busy && (
        <div class="muted" role="status" data-testid="files-progress">
          {busy}
        </div>
      )}
      {listing.loading && !listing.data ? (
        <Loading what="files" />
      ) : files.length === 0 ? (
        <Empty>No files yet{canUpload ? ": upload files below." : "."}</Empty>
      ) : (
        <table class="table" data-testid="files-table">
          <thead>
            <tr>
              <th scope="col">Path</th>
              <th scope="col" class="num">Size</th>
              <th scope="col">SHA-256</th>
            </tr>
          </thead>
          <tbody>
            {files.map((f) => (
              <tr key={f.path} data-testid="file-row" data-path={f.path}>
                <td>
                  <a
                    href={urlOf(operations.readFile.path, { id: task }, { path: f.path })}
                    download={f.path.split("/").pop()}
                    onClick={(e) => {
                      e.preventDefault();
                      if (!busy) download(f);
                    }}
                    data-testid="file-download"
                  >
                    {f.path}
                  </a>
                </td>
                <td class="num">{formatBytes(f.size)}</td>
                <td class="muted">
                  <code title={f.sha256}>{f.sha256.slice(0, 12)}</code>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {folders(files).length > 0 && (
        <div class="toolbar">
          Folder as .zip:
          {folders(files).map((d) => (
            <button key={d} type="button" class="btn btn-plain" onClick={() => downloadZip(d)} disabled={!!busy} data-testid="files-zip-folder" data-folder={d}>
              {d}/
            </button>
          ))}
        </div>
      )}
      {canUpload && (
        <div class="upload grid3" data-testid="files-upload">
          <label>
            Upload files
            <input type="file" multiple onChange={(e) => upload(e.currentTarget.files)} disabled={!!busy} data-testid="files-upload-input" />
          </label>
          <label>
            Upload a folder
            <input type="file" {...{ webkitdirectory: "" }} onChange={(e) => upload(e.currentTarget.files)} disabled={!!busy} data-testid="files-upload-folder" />
          </label>
          <label>
            As task path
            <input value={uploadPath} placeholder="default: the name" onInput={(e) => setUploadPath(e.currentTarget.value)} data-testid="files-upload-path" />
          </label>
        </div>
      )}
    </section>
  );
}
