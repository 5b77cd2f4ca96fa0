// The task list: every task the caller may see, read page by page with the API's cursor and
// its server-side filters (project, state, node), then sorted and searched here; rows update
// live from the event stream and are virtualised, so 10,000 tasks stay responsive. The
// filters live in the URL's query, so a filtered list can be bookmarked.
import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import { call } from "../api/client";
import { useLive } from "../api/live";
import { session } from "../api/session";
import type { Task, UsageOverview } from "../api/types.gen";
import { VirtualList } from "../components/VirtualList";
import { Empty, ErrorBox, StateBadge, useNow } from "../components/ui";
import { formatAge, formatGpuRequest, formatMoney, formatNumber } from "../lib/format";
import { useTaskCost } from "../lib/cost";
import { useBatch, useStore } from "../lib/store";
import { Link, navigate, useLocation } from "../router";

const kStates: Task["state"][] = ["pending", "scheduled", "starting", "running", "succeeded", "failed", "stopped", "preempted", "lost"];
const kFinal = ["succeeded", "failed", "stopped", "lost"];
const kPage = 1000;
const kRowHeight = 36;

type SortKey = "seq" | "name" | "state" | "user" | "runtime";
const kSorts: Array<[SortKey, string]> = [
  ["seq", "Submitted"],
  ["name", "Name"],
  ["state", "State"],
  ["user", "User"],
  ["runtime", "Runtime"],
];

function runtimeMs(t: Task, now: number): number {
  if (!t.started_ms) return 0;
  return (t.finished_ms || now) - t.started_ms;
}

function CostCell({ t }: { t: Task }) {
  const micros = useTaskCost(t.id, kFinal.includes(t.state));
  return <span>{micros === undefined ? "…" : formatMoney(micros)}</span>;
}

function metricsText(reported: Record<string, number> | undefined): string {
  if (!reported) return "";
  return Object.entries(reported)
    .slice(0, 3)
    .map(([k, v]) => `${k}=${formatNumber(v)}`)
    .join(" ");
}

