// One task: its state and the timeline of its events, why it is pending (the scheduler's
// counted reasons), what it asked for and where it runs, live charts of its usage and reported
// metrics, its log, its files, its snapshots (resume from one, delete one), what it cost so far
// with the per-second bill, the buttons snapshot / resume / stop / release / resubmit / delete,
// and while it runs how to reach it (its ports' Open links, ssh, the shell). Changes arrive on the
// live stream (task=<id>).
import { useEffect, useState } from "preact/hooks";
import { ApiError, call } from "../api/client";
import { useLive, useLiveWatch } from "../api/live";
import type { Task, TaskCost, TaskDetail, TaskSubmit } from "../api/types.gen";
import { ActionButton, Empty, ErrorBox, Facts, Loading, StateBadge, useAsync, useNow } from "../components/ui";
import { datasetAt } from "../lib/datasets";
import { formatAge, formatBytes, formatDuration, formatGpuRequest, formatMib, formatMilli, formatMoney, formatTime, shellJoin } from "../lib/format";
import { Link, navigate } from "../router";
import { ChartsPanel } from "./task/ChartsPanel";
import { ConnectPanel } from "./task/ConnectPanel";
import { FilesPanel } from "./task/FilesPanel";
import { LogView } from "./task/LogView";
import { SnapshotsPanel } from "./task/SnapshotsPanel";

const kFinal = ["succeeded", "failed", "stopped", "lost"];
const kHolding = ["scheduled", "starting", "running"];

/** What resubmitting `t` sends: the same request, as a new task. */
function resubmitBody(t: Task): TaskSubmit {
  const b: TaskSubmit = {
    name: t.name || undefined,
    project: t.project,
    cpu_milli: t.cpu_milli,
    memory_mib: t.memory_mib,
    disk_gib: t.disk_gib,
    priority: t.priority,
    restartable: t.restartable,
    max_runtime_ms: t.max_runtime_ms,
    snapshot_every_ms: t.snapshot_every_ms,
  };
  if (t.command.length) b.command = t.command;
  if (t.image) b.image = t.image;
  if (t.gpu_count) b.gpu_count = t.gpu_count;
  if (t.gpu_milli) b.gpu_milli = t.gpu_milli;
  if (t.gpu_mem_mib) b.gpu_mem_mib = t.gpu_mem_mib;
  if (t.mig_profile) b.mig_profile = t.mig_profile;
  if (t.gpu_models.length) b.gpu_models = t.gpu_models;
  if (t.stop_when) b.stop_when = t.stop_when;
  return b;
}

function CostPanel({ task }: { task: TaskDetail }) {
  const now = useNow(1000);
  const holding = kHolding.includes(task.state);
  const [cost, setCost] = useState<TaskCost | null>(null);
  const [error, setError] = useState<unknown>(null);
  useEffect(() => {
    let live = true;
    const get = () =>
      call("getTaskCost", { path: { id: task.id } }).then(
        (c) => live && (setCost(c), setError(null)),
        (e) => live && setError(e),
      );
    get();
    const t = holding ? window.setInterval(get, 15_000) : undefined;
    return () => {
      live = false;
      window.clearInterval(t);
    };
  }, [task.id, task.state]);

  const entries = cost?.entries ?? [];
  const last = entries[entries.length - 1];
  // The per-second bill: the last billed interval's, or before the first meter tick what has
  // accrued since the task was bound.
  const accruedMs = cost ? cost.as_of_ms - cost.billed_until_ms : 0;
  const perSecond =
    last && last.to_ms > last.from_ms
      ? (last.amount_micros * 1000) / (last.to_ms - last.from_ms)
      : cost && cost.accrued_micros > 0 && accruedMs > 0
        ? (cost.accrued_micros * 1000) / accruedMs
        : 0;
  const soFar = cost ? cost.cost_micros + cost.accrued_micros + (holding && perSecond ? (perSecond * Math.max(0, now - cost.as_of_ms)) / 1000 : 0) : 0;
  return (
    <section class="panel" aria-labelledby="cost-title" data-testid="task-cost">
      <h2 id="cost-title">Cost</h2>
      <ErrorBox error={error} testid="cost-error" />
      {!cost ? (
        <Loading what="the cost" />
      ) : (
        <>
          <Facts
            rows={[
              ["Cost so far", <span data-testid="cost-so-far">{formatMoney(Math.round(soFar))}</span>],
              ["Billed", formatMoney(cost.cost_micros)],
              ["Accrued, not yet billed", formatMoney(cost.accrued_micros)],
              ["Rate", perSecond ? `${formatMoney(Math.round(perSecond))} per second (${formatMoney(Math.round(perSecond * 3600))} per hour)` : "-"],
              ["Billed until", formatTime(cost.billed_until_ms)],
            ]}
          />
          {entries.length === 0 ? (
            <Empty>Nothing billed yet.</Empty>
          ) : (
            <details>
              <summary>The bill ({entries.length} entries)</summary>
              <table class="table" data-testid="cost-entries">
                <thead>
                  <tr>
                    <th scope="col">From</th>
                    <th scope="col">To</th>
                    <th scope="col" class="num">Seconds</th>
                    <th scope="col" class="num">Amount</th>
                    <th scope="col" class="num">Per second</th>
                  </tr>
                </thead>
                <tbody>
                  {entries.slice(-200).map((e) => {
                    const s = (e.to_ms - e.from_ms) / 1000;
                    return (
                      <tr key={e.key}>
                        <td>{formatTime(e.from_ms)}</td>
                        <td>{formatTime(e.to_ms)}</td>
                        <td class="num">{s}</td>
                        <td class="num">{formatMoney(e.amount_micros)}</td>
                        <td class="num">{s > 0 ? formatMoney(Math.round(e.amount_micros / s)) : "-"}</td>
                      </tr>
                    );
                  })}
                </tbody>
              </table>
            </details>
          )}
        </>
      )}
    </section>
  );
}

