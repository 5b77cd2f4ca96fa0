// The overview: the pool at a glance — GPUs by model (total / in use / free, whole and
// fractional), a live heat map of every GPU's utilisation and memory with MIG instances drawn
// inside their GPU, the queue (depth and the oldest waiting task: the server's count, so a queue
// of 20,000 costs one small answer), the user's running tasks and what their projects spent
// today. Node usage arrives on the live stream (nodes=true); task changes re-read the queue.
import { useMemo, useState } from "preact/hooks";
import { call } from "../api/client";
import { useLive, useLiveWatch } from "../api/live";
import { session } from "../api/session";
import type { GpuSample, Node, NodeSample, Task } from "../api/types.gen";
import { Empty, ErrorBox, Loading, StateBadge, useAsync, useNow } from "../components/ui";
import { formatAge, formatGpuRequest, formatMilli, formatMoney } from "../lib/format";
import { gpusByModel } from "../lib/pool";
import { useBatch, useStore } from "../lib/store";
import { Link } from "../router";

const kHolding = ["scheduled", "starting", "running"];

async function allTasks(states: string[], signal: AbortSignal): Promise<Task[]> {
  const out: Task[] = [];
  let after: string | undefined;
  do {
    const page = await call("listTasks", { query: { state: states as Task["state"][], limit: 1000, after }, signal });
    out.push(...page.tasks);
    after = page.next_after ?? undefined;
  } while (after && out.length < 20_000);
  return out;
}

function startOfTodayUtc(now: number): number {
  const d = new Date(now);
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate());
}

function heat(pct: number | null | undefined): string {
  if (pct === null || pct === undefined) return "heat-na";
  return `heat-${Math.min(10, Math.max(0, Math.round(pct / 10)))}`;
}

function GpuCell({ node, index, sample }: { node: Node; index: number; sample: GpuSample | undefined }) {
  const g = node.gpus.find((x) => x.index === index)!;
  const memPct = sample?.mem_used_mib !== null && sample?.mem_used_mib !== undefined && g.mem_mib > 0 ? (100 * sample.mem_used_mib) / g.mem_mib : null;
  const title = `${node.name} GPU ${index} (${g.model}): ${sample?.util_pct ?? "-"}% util, ${memPct === null ? "-" : memPct.toFixed(0)}% memory`;
  return (
    <div class={`gpu ${heat(sample?.util_pct)}`} title={title} data-testid={`heat-gpu-${node.name}-${index}`} data-util={sample?.util_pct ?? ""} role="img" aria-label={title}>
      <span class="gpu-label">{index}</span>
      {g.mig_enabled && (
        <div class="mig">
          {g.mig_instances.map((m) => (
            <span
              key={m.start}
              class={m.in_use ? "mig-inst mig-used" : "mig-inst"}
              style={{ left: `${(m.start / g.mig_memory_slots) * 100}%`, width: `${(m.memory_slices / g.mig_memory_slots) * 100}%` }}
              title={`${m.profile} at slot ${m.start}${m.in_use ? " (in use)" : ""}`}
              data-testid={`heat-mig-${node.name}-${index}-${m.start}`}
            />
          ))}
        </div>
      )}
      <span class="gpu-mem" style={{ width: `${memPct ?? 0}%` }} />
    </div>
  );
}