export function Tasks() {
  const me = useStore(session)!;
  const loc = useLocation();
  const now = useNow(1000);
  const q = loc.query;
  const states = (q.get("state") ?? "").split(",").filter((s) => kStates.includes(s as Task["state"])) as Task["state"][];
  const project = q.get("project") ?? "";
  const node = q.get("node") ?? "";
  const search = q.get("q") ?? "";
  const sort = (q.get("sort") as SortKey) || "seq";
  const desc = q.get("dir") !== "asc";

  const [tasks, setTasks] = useState<Map<string, Task>>(new Map());
  const [error, setError] = useState<unknown>(null);
  const [loading, setLoading] = useState(true);
  const [complete, setComplete] = useState(false);
  const [usage, setUsage] = useState<UsageOverview | null>(null);
  const [searchText, setSearchText] = useState(search);
  const gen = useRef(0);

  const setQuery = (changes: Record<string, string>) => {
    const next = new URLSearchParams(q);
    for (const [k, v] of Object.entries(changes)) {
      if (v) next.set(k, v);
      else next.delete(k);
    }
    const s = next.toString();
    navigate(`/tasks${s ? "?" + s : ""}`, true);
  };

  const filterKey = `${states.join(",")}|${project}|${node}`;
  const load = () => {
    const my = ++gen.current;
    setLoading(true);
    setError(null);
    setComplete(false);
    const acc = new Map<string, Task>();
    const page = async (after?: string) => {
      const r = await call("listTasks", { query: { state: states.length ? states : undefined, project: project || undefined, node: node || undefined, limit: kPage, after } });
      if (my !== gen.current) return;
      for (const t of r.tasks) acc.set(t.id, t);
      setTasks(new Map(acc));
      if (r.next_after) await page(r.next_after);
      else setComplete(true);
    };
    page()
      .catch((e) => my === gen.current && setError(e))
      .finally(() => my === gen.current && setLoading(false));
  };
  useEffect(load, [filterKey]);
  useEffect(() => {
    const get = () => call("getUsage").then(setUsage, () => {});
    get();
    const t = window.setInterval(get, 15_000);
    return () => window.clearInterval(t);
  }, []);
  useEffect(() => {
    const t = window.setTimeout(() => searchText !== search && setQuery({ q: searchText }), 200);
    return () => window.clearTimeout(t);
  }, [searchText]);

  const matchesServerFilter = (t: Task) =>
    (!states.length || states.includes(t.state)) && (!project || t.project === project) && (!node || t.placement?.node === node);
  // Live changes, applied in batches (a busy pool changes many tasks a second).
  const change = useBatch<{ id: string; task: Task | null }>(
    (batch) =>
      setTasks((old) => {
        const next = new Map(old);
        for (const { id, task } of batch) {
          if (task && matchesServerFilter(task)) next.set(id, task);
          else next.delete(id);
        }
        return next;
      }),
    250,
  );
  useLive("task", (t) => change({ id: t.id, task: t }), [filterKey]);
  useLive("task_deleted", (e) => change({ id: e.id, task: null }), []);
  useLive("resync", load, [filterKey]);

  const reported = useMemo(() => new Map((usage?.tasks ?? []).map((r) => [r.id, r.reported])), [usage]);
  const rows = useMemo(() => {
    const needle = search.toLowerCase();
    const list = [...tasks.values()].filter((t) => !needle || t.id.includes(needle) || t.name.toLowerCase().includes(needle) || t.user.toLowerCase().includes(needle) || t.command.join(" ").toLowerCase().includes(needle));
    const key = (t: Task): string | number => {
      switch (sort) {
        case "name":
          return t.name.toLowerCase();
        case "state":
          return kStates.indexOf(t.state);
        case "user":
          return t.user;
        case "runtime":
          return runtimeMs(t, now);
        default:
          return t.seq;
      }
    };
    list.sort((a, b) => {
      const ka = key(a);
      const kb = key(b);
      const c = ka < kb ? -1 : ka > kb ? 1 : a.seq - b.seq;
      return desc ? -c : c;
    });
    return list;
  }, [tasks, search, sort, desc, sort === "runtime" ? now : 0]);

  const toggleState = (s: Task["state"]) => {
    const next = states.includes(s) ? states.filter((x) => x !== s) : [...states, s];
    setQuery({ state: next.join(",") });
  };

  return (
    <section class="page page-wide" data-testid="page-tasks" aria-labelledby="tasks-title">
      <div class="page-head">
        <h1 id="tasks-title">Tasks</h1>
        <Link href="/tasks/new" class="btn btn-primary" data-testid="tasks-new">
          Create task
        </Link>
      </div>
      <form class="filters" onSubmit={(e) => e.preventDefault()} role="search" aria-label="Filter tasks">
        <fieldset class="state-filter">
          <legend>State</legend>
          {kStates.map((s) => (
            <label key={s} class="chip">
              <input type="checkbox" checked={states.includes(s)} onChange={() => toggleState(s)} data-testid={`tasks-filter-state-${s}`} /> {s}
            </label>
          ))}
        </fieldset>
        <label>
          Project
          <select value={project} onChange={(e) => setQuery({ project: (e.currentTarget as HTMLSelectElement).value })} data-testid="tasks-filter-project">
            <option value="">all</option>
            {(me.projects.includes(project) || !project ? me.projects : [...me.projects, project]).map((p) => (
              <option key={p} value={p}>
                {p}
              </option>
            ))}
          </select>
        </label>
        <label>
          Node
          <input value={node} placeholder="any" onChange={(e) => setQuery({ node: (e.currentTarget as HTMLInputElement).value.trim() })} data-testid="tasks-filter-node" size={10} />
        </label>
        <label>
          Search
          <input type="search" value={searchText} placeholder="id, name, user, command" onInput={(e) => setSearchText((e.currentTarget as HTMLInputElement).value)} data-testid="tasks-search" />
        </label>
        <label>
          Sort
          <select value={sort} onChange={(e) => setQuery({ sort: (e.currentTarget as HTMLSelectElement).value })} data-testid="tasks-sort">
            {kSorts.map(([k, label]) => (
              <option key={k} value={k}>
                {label}
              </option>
            ))}
          </select>
        </label>
        <button type="button" class="btn btn-plain" onClick={() => setQuery({ dir: desc ? "asc" : "" })} data-testid="tasks-sort-dir" aria-label={desc ? "Descending; switch to ascending" : "Ascending; switch to descending"}>
          {desc ? "↓" : "↑"}
        </button>
      </form>
      <ErrorBox error={error} testid="tasks-error" />
      <div class="muted" role="status" data-testid="tasks-count">
        {rows.length} of {tasks.size} task{tasks.size === 1 ? "" : "s"}
        {loading && !complete ? ` — loading more…` : ""}
      </div>
      <div class="task-table" role="table" aria-label="Tasks" aria-rowcount={rows.length}>
        <div class="task-row task-head" role="row">
          <span role="columnheader">Task</span>
          <span role="columnheader">Name</span>
          <span role="columnheader">State</span>
          <span role="columnheader" class="hide-narrow hide-mid">User</span>
          <span role="columnheader">GPUs</span>
          <span role="columnheader" class="hide-narrow">Node</span>
          <span role="columnheader" class="num">Runtime</span>
          <span role="columnheader" class="num hide-narrow">Cost</span>
          <span role="columnheader" class="hide-narrow hide-mid">Metrics</span>
        </div>
        {!loading && rows.length === 0 ? (
          <Empty>{tasks.size === 0 ? "No tasks match these filters." : "No task matches the search."}</Empty>
        ) : (
          <VirtualList
            items={rows}
            rowHeight={kRowHeight}
            height={Math.max(240, Math.min(rows.length * kRowHeight, 560))}
            testid="tasks-list"
            label="Task rows"
            render={(t) => (
              <div key={t.id} class="task-row" role="row" data-testid="task-row" data-task={t.id} data-state={t.state}>
                <span role="cell">
                  <Link href={`/tasks/${t.id}`} data-testid="task-row-link">
                    {t.id}
                  </Link>
                </span>
                <span role="cell" class="ellipsis" title={t.name}>
                  {t.name || "-"}
                </span>
                <span role="cell">
                  <StateBadge state={t.state} held={t.held} testid="task-row-state" />
                </span>
                <span role="cell" class="hide-narrow hide-mid">{t.user}</span>
                <span role="cell">{formatGpuRequest(t)}</span>
                <span role="cell" class="hide-narrow">{t.placement?.node ?? "-"}</span>
                <span role="cell" class="num">{t.started_ms ? formatAge(now - runtimeMs(t, now), now) : "-"}</span>
                <span role="cell" class="num hide-narrow">
                  <CostCell t={t} />
                </span>
                <span role="cell" class="ellipsis hide-narrow hide-mid" data-testid="task-row-metrics">
                  {metricsText(reported.get(t.id))}
                </span>
              </div>
            )}
          />
        )}
      </div>
    </section>
  );
}
