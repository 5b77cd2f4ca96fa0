// The task page's snapshots (docs/snapshots.md), newest first: when and why each was taken, in
// which run and where, what it holds and what it added to the project's storage, how consistent
// it is and how long the task was frozen; an ended task resumes from any of them, and each can be
// deleted (the storage it alone holds is freed).
import { call } from "../../api/client";
import type { TaskDetail } from "../../api/types.gen";
import { ActionButton, Empty, ErrorBox, Loading, useAsync, useNow } from "../../components/ui";
import { formatAge, formatBytes, formatTime } from "../../lib/format";

export function SnapshotsPanel({ task, final, onChange }: { task: TaskDetail; final: boolean; onChange: () => void }) {
  const now = useNow(1000);
  // Every snapshot stored becomes the task's resume_from, and the page follows the task (live,
  // and read again after its Snapshot button): the list is read again whenever that changes.
  const list = useAsync((signal) => call("listSnapshots", { query: { task: task.id }, signal }).then((r) => r.snapshots.reverse()), [task.id, task.resume_from]);
  const snapshots = list.data ?? [];
  return (
    <section class="panel" aria-labelledby="snapshots-title" data-testid="task-snapshots">
      <h2 id="snapshots-title">Snapshots</h2>
      <ErrorBox error={list.error} testid="snapshots-error" />
      {!list.data ? (
        !list.error && <Loading what="snapshots" />
      ) : snapshots.length === 0 ? (
        <Empty>No snapshot yet: one is taken before a stop, preemption or drain, and whenever you ask.</Empty>
      ) : (
        <table class="table" data-testid="snapshots-table">
          <thead>
            <tr>
              <th scope="col">Id</th>
              <th scope="col">Taken</th>
              <th scope="col">Trigger</th>
              <th scope="col" class="num">Run</th>
              <th scope="col">Node</th>
              <th scope="col" class="num">Files</th>
              <th scope="col" class="num">Size</th>
              <th scope="col" class="num">New</th>
              <th scope="col">Consistency</th>
              <th scope="col" class="num">Frozen</th>
              <th scope="col">Image</th>
              <th scope="col">
                <span class="visually-hidden">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {snapshots.map((s) => (
              <tr key={s.id} data-testid="snapshot-row" data-snapshot={s.id} data-trigger={s.trigger}>
                <td>
                  <code>{s.id}</code>
                  {s.id === task.resume_from && <span class="muted"> (resumes from)</span>}
                </td>
                <td>
                  <time dateTime={new Date(s.taken_ms).toISOString()}>{formatTime(s.taken_ms)}</time> <span class="muted">({formatAge(s.taken_ms, now)} ago)</span>
                </td>
                <td>{s.trigger}</td>
                <td class="num">{s.run}</td>
                <td>{s.node}</td>
                <td class="num">{s.files}</td>
                <td class="num">{formatBytes(s.bytes)}</td>
                <td class="num">{formatBytes(s.new_bytes)}</td>
                <td>{s.consistency}</td>
                <td class="num" title={`${s.duration_ms} ms from the request to the stored record`}>
                  {s.frozen_ms} ms
                </td>
                <td
                  title={s.image ? `${s.image.id} over ${s.image.base}` : "the task's own image, unchanged"}
                >
                  {s.image
                    ? `${s.image.id.slice(7, 19)} (${formatBytes(s.image.bytes ?? 0)}${s.image.saved ? ', saved here' : ''})`
                    : '—'}
                </td>
                <td>
                  <div class="toolbar">
                    {final && <ActionButton label="Resume from this" kind="primary" testid="snapshot-resume" run={() => call("resumeTask", { path: { id: task.id }, body: { snapshot: s.id } }).then(onChange)} />}
                    <ActionButton
                      label="Delete"
                      kind="danger"
                      testid="snapshot-delete"
                      confirm={`Delete ${s.id}? The storage it alone holds is freed.`}
                      run={() =>
                        call("deleteSnapshot", { path: { id: s.id } }).then(() => {
                          list.reload();
                          onChange();  // the task may now resume from another snapshot
                        })
                      }
                    />
                  </div>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