export function TaskPage({ id }: { id: string }) {
  const now = useNow(1000);
  useLiveWatch({ task: id });
  const detail = useAsync((signal) => call("getTask", { path: { id }, signal }), [id]);
  const [snapshotNote, setSnapshotNote] = useState("");  // the last snapshot taken from here
  const events = useAsync((signal) => call("listTaskEvents", { path: { id }, signal }).then((r) => r.events), [id]);

  useLive(
    "task",
    (t) => {
      if (t.id !== id) return;
      detail.set((old) => (old ? { ...old, ...t } : old));
      detail.reload();
      events.reload();
    },
    [id],
  );
  useLive("task_deleted", (e) => e.id === id && navigate("/tasks", true), [id]);
  useLive(
    "resync",
    () => {
      detail.reload();
      events.reload();
    },
    [id],
  );

  // The scheduler's counted reasons are not part of a task's events (only its state and reason
  // are): while it waits in the queue, they are read again every 5 s.
  const queued = detail.data?.state === "pending" && !detail.data.held;
  useEffect(() => {
    if (!queued) return undefined;
    const timer = window.setInterval(detail.reload, 5000);
    return () => window.clearInterval(timer);
  }, [queued]);

  const t = detail.data;
  if (!t) {
    return (
      <section class="page" data-testid="page-task">
        <h1>Task {id}</h1>
        {detail.error instanceof ApiError && detail.error.status === 404 ? (
          <p class="empty" data-testid="task-not-found">
            There is no task {id} that you may see.
          </p>
        ) : detail.error ? (
          <ErrorBox error={detail.error} testid="task-error" />
        ) : (
          <Loading what={`task ${id}`} />
        )}
        <Link href="/tasks">Back to the tasks</Link>
      </section>
    );
  }
  const final = kFinal.includes(t.state);
  const runtime = t.started_ms ? (t.finished_ms || now) - t.started_ms : 0;
  return (
    <section class="page page-wide" data-testid="page-task" data-task={t.id} aria-labelledby="task-title">
      <div class="page-head">
        <h1 id="task-title">
          {t.id} {t.name && <span class="muted">{t.name}</span>}
        </h1>
        <StateBadge state={t.state} held={t.held} testid="task-state" />
        <div class="toolbar" role="group" aria-label="Task actions">
          {t.state === "running" && (
            <ActionButton
              label="Snapshot"
              testid="task-snapshot"
              run={() =>
                call("snapshotTask", { path: { id } }).then((s) => {
                  setSnapshotNote(`${s.id}: ${s.files} files, ${formatBytes(s.bytes)} (${formatBytes(s.new_bytes)} new), ${s.consistency}-consistent, frozen ${s.frozen_ms} ms`);
                  detail.reload();
                })
              }
            />
          )}
          {final && t.resume_from && <ActionButton label="Resume" kind="primary" testid="task-resume" run={() => call("resumeTask", { path: { id }, body: {} }).then(() => detail.reload())} />}
          {!final && <ActionButton label="Stop" kind="danger" testid="task-stop" confirm={`Stop ${t.id}?`} run={() => call("stopTask", { path: { id } }).then((x) => detail.set((o) => (o ? { ...o, ...x } : o)))} />}
          {t.state === "pending" && t.held && <ActionButton label="Release" kind="primary" testid="task-release" run={() => call("releaseTask", { path: { id } }).then(() => detail.reload())} />}
          <ActionButton label="Resubmit" testid="task-resubmit" run={() => call("submitTask", { body: resubmitBody(t) }).then((n) => navigate(`/tasks/${n.id}`))} />
          {final && <ActionButton label="Delete" kind="danger" testid="task-delete" confirm={`Delete ${t.id} with its files and logs?`} run={() => call("deleteTask", { path: { id } }).then(() => navigate("/tasks"))} />}
        </div>
      </div>
      <ConnectPanel task={t} />
      {snapshotNote && (
        <p class="muted" role="status" data-testid="task-snapshot-note">
          Snapshot {snapshotNote}
        </p>
      )}
      <p class="reason" data-testid="task-reason">
        {t.reason}
      </p>
      {t.state === "pending" && (
        <section class="panel pending" aria-labelledby="pending-title" data-testid="task-pending">
          <h2 id="pending-title">Why it is pending</h2>
          <p data-testid="task-pending-reason">{t.pending_reason || t.reason}</p>
          {t.queue_position > 0 && <p data-testid="task-queue-position">Position {t.queue_position} in the queue.</p>}
          {t.pending_nodes.length > 0 && (
            <ul data-testid="task-pending-nodes">
              {t.pending_nodes.map((p) => (
                <li key={p.reason}>
                  {p.count} node{p.count === 1 ? "" : "s"}: {p.reason}
                </li>
              ))}
            </ul>
          )}
        </section>
      )}
      <div class="columns">
        <section class="panel" aria-labelledby="req-title" data-testid="task-facts">
          <h2 id="req-title">Request and placement</h2>
          <Facts
            rows={[
              ["Project", t.project],
              ["User", t.user],
              ["Run", t.image ? `${t.image}${t.command.length ? " " + shellJoin(t.command) : ""}` : shellJoin(t.command)],
              ["GPUs", formatGpuRequest(t)],
              ["GPU models", t.gpu_models.join(", ") || "any"],
              ["CPU", t.cpu_milli ? formatMilli(t.cpu_milli) : ""],
              ["Memory", t.memory_mib ? formatMib(t.memory_mib) : ""],
              ["Disk", t.disk_gib ? `${t.disk_gib} GiB` : ""],
              ["Priority", String(t.priority)],
              ["Max runtime", t.max_runtime_ms ? formatDuration(t.max_runtime_ms) : "none"],
              ["Stop when", t.stop_when],
              ["Restartable", t.restartable ? "yes" : "no"],
              ["Volumes", t.volumes.map((m) => `${m.volume} at ${m.path}${m.read_only ? " (read-only)" : ""}${m.shared ? " (shared)" : ""}`).join("; ")],
              ["Datasets", t.datasets.map((m) => `${datasetAt(m.dataset, m.version ?? 0)} at ${m.path} (read-only)`).join("; ")],
              ["Job", t.job_id ? `${t.job_id}, member ${t.member_index}${t.ended_by ? ` (ended with ${t.ended_by})` : ""}` : ""],
              ["Node", t.placement ? `${t.placement.node}, GPU ${t.placement.gpus.join(", ") || "-"}${t.placement.mig_profile ? ` (${t.placement.mig_profile} at ${t.placement.mig_start})` : ""}` : ""],
              ["Submitted", `${formatTime(t.created_ms)} (${formatAge(t.created_ms, now)} ago)`],
              ["Started", formatTime(t.started_ms)],
              ["Finished", formatTime(t.finished_ms)],
              ["Runtime", runtime ? formatDuration(Math.floor(runtime / 1000) * 1000) : ""],
              ["Exit code", final && t.state !== "stopped" ? String(t.exit_code) : ""],
              ["Preemptions", t.preemptions ? String(t.preemptions) : ""],
              ["Runs", t.run > 1 ? String(t.run) : ""],
              ["Snapshots", t.snapshot_every_ms ? `every ${formatDuration(t.snapshot_every_ms)}` : ""],
              ["Resumes from", t.resume_from],
              ["Work lost", t.work_lost_ms ? `${formatDuration(t.work_lost_ms)} (its last interruption)` : ""],
            ]}
          />
        </section>
        <section class="panel" aria-labelledby="timeline-title" data-testid="task-timeline">
          <h2 id="timeline-title">Timeline</h2>
          <ErrorBox error={events.error} />
          {!events.data ? (
            <Loading what="events" />
          ) : (
            <ol class="timeline">
              {events.data.map((e, i) => (
                <li key={i} data-testid="timeline-event" data-to={e.to}>
                  <time dateTime={new Date(e.time_ms).toISOString()}>{formatTime(e.time_ms)}</time> {e.from && e.from !== e.to && (
                    <>
                      <StateBadge state={e.from} /> →{" "}
                    </>
                  )}
                  <StateBadge state={e.to} /> <span class="muted">{e.reason}</span>
                </li>
              ))}
            </ol>
          )}
        </section>
      </div>
      <ChartsPanel task={id} />
      <LogView task={id} live={!final} />
      <SnapshotsPanel task={t} final={final} onChange={detail.reload} />
      <div class="columns">
        <FilesPanel task={id} canUpload={t.state === "pending" || t.state === "running"} />
        <CostPanel task={t} />
      </div>
    </section>
  );
}