export function Overview() {
  const me = useStore(session)!;
  const now = useNow(5000);
  useLiveWatch({ nodes: true });
  const nodes = useAsync((signal) => call("listNodes", { signal }).then((r) => r.nodes), []);
  const usage = useAsync((signal) => call("getUsage", { signal }), []);
  const tasks = useAsync((signal) => allTasks(kHolding, signal), []);
  const spend = useAsync(async (signal) => {
    const from = startOfTodayUtc(Date.now());
    const projects = me.role === "admin" ? (await call("listProjects", { signal })).projects.map((p) => p.id) : me.projects;
    const statements = await Promise.all(projects.map((id) => call("getStatement", { path: { id }, query: { from_ms: from }, signal })));
    return statements.reduce((sum, s) => sum + s.usage_micros, 0);
  }, [me.user_id]);
  const [samples, setSamples] = useState<Record<string, NodeSample>>({});

  const addSample = useBatch<{ node: string; sample: NodeSample }>((batch) => setSamples((old) => {
    const next = { ...old };
    for (const e of batch) next[e.node] = e.sample;
    return next;
  }), 500);
  useLive("node_usage", addSample, []);
  useLive("node", (n) => nodes.set((old) => (old ? (old.some((x) => x.name === n.name) ? old.map((x) => (x.name === n.name ? n : x)) : [...old, n]) : old)), []);
  // The queue card is the server's count: task changes (submitted, placed, ended) re-read it,
  // batched, so a burst of submissions costs one request.
  const requeue = useBatch<Task>(() => usage.reload(), 1000);
  useLive(
    "task",
    (t) => {
      tasks.set((old) => {
        if (!old) return old;
        const rest = old.filter((x) => x.id !== t.id);
        return kHolding.includes(t.state) ? [...rest, t] : rest;
      });
      requeue(t);
    },
    [],
  );
  useLive("task_deleted", (e) => tasks.set((old) => old?.filter((x) => x.id !== e.id)), []);
  useLive(
    "resync",
    () => {
      nodes.reload();
      usage.reload();
      tasks.reload();
    },
    [],
  );

  const latest = useMemo(() => {
    const out: Record<string, NodeSample | null> = {};
    for (const n of usage.data?.nodes ?? []) out[n.name] = n.latest;
    return { ...out, ...samples };
  }, [usage.data, samples]);

  const models = gpusByModel(nodes.data ?? []);
  const queue = usage.data?.queue;
  const mine = (tasks.data ?? []).filter((t) => t.user === me.user_id);

  return (
    <section class="page" data-testid="page-overview" aria-labelledby="overview-title">
      <h1 id="overview-title">Overview</h1>
      <div class="cards">
        <div class="card" data-testid="overview-queue">
          <h2>Queue</h2>
          {!queue ? (
            usage.error ? <ErrorBox error={usage.error} /> : <Loading what="the queue" />
          ) : (
            <>
              <div class="big" data-testid="queue-depth">
                {queue.waiting}
              </div>
              <div class="muted">
                waiting{queue.held ? `, ${queue.held} held` : ""}
                {queue.oldest_task && (
                  <>
                    {" "}
                    · oldest{" "}
                    <Link href={`/tasks/${queue.oldest_task}`} data-testid="queue-oldest">
                      {queue.oldest_task}
                    </Link>{" "}
                    waiting {formatAge(queue.oldest_since_ms ?? now, now)}
                  </>
                )}
              </div>
            </>
          )}
        </div>
        <div class="card" data-testid="overview-spend">
          <h2>Spend today</h2>
          {spend.error ? <ErrorBox error={spend.error} /> : spend.data === undefined ? <Loading what="today's spend" /> : <div class="big" data-testid="spend-today">{formatMoney(spend.data)}</div>}
          <div class="muted">{me.role === "admin" ? "all projects" : me.projects.join(", ")}, since 00:00 UTC</div>
        </div>
      </div>

      <h2>GPUs by model</h2>
      <ErrorBox error={nodes.error} />
      {nodes.loading && !nodes.data ? (
        <Loading what="nodes" />
      ) : models.length === 0 ? (
        <Empty>No GPUs in the pool yet: nodes join with a join token (Nodes page).</Empty>
      ) : (
        <table class="table" data-testid="gpu-models">
          <thead>
            <tr>
              <th scope="col">Model</th>
              <th scope="col" class="num">Total</th>
              <th scope="col" class="num">In use</th>
              <th scope="col" class="num">Free</th>
              <th scope="col" class="num">Wholly free</th>
            </tr>
          </thead>
          <tbody>
            {models.map((m) => (
              <tr key={m.model} data-testid={`gpu-model-${m.model}`}>
                <th scope="row">{m.model}</th>
                <td class="num">{m.gpus}</td>
                <td class="num" data-testid="gpu-model-in-use">{formatMilli(m.usedMilli)}</td>
                <td class="num" data-testid="gpu-model-free">{formatMilli(m.freeMilli)}</td>
                <td class="num">{m.wholeFree}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}

      <h2>GPU heat map</h2>
      <p class="muted legend">
        Colour: utilisation (<span class="swatch heat-0" /> 0% … <span class="swatch heat-10" /> 100%); bar: memory in use; boxes: MIG instances (filled: in use).
      </p>
      <div class="heatmap" data-testid="heatmap">
        {(nodes.data ?? []).map((n) => {
          const s = latest[n.name];
          return (
            <div key={n.name} class={n.status === "lost" ? "heat-node lost" : "heat-node"} data-testid={`heat-node-${n.name}`}>
              <div class="heat-node-name">
                {n.name} {n.status === "lost" && <span class="badge badge-bad">lost</span>}
              </div>
              <div class="gpus">
                {n.gpus.map((g) => (
                  <GpuCell key={g.index} node={n} index={g.index} sample={s?.gpus?.find((x) => x.index === g.index)} />
                ))}
                {n.gpus.length === 0 && <span class="muted">no GPUs</span>}
              </div>
            </div>
          );
        })}
      </div>

      <h2>My running tasks</h2>
      {tasks.loading && !tasks.data ? (
        <Loading what="tasks" />
      ) : mine.length === 0 ? (
        <Empty>
          Nothing running. <Link href="/tasks/new">Create a task</Link>.
        </Empty>
      ) : (
        <table class="table" data-testid="my-running">
          <thead>
            <tr>
              <th scope="col">Task</th>
              <th scope="col">Name</th>
              <th scope="col">State</th>
              <th scope="col">GPUs</th>
              <th scope="col">Node</th>
              <th scope="col" class="num">Runtime</th>
            </tr>
          </thead>
          <tbody>
            {mine.map((t) => (
              <tr key={t.id}>
                <td>
                  <Link href={`/tasks/${t.id}`}>{t.id}</Link>
                </td>
                <td>{t.name}</td>
                <td>
                  <StateBadge state={t.state} />
                </td>
                <td>{formatGpuRequest(t)}</td>
                <td>{t.placement?.node ?? "-"}</td>
                <td class="num">{formatAge(t.started_ms, now)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
