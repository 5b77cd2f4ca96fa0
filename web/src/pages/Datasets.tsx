// The datasets the user may mount (docs/datasets.md): their projects' and the published ones —
// read-only, versioned directories of files, pushed with the CLI (`gpupool dataset push DIR NAME`)
// and mounted read-only by tasks (create a task with a dataset). The list (the latest version, its
// files and size, published, the tasks that mount it), a dataset's versions opened in place, each
// deletable, the dataset deletable, both asked first with the server's refusal — tasks still
// mount it — shown beside the button; Publish / Unpublish for admins.
import { useState } from "preact/hooks";
import { call } from "../api/client";
import { useLive } from "../api/live";
import { session } from "../api/session";
import type { Dataset } from "../api/types.gen";
import { ActionButton, Empty, ErrorBox, Loading, useAsync } from "../components/ui";
import { datasetAt, latestVersion } from "../lib/datasets";
import { formatBytes, formatTime } from "../lib/format";
import { useBatch, useStore } from "../lib/store";
import { Link } from "../router";

/** A dataset's versions, oldest first, each with its Delete where the user may delete them. */
function Versions({ dataset, deletable, onChanged }: { dataset: Dataset; deletable: boolean; onChanged: (d: Dataset) => void }) {
  if (dataset.versions.length === 0) {
    return (
      <p class="muted" data-testid="dataset-no-version">
        No version yet: push one with <code>gpupool dataset push DIR {dataset.name}</code>.
      </p>
    );
  }
  return (
    <table class="table" data-testid="dataset-versions-table">
      <thead>
        <tr>
          <th scope="col">Version</th>
          <th scope="col">Files</th>
          <th scope="col">Size</th>
          <th scope="col" title="What its push added to the project's storage: chunks no earlier version or snapshot had">
            New bytes
          </th>
          <th scope="col">Pushed</th>
          <th scope="col">
            <span class="visually-hidden">Actions</span>
          </th>
        </tr>
      </thead>
      <tbody>
        {dataset.versions.map((v) => (
          <tr key={v.version} data-testid="dataset-version-row" data-version={v.version}>
            <td>
              <code>{datasetAt(dataset.name, v.version)}</code>
            </td>
            <td>{v.files}</td>
            <td>{formatBytes(v.bytes)}</td>
            <td>{formatBytes(v.new_bytes)}</td>
            <td class="nowrap" title={`manifest ${v.manifest}`}>
              {formatTime(v.created_ms)} by {v.created_by}
            </td>
            <td>
              {deletable && (
                <ActionButton
                  label="Delete"
                  kind="danger"
                  testid="dataset-version-delete"
                  confirm={`Delete version ${v.version} of the dataset ${dataset.name} (${dataset.id})? The other versions keep their numbers.`}
                  run={() => call("deleteDatasetVersion", { path: { id: dataset.id, version: String(v.version) } }).then(onChanged)}
                />
              )}
            </td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

export function Datasets() {
  const me = useStore(session)!;
  const admin = me.role === "admin";
  const datasets = useAsync((signal) => call("listDatasets", { signal }).then((r) => r.datasets), []);
  const [open, setOpen] = useState<string | null>(null);
  // The tasks that mount a dataset change as tasks start and end: re-read once per burst.
  const reload = useBatch<null>(() => datasets.reload(), 500);
  useLive("task", (t) => !!t.datasets?.length && reload(null), []);
  useLive("resync", () => datasets.reload(), []);
  const replace = (d: Dataset) => datasets.set((old) => old?.map((x) => (x.id === d.id ? d : x)));
  const list = datasets.data;
  return (
    <section class="page" data-testid="page-datasets" aria-labelledby="datasets-title">
      <h1 id="datasets-title">Datasets</h1>
      <p class="muted">
        A dataset is a read-only, versioned directory of files: push a directory with <code>gpupool dataset push DIR NAME</code> (again for each new version; only the
        changed chunks are sent), then tasks mount it read-only below <code>/root</code> (create a task with a dataset, or{" "}
        <code>gpupool submit --dataset NAME[@VERSION]:/root/data</code>). Listed here: your projects' datasets and those an admin published to every project.
      </p>
      <section class="panel" aria-labelledby="datasets-list-title" data-testid="datasets">
        <div class="panel-head">
          <h2 id="datasets-list-title">Your datasets</h2>
          <div class="toolbar">
            <button type="button" class="btn btn-plain" onClick={() => datasets.reload()} data-testid="datasets-refresh">
              Refresh
            </button>
          </div>
        </div>
        <ErrorBox error={datasets.error} testid="datasets-error" />
        {!list ? (
          !datasets.error && <Loading what="datasets" />
        ) : list.length === 0 ? (
          <Empty>No dataset yet.</Empty>
        ) : (
          <table class="table" data-testid="datasets-table">
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Id</th>
                <th scope="col">Project</th>
                <th scope="col">Latest</th>
                <th scope="col">Files</th>
                <th scope="col">Size</th>
                <th scope="col">Published</th>
                <th scope="col">Used by</th>
                <th scope="col" class="hide-mid">
                  Created
                </th>
                <th scope="col">
                  <span class="visually-hidden">Actions</span>
                </th>
              </tr>
            </thead>
            {list.map((d) => {
              const latest = latestVersion(d);
              const expanded = open === d.id;
              // A published dataset of another project is the user's to mount, not to delete.
              const deletable = admin || me.projects.includes(d.project);
              return (
                <tbody key={d.id} data-testid="dataset" data-dataset={d.id} data-name={d.name}>
                  <tr data-testid="dataset-row" data-published={String(d.published)}>
                    <td>
                      <strong>{d.name}</strong>
                    </td>
                    <td class="nowrap">
                      <code>{d.id}</code>
                    </td>
                    <td>{d.project}</td>
                    <td data-testid="dataset-latest" class={latest ? undefined : "muted"}>
                      {latest ? `v${latest.version}` : "none yet"}
                    </td>
                    <td data-testid="dataset-files">{latest ? latest.files : "-"}</td>
                    <td data-testid="dataset-size">{latest ? formatBytes(latest.bytes) : "-"}</td>
                    <td class="nowrap">
                      <span data-testid="dataset-published">{d.published ? "every project" : "no"}</span>{" "}
                      {admin && (
                        <ActionButton
                          label={d.published ? "Unpublish" : "Publish"}
                          testid="dataset-publish"
                          run={() => call("updateDataset", { path: { id: d.id }, body: { published: !d.published } }).then(replace)}
                        />
                      )}
                    </td>
                    <td data-testid="dataset-used-by">
                      {d.used_by.length === 0
                        ? "-"
                        : d.used_by.map((t, i) => (
                            <span key={t}>
                              {i > 0 && ", "}
                              <Link href={`/tasks/${t}`}>{t}</Link>
                            </span>
                          ))}
                    </td>
                    <td class="hide-mid nowrap" title={`by ${d.created_by}`}>
                      {formatTime(d.created_ms)}
                    </td>
                    <td class="nowrap">
                      <button
                        type="button"
                        class="btn btn-plain btn-small"
                        onClick={() => setOpen(expanded ? null : d.id)}
                        aria-expanded={expanded}
                        aria-controls={`dataset-versions-${d.id}`}
                        data-testid="dataset-versions-toggle"
                      >
                        Versions ({d.versions.length})
                      </button>{" "}
                      {deletable && (
                        <ActionButton
                          label="Delete"
                          kind="danger"
                          testid="dataset-delete"
                          confirm={`Delete the dataset ${d.name} (${d.id}) with its ${d.versions.length} version(s)?`}
                          run={() => call("deleteDataset", { path: { id: d.id } }).then(() => datasets.reload())}
                        />
                      )}
                    </td>
                  </tr>
                  {expanded && (
                    <tr id={`dataset-versions-${d.id}`} data-testid="dataset-versions">
                      <td colSpan={10}>
                        <Versions dataset={d} deletable={deletable} onChanged={replace} />
                      </td>
                    </tr>
                  )}
                </tbody>
              );
            })}
          </table>
        )}
      </section>
    </section>
  );
}
